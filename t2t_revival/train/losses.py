"""Label-smoothed cross-entropy over non-pad tokens, as sums (not means).

Returning sums lets the trainer normalize by the global number of target
tokens in a step, across replicas and accumulated micro-batches, rather than
averaging per-replica means.
"""

import math

from keras import ops

from t2t_revival.special_ids import PAD_ID


def smoothed_cross_entropy_sum(logits, targets, label_smoothing):
    """Sum over non-pad tokens of label-smoothed cross-entropy.

    The smoothed target puts 1 - eps on the gold token and eps / (V - 1) on
    every other token (tensor2tensor's convention), and the loss has its
    minimum (the entropy of that target) subtracted, so a perfect model scores 0.

    Args:
        logits: float [batch, length, vocab] (float32 for a stable softmax).
        targets: int [batch, length], PAD_ID where padded.
        label_smoothing: eps_ls of section 5.4.

    Returns:
        (loss_sum, num_tokens): float32 scalars.
    """
    logits = ops.cast(logits, "float32")
    vocab = logits.shape[-1]
    # log p(v) = logits[v] - logsumexp(logits): the [B, T, V] log-probabilities
    # are never materialized, only reductions over the logits (the softmax's
    # [B, T, V] appears once, in the gradient).
    normalizer = ops.logsumexp(logits, axis=-1)                        # (B, T)
    gold = _gold_logits(logits, targets) - normalizer                  # (B, T) log p(gold)
    weights = ops.cast(ops.not_equal(targets, PAD_ID), "float32")      # (B, T)
    confidence = 1.0 - label_smoothing
    if label_smoothing > 0.0:
        low = label_smoothing / (vocab - 1)
        # sum over v != gold of log p(v)
        others = ops.sum(logits, axis=-1) - vocab * normalizer - gold  # (B, T)
        xent = -(confidence * gold + low * others)
        xent = xent + (confidence * math.log(confidence)
                       + (vocab - 1) * low * math.log(low))
    else:
        xent = -gold
    return ops.sum(xent * weights), ops.sum(weights)


def _gold_logits(logits, targets):
    """`logits[b, t, targets[b, t]]`: [batch, length]."""
    return ops.squeeze(ops.take_along_axis(
        logits, ops.expand_dims(ops.cast(targets, "int32"), -1), axis=-1), -1)


def token_metrics_sums(logits, targets):
    """Unsmoothed cross-entropy sum, correct-token count and token count.

    Args:
        logits: float [batch, length, vocab].
        targets: int [batch, length], PAD_ID where padded.

    Returns:
        (xent_sum, num_correct, num_tokens): float32 scalars.
    """
    logits = ops.cast(logits, "float32")
    gold = _gold_logits(logits, targets) - ops.logsumexp(logits, axis=-1)  # (B, T) log p(gold)
    weights = ops.cast(ops.not_equal(targets, PAD_ID), "float32")
    correct = ops.cast(ops.equal(ops.argmax(logits, axis=-1),
                                 ops.cast(targets, "int32")), "float32")
    return -ops.sum(gold * weights), ops.sum(correct * weights), ops.sum(weights)
