"""Which vocabulary class reads a file: SentencePiece or tensor2tensor's SubwordTextEncoder.

    load_vocabulary("run/vocab.model")       -> SubwordVocabulary
    load_vocabulary("run/vocab.subwords")    -> T2TSubwordVocabulary
    load_vocabulary("vocab.translate_ende_wmt32k.32768")  -> T2TSubwordVocabulary
                                                (its first line is quoted)

The one owner of that choice; every loader (problems, training directories,
the CTranslate2 translator, datagen's workers) calls it. Imports no
TensorFlow.
"""

from __future__ import annotations

import os

from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.run_dir.file_names import T2T_VOCAB_FILE, VOCAB_FILE

T2T_SUFFIX = ".subwords"
"""How tensor2tensor names its vocabulary files (`vocab.<problem>.<size>.subwords`)."""


def is_t2t_vocabulary(path: str) -> bool:
    """Whether `path` is a tensor2tensor vocabulary: named `*.subwords`, or
    text whose first byte is a quote (a SentencePiece model is a protobuf,
    whose first byte is a field tag, never a quote)."""
    if str(path).endswith(T2T_SUFFIX):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(1) in (b"'", b'"')
    except OSError:
        return False


def load_vocabulary(path: str) -> SubwordVocabulary | T2TSubwordVocabulary:
    """The vocabulary in `path`, read by the class its format needs
    (a DataError when missing or unreadable)."""
    return T2TSubwordVocabulary(path) if is_t2t_vocabulary(path) else SubwordVocabulary(path)


def vocabulary_in(folder: str) -> str:
    """The vocabulary file of a training directory or an export folder:
    `vocab.model`, or `vocab.subwords` where only that one is there."""
    sentencepiece = os.path.join(folder, VOCAB_FILE)
    t2t = os.path.join(folder, T2T_VOCAB_FILE)
    return t2t if not os.path.isfile(sentencepiece) and os.path.isfile(t2t) else sentencepiece
