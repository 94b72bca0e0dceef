"""Kept for servers that import `LiteRTTranslator` from here: it lives in
`t2t_revival.decode.litert_translator` now, beside the other engines."""

from t2t_revival.decode.litert_translator import LiteRTTranslator  # noqa: F401
