"""Learned positional embeddings (Table 3 row E)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="t2t_revival")
class PositionEmbedding(keras.layers.Layer):
    """A learned `[max_length, d_model]` table of position vectors (Table 3 row E).

    Args:
        max_length: number of positions (rows); positions must stay below it.
        initializer: initializer of the table.

    Call arguments:
        inputs: `[batch, length, d_model]` (only its shape is read).
        start_index: int32 scalar, position of the first row (for incremental
            decoding).
        positions: optional int `[batch, length]`, each token's own position
            (packed batches: restarting at 0 in each segment); overrides
            `start_index`.

    Returns:
        `[length, d_model]` rows `start_index ... start_index + length - 1`
        (or `[batch, length, d_model]` rows of `positions`), in the compute
        dtype, to add to `inputs`.
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer)
        self.built = True

    def call(self, inputs, start_index=0, positions=None):
        if positions is None:
            positions = ops.arange(ops.shape(inputs)[1], dtype="int32") + start_index
        table = ops.cast(self.position_embeddings, self.compute_dtype)
        return ops.take(table, ops.cast(positions, "int32"), axis=0)  # (T, D) or (B, T, D)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[1:])

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length,
                       "initializer": keras.initializers.serialize(self.initializer)})
        return config
