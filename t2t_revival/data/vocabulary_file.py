"""Which vocabulary class reads a file: SentencePiece, tensor2tensor's
SubwordTextEncoder, or a Marian model's tokenizer.

    load_vocabulary("run/vocab.model")       -> SubwordVocabulary
    load_vocabulary("run/vocab.subwords")    -> T2TSubwordVocabulary
    load_vocabulary("vocab.translate_ende_wmt32k.32768")  -> T2TSubwordVocabulary
                                                (its first line is quoted)
    load_vocabulary("run/vocab.marian.json") -> MarianVocabulary

The one owner of that choice; every loader (problems, training directories,
the CTranslate2 translator, datagen's workers) calls it. Imports no
TensorFlow.
"""

from __future__ import annotations

import os

from t2t_revival.data.marian_vocabulary import MarianVocabulary
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.run_dir.file_names import MARIAN_VOCAB_FILE, T2T_VOCAB_FILE, VOCAB_FILE

Vocabulary = SubwordVocabulary | T2TSubwordVocabulary | MarianVocabulary

T2T_SUFFIX = ".subwords"
"""How tensor2tensor names its vocabulary files (`vocab.<problem>.<size>.subwords`)."""
MARIAN_SUFFIX = ".marian.json"
"""How a Marian model's tokenizer file ends (`MARIAN_VOCAB_FILE`, a data_dir's copy)."""
SENTENCEPIECE_SUFFIX = ".model"
SUFFIXES = (T2T_SUFFIX, MARIAN_SUFFIX, SENTENCEPIECE_SUFFIX)
"""A data_dir's vocabulary `vocab.<problem><suffix>`, by kind (the first found is read)."""


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


def vocabulary_suffix(path: str) -> str:
    """The suffix a copy of the vocabulary file `path` keeps (`SUFFIXES`)."""
    if str(path).endswith(MARIAN_SUFFIX):
        return MARIAN_SUFFIX
    return T2T_SUFFIX if is_t2t_vocabulary(path) else SENTENCEPIECE_SUFFIX


def load_vocabulary(path: str) -> Vocabulary:
    """The vocabulary in `path`, read by the class its format needs
    (a DataError when missing or unreadable)."""
    kind = vocabulary_suffix(path)
    if kind == MARIAN_SUFFIX:
        return MarianVocabulary(path)
    return T2TSubwordVocabulary(path) if kind == T2T_SUFFIX else SubwordVocabulary(path)


def vocabulary_in(folder: str) -> str:
    """The vocabulary file of a training directory or an export folder:
    `vocab.model`, or `vocab.subwords` or `vocab.marian.json` where only that
    one is there."""
    sentencepiece = os.path.join(folder, VOCAB_FILE)
    if not os.path.isfile(sentencepiece):
        for name in (T2T_VOCAB_FILE, MARIAN_VOCAB_FILE):
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
    return sentencepiece
