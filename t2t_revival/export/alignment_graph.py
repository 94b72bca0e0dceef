"""Word alignments in the SavedModel's graph (`TranslationModule`'s
`translate_with_alignments` signature): the rules of
`decode/word_alignment.py` (a piece's word from the text of the pieces up to
it; the word attention; one link per output word, Pharaoh) written with
TensorFlow ops and the vocabulary's in-graph tokenizer, so that a TF Serving
client gets the same lines as `t2t-decoder --decode_hparams alignments=true`.
"""

from __future__ import annotations

import tensorflow as tf

from t2t_revival.decode.word_alignment import combine_heads, word_attention
from t2t_revival.special_ids import EOS_ID, PAD_ID


def graph_piece_words(tokenizer, ids, words):
    """int32 `[B, T]` each token's word (`word_alignment.piece_words`), -1
    at EOS, PAD and after the first EOS.

    Args:
        tokenizer: the vocabulary's `tf_tokenizer()` (its `detokenize`).
        ids: int32 `[B, T]` token ids.
        words: int32 `[B]` whitespace words of each row's line.
    """
    batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
    token = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))          # [B, T]
    position = tf.range(length)
    upto = position[None, :] <= position[:, None]                           # [k, T]
    keep = tf.logical_and(token[:, None, :], upto[None])                    # [B, k, T]
    prefixes = tf.ragged.boolean_mask(
        tf.reshape(tf.tile(ids[:, None, :], [1, length, 1]), [-1, length]),
        tf.reshape(keep, [-1, length]))
    text = tokenizer.detokenize(prefixes)                                   # [B*k]
    count = tf.cast(tf.strings.split(text).row_lengths(), tf.int32)
    open_end = tf.logical_or(tf.equal(text, ""), tf.strings.regex_full_match(text, r"(?s).*\s"))
    index = tf.reshape(count - 1 + tf.cast(open_end, tf.int32), [batch, length])
    index = tf.clip_by_value(index, 0, tf.maximum(words[:, None] - 1, 0))
    return tf.where(tf.logical_and(token, words[:, None] > 0), index, -1)


def graph_alignments(model, layer: int, heads: str, tokenizers, inputs, targets,
                     source_lines, target_lines):
    """tf.string `[B]` Pharaoh lines of (source, output) rows.

    Args:
        model: the `Transformer`.
        layer, heads: the decode hparams' `alignment_layer` (an index in
            [0, layers)) and `alignment_heads`.
        tokenizers: the vocabulary's `tf_tokenizer()` and
            `tf_target_tokenizer()` (the source's and the outputs' pieces).
        inputs: int32 `[B, S]` the source ids the search read (EOS, PAD).
        targets: int32 `[B, T]` its output ids (EOS, PAD).
        source_lines, target_lines: tf.string `[B]`, the texts whose
            whitespace words are aligned.
    """
    source_words = tf.cast(tf.strings.split(source_lines).row_lengths(), tf.int32)
    target_words = tf.cast(tf.strings.split(target_lines).row_lengths(), tf.int32)
    encoder_output, encoder_padding = model.encode(inputs, training=False)
    _, attention = model.decode(targets, encoder_output, encoder_padding, training=False,
                                return_attention=True)
    merged = word_attention(combine_heads(attention["cross"], layer, heads),
                            graph_piece_words(tokenizers[0], inputs, source_words),
                            graph_piece_words(tokenizers[1], targets, target_words))
    source_of_target = tf.argmax(merged, axis=2, output_type=tf.int32)      # [B, T]
    t = tf.range(tf.shape(source_of_target)[1])
    links = tf.strings.as_string(source_of_target) + "-" + tf.strings.as_string(t)[None, :]
    present = tf.logical_and(t[None, :] < target_words[:, None], source_words[:, None] > 0)
    return tf.strings.reduce_join(tf.ragged.boolean_mask(links, present), axis=1,
                                  separator=" ")
