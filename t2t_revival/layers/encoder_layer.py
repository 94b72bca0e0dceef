"""One encoder layer: self-attention and feed-forward sub-layers (section 3.1)."""

import keras

from t2t_revival.layers.dropout import Dropout
from t2t_revival.layers.feed_forward_network import FeedForwardNetwork
from t2t_revival.layers.multi_head_attention import MultiHeadAttention, attend_keeping_weights


@keras.saving.register_keras_serializable(package="t2t_revival")
class EncoderLayer(keras.layers.Layer):
    """Self-attention then a position-wise FFN, each wrapped in a residual (3.1).

    `norm_type="post"` is the paper's `LayerNorm(x + Dropout(Sublayer(x)))`;
    `"pre"` is `x + Dropout(Sublayer(LayerNorm(x)))` (the model then adds a
    final LayerNorm after the last layer).

    Args:
        num_heads, key_size, value_size: attention shape (h, d_k, d_v).
        d_ff: inner width of the feed-forward network.
        dropout: residual dropout on each sub-layer output (P_drop).
        attention_dropout: dropout on the attention weights.
        relu_dropout: dropout inside the feed-forward network.
        norm_type: "post" or "pre".
        layer_norm_epsilon: LayerNorm epsilon.
        ffn_activation: the feed-forward network's activation ("relu", "swish", "gelu").
        attention_bias: biases in the attention projections.

    Call arguments:
        x: `[batch, length, d_model]`.
        attention_mask: bool broadcastable to `[batch, heads, length, length]`
            (True = may attend), e.g. `[batch, 1, 1, length]` for source padding.
        training: enables dropout.
        return_attention: also return the self-attention weights, float32
            `[batch, h, length, length]` (the layer's own softmax).

    Returns:
        `[batch, length, d_model]`, or `(output, weights)` with `return_attention`.
    """

    def __init__(self, num_heads, key_size, value_size, d_ff, dropout=0.0,
                 attention_dropout=0.0, relu_dropout=0.0, norm_type="post",
                 layer_norm_epsilon=1e-6, ffn_activation="relu", attention_bias=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.ffn_activation = ffn_activation
        self.attention_bias = attention_bias
        self.num_heads = num_heads
        self.key_size = key_size
        self.value_size = value_size
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.norm_type = norm_type
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape):
        policy = self.dtype_policy
        self.self_attention = MultiHeadAttention(
            self.num_heads, self.key_size, self.value_size, self.attention_dropout,
            self_attention=True, use_bias=self.attention_bias, name="self_attention",
            dtype=policy)
        self.self_attention.build(input_shape)
        self.self_attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="self_attention_norm", dtype=policy)
        self.self_attention_norm.build(input_shape)
        self.ffn = FeedForwardNetwork(self.d_ff, self.relu_dropout, activation=self.ffn_activation,
            name="ffn", dtype=policy)
        self.ffn.build(input_shape)
        self.ffn_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="ffn_norm", dtype=policy)
        self.ffn_norm.build(input_shape)
        self.residual_dropout = Dropout(self.dropout, dtype=policy)
        self.built = True

    def _sublayer(self, x, norm, fn, training):
        """The residual story of one sub-layer, post-LN or pre-LN."""
        if self.norm_type == "pre":
            return x + self.residual_dropout(fn(norm(x)), training=training)
        return norm(x + self.residual_dropout(fn(x), training=training))

    def call(self, x, attention_mask=None, training=None, return_attention=False):
        weights = {} if return_attention else None
        x = self._sublayer(
            x, self.self_attention_norm,
            lambda h: attend_keeping_weights(self.self_attention, weights, "self", h,
                                             attention_mask=attention_mask, training=training),
            training)
        x = self._sublayer(x, self.ffn_norm,
                           lambda h: self.ffn(h, training=training), training)
        if return_attention:
            return x, weights["self"]  # (B, S, D), float32 (B, H, S, S)
        return x  # (B, S, D)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads, "key_size": self.key_size,
            "value_size": self.value_size, "d_ff": self.d_ff,
            "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "relu_dropout": self.relu_dropout, "norm_type": self.norm_type,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "ffn_activation": self.ffn_activation, "attention_bias": self.attention_bias,
        })
        return config
