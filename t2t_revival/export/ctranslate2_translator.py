"""Kept for servers that import `CTranslate2Translator` from here: it lives in
`t2t_revival.decode.ctranslate2_translator` now, beside the other engines."""

from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator  # noqa: F401
