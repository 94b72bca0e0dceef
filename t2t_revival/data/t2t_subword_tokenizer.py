"""`T2TSubwordTokenizer`: tensor2tensor's SubwordTextEncoder as TensorFlow ops.

The in-graph twin of `T2TSubwordVocabulary` (same ids, same text), so a
SavedModel of a run with a T2T vocabulary takes and returns strings. Only
TensorFlow and tensorflow-text ops (which TF Serving links in):

    tokenize:   split into characters, group them into alphanumeric / other
                runs (RE2's \\p{L}\\p{N}) -> drop inner single spaces -> escape each character (a
                StaticHashTable holds the alphabet) -> WordpieceTokenizer with
                suffix_indicator "" (greedy longest match first, as T2T)
    detokenize: gather the subtokens -> join -> split at "_" -> regex_split
                the escapes and unescape them -> join, a space between two
                alphanumeric tokens

One difference from Python: an escape `\\N;` of a surrogate code point
(which no encoder writes) decodes to U+3013 here, to a lone surrogate there.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf
import tensorflow_text as tf_text

_ALPHANUMERIC = r"[\p{L}\p{N}]"
_ESCAPES = r"\\u|\\\\|\\[0-9]+;"
_ALPHANUMERIC_FIRST = r"(?s)[\p{L}\p{N}].*"
_UNDEFINED_CHAR = 0x3013      # T2T's stand-in for an escape of no valid code point
_MAX_CODE_DIGITS = 7          # more digits than any code point (0x10FFFF = 1114111)
_MAX_BYTES_PER_WORD = 1 << 24


def _by_rows(values, like: tf.RaggedTensor, keep=None) -> tf.RaggedTensor:
    """`values` [N] regrouped into the rows of `like` (N = its flat size),
    only where `keep` [N] (default: all)."""
    rowids = like.value_rowids()
    if keep is not None:
        values, rowids = tf.boolean_mask(values, keep), tf.boolean_mask(rowids, keep)
    return tf.RaggedTensor.from_value_rowids(values, rowids, nrows=like.nrows())


class T2TSubwordTokenizer(tf.Module):
    """tokenize(strings [B]) -> RaggedTensor int32 [B, (len)] without EOS;
    detokenize(ids int [B, (len)]) -> strings [B] (strip EOS/PAD first).

    Args:
        pieces: the subtoken of every id (`T2TSubwordVocabulary.pieces`).
        alphabet: the characters kept as they are (`T2TSubwordVocabulary.alphabet`).
    """

    def __init__(self, pieces: Sequence[str], alphabet):
        super().__init__(name="t2t_subword_tokenizer")
        ids = {s: i for i, s in enumerate(pieces) if s}   # later duplicates win, as in T2T
        self._pieces = tf.constant(list(pieces), tf.string)
        self._vocab_size = len(pieces)
        self._subtokens = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(ids), tf.string), tf.constant(list(ids.values()), tf.int64)),
            default_value=-1)
        kept = sorted(c for c in alphabet if c != "\n")
        self._alphabet = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(kept, tf.string), tf.ones([len(kept)], tf.int64)),
            default_value=0)
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._subtokens, suffix_indicator="", max_bytes_per_word=_MAX_BYTES_PER_WORD,
            max_chars_per_token=max(len(s) for s in pieces), token_out_type=tf.int64,
            unknown_token=None)

    def tokenize(self, strings) -> tf.RaggedTensor:
        """strings tf.string [B] -> ids RaggedTensor int32 [B, (len)]."""
        runs = self._runs(tf.convert_to_tensor(strings, tf.string))           # [B, (N)]
        flat = runs.flat_values                                              # [N]
        rowids = runs.value_rowids()
        index = tf.range(tf.size(flat, out_type=tf.int64))
        first = tf.equal(index, tf.gather(runs.row_starts(), rowids))
        last = tf.equal(index, tf.gather(runs.row_limits(), rowids) - 1)
        keep = tf.logical_or(tf.not_equal(flat, " "), tf.logical_or(first, last))
        tokens = _by_rows(flat, runs, keep)                                  # [B, (T)]
        escaped = self._escape(tokens.flat_values)                           # [T_all]
        subtokens = self._wordpiece.tokenize(escaped)                        # [T_all, (P)]
        ids = tokens.with_flat_values(subtokens).merge_dims(1, 2)            # [B, (len)]
        return tf.cast(ids, tf.int32)

    @staticmethod
    def _runs(strings) -> tf.RaggedTensor:
        """strings [B] -> their alphanumeric and other runs [B, (N)].

        Character by character (tensorflow-text's regex_split would stop at a NUL).
        """
        chars = tf.strings.unicode_split(strings, "UTF-8")                   # [B, (C)]
        c = chars.flat_values
        rowids = chars.value_rowids()
        alnum = tf.strings.regex_full_match(c, _ALPHANUMERIC)
        index = tf.range(tf.size(c, out_type=tf.int64))
        row_start = tf.equal(index, tf.gather(chars.row_starts(), rowids))
        previous = tf.concat([[False], alnum[:-1]], axis=0)
        start = tf.logical_or(row_start, tf.not_equal(alnum, previous))
        run = tf.cumsum(tf.cast(start, tf.int64)) - 1                        # [C_all]
        text = tf.strings.reduce_join(tf.RaggedTensor.from_value_rowids(
            c, run, nrows=tf.reduce_sum(tf.cast(start, tf.int64))), axis=-1)
        return tf.RaggedTensor.from_value_rowids(text, tf.boolean_mask(rowids, start),
                                                 nrows=chars.nrows())

    def _escape(self, tokens):
        """tokens tf.string [T] -> T2T's escaped tokens [T], `_`-terminated."""
        chars = tf.strings.unicode_split(tokens, "UTF-8")                    # [T, (C)]
        codes = tf.strings.unicode_decode(tokens, "UTF-8")                   # [T, (C)]
        c = chars.flat_values
        spelled = "\\" + tf.strings.as_string(codes.flat_values) + ";"
        kept = tf.greater(self._alphabet.lookup(c), 0)
        out = tf.where(tf.equal(c, "\\"), "\\\\",
                       tf.where(tf.equal(c, "_"), "\\u", tf.where(kept, c, spelled)))
        return tf.strings.reduce_join(chars.with_flat_values(out), axis=-1) + "_"

    def detokenize(self, ids) -> tf.Tensor:
        """ids int [B, (len)] (ragged or dense; no EOS/PAD) -> text tf.string [B]."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int64)
        flat = ids.flat_values
        known = tf.logical_and(flat >= 0, flat < self._vocab_size)
        pieces = tf.where(known, tf.gather(self._pieces, tf.where(known, flat, 0)), "")
        joined = tf.strings.reduce_join(ids.with_flat_values(pieces), axis=-1)   # [B]
        parts = tf.strings.split(joined, "_")                                # [B, (P)]
        parts = _by_rows(parts.flat_values, parts, tf.not_equal(parts.flat_values, ""))
        tokens = self._unescape(parts.flat_values)                          # [P_all]
        tokens = _by_rows(tokens, parts, tf.not_equal(tokens, ""))           # [B, (T)]
        flat_tokens = tokens.flat_values
        alnum = tf.strings.regex_full_match(flat_tokens, _ALPHANUMERIC_FIRST)
        index = tf.range(tf.size(flat_tokens, out_type=tf.int64))
        first = tf.equal(index, tf.gather(tokens.row_starts(), tokens.value_rowids()))
        previous = tf.concat([[False], alnum[:-1]], axis=0)
        space = tf.logical_and(tf.logical_and(alnum, previous), tf.logical_not(first))
        spaced = tf.where(space, " " + flat_tokens, flat_tokens)
        return tf.strings.reduce_join(tokens.with_flat_values(spaced), axis=-1)

    @staticmethod
    def _unescape(parts):
        """Escaped pieces tf.string [P] (no `_`) -> their tokens [P]."""
        units = tf_text.regex_split(parts, _ESCAPES, _ESCAPES)               # [P, (U)]
        u = units.flat_values
        number = tf.strings.regex_full_match(u, r"\\[0-9]+;")
        digits = tf.strings.regex_replace(tf.where(number, u, "\\0;"), r"[\\;]", "")
        short = tf.logical_and(number, tf.strings.length(digits) <= _MAX_CODE_DIGITS)
        code = tf.strings.to_number(tf.where(short, digits, "0"), tf.int64)
        code = tf.where(tf.logical_and(short, code <= 0x10FFFF), code, _UNDEFINED_CHAR)
        char = tf.strings.unicode_encode(tf.cast(code[:, None], tf.int32), "UTF-8",
                                         errors="replace", replacement_char=_UNDEFINED_CHAR)
        out = tf.where(tf.equal(u, "\\u"), "_",
                       tf.where(tf.equal(u, "\\\\"), "\\", tf.where(number, char, u)))
        return tf.strings.reduce_join(units.with_flat_values(out), axis=-1)
