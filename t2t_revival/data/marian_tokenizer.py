"""`MarianTokenizer`: `MarianVocabulary`'s tokenizer of one side in the graph
(tensorflow-text's SentencePiece op and a lookup table), so that the
SavedModel of an imported Marian run takes text and gives text."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from t2t_revival.special_ids import UNK_ID

_CODE = r"(?s)^(>>.*?<<)(.*)$"
"""A source line's leading language code (MarianTokenizer's remove_language_code)."""
# What Python's str.strip() strips: ASCII whitespace, Unicode separators and
# the few other White_Space characters.
_SPACE = r"[\s\p{Z}\x{1c}-\x{1f}\x{85}]"


class MarianTokenizer(tf.Module):
    """tokenize(strings [B]) -> RaggedTensor int32 [B, (len)] without EOS;
    detokenize(ids int [B, (len)]) -> strings [B] (strip EOS and PAD first):
    `MarianVocabulary`'s `encode` (or `encode_target`) and `decode`.

    Args:
        spm_model: the bytes of the side's SentencePiece model.
        pieces: the side's pieces by our id (`MarianVocabulary.pieces`).
        language_codes: whether a leading `>>xxx<<` is a token of its own
            (the source side).
        side: "source" or "target": the SentencePiece op's name. Two
            SentencePiece tokenizers of one SavedModel must be named apart:
            unnamed, both load as the one first created (tensorflow-text
            2.21's op shares its model by node name), and the target side
            then tokenizes with the source's model.

    Detokenizing joins the pieces, UNK dropped, and turns every `▁` into a
    space, the ends stripped: what SentencePiece's decode and MarianTokenizer
    make of the pieces of Marian's models (no byte pieces).
    """

    def __init__(self, spm_model: bytes, pieces: Sequence[str], language_codes: bool,
                 side: str):
        super().__init__(name=f"marian_{side}_tokenizer")
        import tensorflow_text as tf_text

        self._sentencepiece = tf_text.SentencepieceTokenizer(
            model=spm_model, out_type=tf.string, add_bos=False, add_eos=False,
            name=f"marian_{side}_sentencepiece")
        self._pieces = tf.constant(list(pieces))
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._pieces, tf.range(len(pieces), dtype=tf.int32)), default_value=UNK_ID)
        self._language_codes = language_codes

    def tokenize(self, strings) -> tf.RaggedTensor:
        strings = tf.convert_to_tensor(strings, tf.string)
        if self._language_codes:
            coded = tf.strings.regex_full_match(strings, _CODE)                 # [B]
            code = tf.where(coded, tf.strings.regex_replace(strings, _CODE, r"\1"), "")
            strings = tf.where(coded, tf.strings.regex_replace(strings, _CODE, r"\2"), strings)
            codes = tf.ragged.boolean_mask(code[:, None], coded[:, None])       # [B, (0|1)]
            pieces = tf.concat([codes, self._sentencepiece.tokenize(strings)], axis=1)
        else:
            pieces = self._sentencepiece.tokenize(strings)                      # [B, (n)]
        return tf.ragged.map_flat_values(self._table.lookup, pieces)

    def detokenize(self, ids) -> tf.Tensor:
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids, tf.int32))
        ids = tf.cast(ids, tf.int32)
        ids = tf.ragged.boolean_mask(ids, tf.logical_and(   # UNK and ids past the pieces
            tf.not_equal(ids, UNK_ID), ids < tf.size(self._pieces)))
        pieces = tf.ragged.map_flat_values(lambda i: tf.gather(self._pieces, i), ids)
        text = tf.strings.regex_replace(tf.strings.reduce_join(pieces, axis=-1), "\u2581", " ")
        return tf.strings.regex_replace(text, f"^{_SPACE}+|{_SPACE}+$", "")
