"""Token embedding scaled by sqrt(d_model), reusable as the softmax projection (3.4)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="t2t_revival")
class TokenEmbedding(keras.layers.Layer):
    """A `[vocab_size, d_model]` embedding matrix, scaled by sqrt(d_model) (3.4).

    The same matrix serves as the pre-softmax linear transformation through
    `project` when source, target and output share weights. Initialized from
    N(0, d_model^-0.5), so the scaled embeddings have unit variance
    (tensor2tensor's choice).

    Args:
        vocab_size: rows of the matrix.
        d_model: columns.
        scale: multiply by sqrt(d_model) on the way in (False: tensor2tensor's
            multiply_embedding_mode "none").
        zero_pad: the embedding of `pad_id` is zero on the way in (tensor2tensor's
            symbol modality); `project` still uses its row.
        pad_id: the id `zero_pad` zeroes.

    Call arguments:
        ids: int `[batch, length]`.

    Returns:
        `[batch, length, d_model]` in the compute dtype: `E[ids] * sqrt(d_model)`.
    """

    def __init__(self, vocab_size, d_model, scale=True, zero_pad=False, pad_id=0, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        self.zero_pad = zero_pad
        self.pad_id = pad_id

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model ** -0.5))
        self.built = True

    def call(self, ids):
        x = ops.take(ops.cast(self.embeddings, self.compute_dtype), ids, axis=0)
        if self.scale:
            x = x * ops.cast(self.d_model ** 0.5, self.compute_dtype)  # (B, T, D)
        if self.zero_pad:
            x = x * ops.cast(ops.not_equal(ids, self.pad_id), self.compute_dtype)[..., None]
        return x  # (B, T, D)

    def project(self, x):
        """Logits `x E^T`: `[batch, length, d_model]` -> float32 `[batch, length, vocab_size]`."""
        w = ops.cast(self.embeddings, self.compute_dtype)
        logits = ops.einsum("btd,vd->btv", ops.cast(x, self.compute_dtype), w)
        return ops.cast(logits, "float32")

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "d_model": self.d_model,
                       "scale": self.scale, "zero_pad": self.zero_pad, "pad_id": self.pad_id})
        return config
