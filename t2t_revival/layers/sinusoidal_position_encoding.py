"""The fixed sinusoidal positional encoding (section 3.5)."""

import math

import keras
from keras import ops

LAYOUTS = ("paper", "t2t", "marian")


@keras.saving.register_keras_serializable(package="t2t_revival")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """`PE(pos, 2i) = sin(pos / 10000^(2i/d))`, `PE(pos, 2i+1) = cos(...)` (3.5).

    Sines and cosines are interleaved as in the paper's formula. No weights.
    `layout="t2t"` is tensor2tensor's `get_timing_signal_1d` instead: all d/2
    sines, then all d/2 cosines, of timescales `10000^(i / (d/2 - 1))`,
    i = 0 .. d/2-1 (T2T checkpoints were trained with it). `layout="marian"`
    is Marian's (and Hugging Face's `MarianSinusoidalPositionalEmbedding`):
    the paper's frequencies, all d/2 sines, then all d/2 cosines.

    Args:
        max_wavelength: the 10000 of the formula.
        layout: "paper", "t2t" or "marian".

    Call arguments:
        inputs: `[batch, length, d_model]` (only its shape is read).
        start_index: int32 scalar, position of the first row (for incremental
            decoding).
        positions: optional int `[batch, length]`, each token's own position
            (packed batches: restarting at 0 in each segment); overrides
            `start_index`.

    Returns:
        `[length, d_model]` encodings of positions `start_index ...` (or
        `[batch, length, d_model]` of `positions`), in the compute dtype, to
        add to `inputs`.
    """

    def __init__(self, max_wavelength=10000.0, layout="paper", **kwargs):
        super().__init__(**kwargs)
        if layout not in LAYOUTS:
            raise ValueError(f"SinusoidalPositionEncoding layout must be one of {LAYOUTS}. "
                             f"Received: layout={layout!r}")
        self.max_wavelength = max_wavelength
        self.layout = layout

    def call(self, inputs, start_index=0, positions=None):
        length, d_model = ops.shape(inputs)[1], inputs.shape[-1]
        if d_model % 2:
            raise ValueError(
                "SinusoidalPositionEncoding needs an even d_model (sin/cos pairs). "
                f"Received: d_model={d_model}")
        if positions is None:
            positions = ops.arange(length, dtype="int32") + start_index  # (T,)
        position = ops.cast(positions, "float32")  # (T,) or (B, T)
        if self.layout == "t2t":  # 1 / 10000^(i / (d/2 - 1))
            step = math.log(self.max_wavelength) / max(d_model // 2 - 1, 1)
            inv_freq = ops.exp(ops.arange(d_model // 2, dtype="float32") * -step)
            angle = position[..., None] * inv_freq  # (T, D/2) or (B, T, D/2)
            return ops.cast(ops.concatenate([ops.sin(angle), ops.cos(angle)], axis=-1),
                            self.compute_dtype)  # (T, D) or (B, T, D)
        # 1 / 10000^(2i/d) for i = 0 .. d/2-1
        inv_freq = ops.exp(ops.arange(0, d_model, 2, dtype="float32")
                           * (-math.log(self.max_wavelength) / d_model))
        angle = position[..., None] * inv_freq  # (T, D/2) or (B, T, D/2)
        if self.layout == "marian":
            return ops.cast(ops.concatenate([ops.sin(angle), ops.cos(angle)], axis=-1),
                            self.compute_dtype)  # (T, D) or (B, T, D)
        pe = ops.stack([ops.sin(angle), ops.cos(angle)], axis=-1)  # (..., T, D/2, 2)
        # (T, D) or (B, T, D), interleaved sin, cos
        pe = ops.reshape(pe, tuple(ops.shape(angle)[:-1]) + (d_model,))
        return ops.cast(pe, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[1:])

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "layout": self.layout})
        return config
