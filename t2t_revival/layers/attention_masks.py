"""Boolean attention masks (True = may attend), built with `keras.ops` only.

The one owner of the masks of packed batches: several pairs share a row,
each with a segment id 1..n (0 at PAD), and a query may attend only keys of
its own segment. MultiHeadAttention takes any of these as `attention_mask`.
"""

from keras import ops


def segment_mask(query_segmentation, key_segmentation):
    """Attend only within a segment (a packed pair), never to PAD keys.

    Args:
        query_segmentation: int `[batch, T]`, segment id of each query (0 = PAD).
        key_segmentation: int `[batch, S]`, segment id of each key (0 = PAD).
    Returns:
        bool `[batch, 1, T, S]`: query t may attend key s when both are in the
        same segment and that segment is not PAD. (A PAD query sees no key: its
        softmax is uniform over masked logits, finite, and its output unused.)
    """
    q = ops.cast(query_segmentation, "int32")[:, :, None]  # (B, T, 1)
    k = ops.cast(key_segmentation, "int32")[:, None, :]  # (B, 1, S)
    same = ops.logical_and(ops.equal(q, k), ops.greater(k, 0))  # (B, T, S)
    return same[:, None, :, :]  # (B, 1, T, S)


def causal_mask(length):
    """bool `[1, 1, length, length]`: query t may attend keys 0..t."""
    pos = ops.arange(length, dtype="int32")
    return (pos[None, :] <= pos[:, None])[None, None]  # (1, 1, T, T)
