"""The position-wise feed-forward network (section 3.3)."""

import keras

from t2t_revival.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="t2t_revival")
class FeedForwardNetwork(keras.layers.Layer):
    """`FFN(x) = max(0, x W1 + b1) W2 + b2` applied at every position (3.3).

    Args:
        d_ff: inner width.
        dropout: dropout on the ReLU activations (tensor2tensor's relu_dropout).
        activation: the inner activation ("relu" in the paper).
        kernel_initializer: initializer of W1 and W2.

    Call arguments:
        inputs: `[batch, length, d_model]`.
        training: enables dropout.

    Returns:
        `[batch, length, d_model]`.
    """

    def __init__(self, d_ff, dropout=0.0, activation="relu",
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.d_ff = d_ff
        self.dropout = dropout
        self.activation = activation
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        d_model = input_shape[-1]
        self.inner_dense = keras.layers.Dense(
            self.d_ff, activation=self.activation, name="inner",
            kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy)
        self.inner_dense.build(input_shape)
        self.dropout_layer = Dropout(self.dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(
            d_model, name="output", kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs, training=None):
        x = self.inner_dense(inputs)  # (B, T, d_ff)
        x = self.dropout_layer(x, training=training)
        return self.output_dense(x)  # (B, T, d_model)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "d_ff": self.d_ff,
            "dropout": self.dropout,
            "activation": self.activation,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config
