"""Forced decoding: the model's log-probability of given targets.

A sibling of `beam_search` and `sampling` for `t2t-decoder --score_file`
(tensor2tensor's `--score_file`, Marian's `marian-scorer`, OpenNMT-tf's
`score`): one teacher-forced pass of the decoder over each target (EOS
included) gives every target token's log-probability; their sum is the
sequence's log-probability, and divided by the GNMT length penalty the score
beam search gives a finished hypothesis, so a beam output scored here gets
the beam's own score back.

Works with any model that has `encode` and `decode` (`Transformer`,
`Ensemble`). Written with `keras.ops` only.
"""

from __future__ import annotations

from keras import ops

from t2t_revival.decode.beam_search import length_penalty
from t2t_revival.special_ids import PAD_ID


def score_targets(model, inputs, targets, alpha: float, penalty: str = "gnmt"):
    """Log-probabilities of `targets` given `inputs`, by teacher forcing.

    Args:
        model: with `encode(inputs)` and `decode(targets, encoder_output,
            encoder_padding)` -> logits (or log-probabilities) [B, T, V].
        inputs: int32 [B, S] source ids (EOS-terminated), PAD = 0 after.
        targets: int32 [B, T] the tokens to score, PAD = 0 after them. A row
            ending in EOS is scored as a finished hypothesis; a row cut
            without EOS (beam search's fallback at max_decode_length) as it is.
        alpha: the length penalty exponent (beam search's).
        penalty: the length penalty's kind (`beam_search.length_penalty`).

    Returns:
        (log_probs float32 [B], scores float32 [B]): the sum of the target
        tokens' log-probabilities, and that sum / length_penalty(length,
        alpha), length counting every non-PAD token (EOS included).
    """
    targets = ops.cast(targets, "int32")
    encoder_output, encoder_padding = model.encode(inputs, training=False)
    logits = model.decode(targets, encoder_output, encoder_padding, training=False)
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)          # [B, T, V]
    token_log_probs = ops.take_along_axis(log_probs, targets[:, :, None], axis=2)[:, :, 0]
    is_token = ops.not_equal(targets, PAD_ID)                                  # [B, T]
    total = ops.sum(ops.where(is_token, token_log_probs, 0.0), axis=1)         # [B]
    lengths = ops.sum(ops.cast(is_token, "int32"), axis=1)                     # [B]
    return total, total / length_penalty(lengths, alpha, penalty)
