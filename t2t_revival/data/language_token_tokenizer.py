"""`LanguageTokenTokenizer`: a multilingual `SubwordVocabulary`'s source side
in the graph: the leading `>>xxx<<` one id, the rest SentencePiece's, a line
without a known token refused (InvalidArgument)."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from t2t_revival.data.language_tokens import GRAPH_PATTERN


class LanguageTokenTokenizer(tf.Module):
    """tokenize(strings [B]) -> RaggedTensor int32 [B, (len)] without EOS: the
    ids of `SubwordVocabulary.encode`; detokenize: SentencePiece's.

    A non-empty string that does not start with one of the tokens fails the
    call with InvalidArgument, the message naming the tokens and the first
    such string (a server answers that request with an error and goes on).

    Args:
        sentencepiece: the vocabulary's `tensorflow_text.SentencepieceTokenizer`
            (int32 ids); kept as `sentencepiece` (the target side's tokenizer).
        tokens: the language tokens; ids: their ids.
    """

    def __init__(self, sentencepiece, tokens: Sequence[str], ids: Sequence[int]):
        super().__init__(name="language_token_tokenizer")
        self.sentencepiece = sentencepiece
        self._message = (f"this model translates into several languages: start each "
                         f"sentence with one of {', '.join(tokens)} (e.g. '{tokens[0]} "
                         f"Hello'); the first sentence without a known one:")
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(tokens)),
                                                tf.constant(list(ids), tf.int32)),
            default_value=-1)

    def tokenize(self, strings) -> tf.RaggedTensor:
        strings = tf.convert_to_tensor(strings, tf.string)
        coded = tf.strings.regex_full_match(strings, GRAPH_PATTERN)            # [B]
        token = tf.where(coded, tf.strings.regex_replace(strings, GRAPH_PATTERN, r"\1"), "")
        rest = tf.where(coded, tf.strings.regex_replace(strings, GRAPH_PATTERN, r"\2"),
                        strings)
        ids = self._table.lookup(token)                                        # [B]
        known = ids >= 0
        empty = tf.equal(tf.strings.length(tf.strings.strip(strings)), 0)
        fine = tf.logical_or(known, empty)
        check = tf.debugging.Assert(
            tf.reduce_all(fine),
            [self._message, tf.boolean_mask(strings, tf.logical_not(fine))[:1]],
            summarize=1)
        with tf.control_dependencies([check]):
            rest = tf.identity(rest)
        pieces = self.sentencepiece.tokenize(rest)                             # [B, (n)]
        leading = tf.ragged.boolean_mask(ids[:, None], known[:, None])         # [B, (0|1)]
        return tf.concat([leading, pieces], axis=1)

    def detokenize(self, ids) -> tf.Tensor:
        return self.sentencepiece.detokenize(ids)
