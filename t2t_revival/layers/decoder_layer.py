"""One decoder layer: masked self-attention, encoder-decoder attention, FFN (3.1)."""

import keras
from keras import ops

from t2t_revival.layers.attention_masks import causal_mask
from t2t_revival.layers.dropout import Dropout
from t2t_revival.layers.feed_forward_network import FeedForwardNetwork
from t2t_revival.layers.multi_head_attention import MultiHeadAttention, attend_keeping_weights
from t2t_revival.layers.sentence_cache import PER_SENTENCE


@keras.saving.register_keras_serializable(package="t2t_revival")
class DecoderLayer(keras.layers.Layer):
    """Causal self-attention, attention over the encoder output, then an FFN (3.1).

    Each sub-layer is wrapped in a residual with dropout, post-LN (the paper)
    or pre-LN (`norm_type="pre"`), as in `EncoderLayer`.

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
        x: `[batch, length, d_model]` target-side inputs.
        encoder_output: `[batch, source_length, d_model]` (not needed when
            `cache` holds the encoder-decoder keys/values).
        cross_attention_mask: bool broadcastable to
            `[batch, heads, length, source_length]` (True = may attend), e.g.
            `[batch, 1, 1, source_length]` for source padding, or
            `[batch, 1, length, source_length]` for packed pairs.
        self_attention_mask: optional bool broadcastable to
            `[batch, heads, length, length]`, ANDed with the causal mask
            (e.g. `attention_masks.segment_mask` of packed targets); not with
            `cache`.
        cache: optional dict for incremental decoding (see `init_cache`):
            `{"self": {"key": [batch, h, L, d_k], "value": [batch, h, L, d_v]},
              PER_SENTENCE: {"cross": {"key": [sentences, h, S, d_k],
                                       "value": [sentences, h, S, d_v]}}}`
            (heads first: `MultiHeadAttention`'s cache layout). `batch` is a
            multiple of `sentences`, sentence-major (a search's beams or
            samples: `t2t_revival.layers.sentence_cache`); the
            `cross_attention_mask` is then per sentence too.
        cache_index: int32 scalar, position of `x[:, 0]` (with `cache`).
        training: enables dropout.
        return_attention: also return the attention weights (without
            `cache`): `{"self": float32 [batch, h, length, length],
            "cross": float32 [batch, h, length, source_length]}`.

    Without a cache the self-attention is causal over `x`; with one, `x` is
    written into the self-attention buffer at `cache_index` and attends to
    buffer positions up to its own.

    Returns:
        `[batch, length, d_model]`, or `(output, new_cache)` when `cache` is
        given, or `(output, weights)` with `return_attention`.
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

        def norm(name):
            layer = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, name=name, dtype=policy)
            layer.build(input_shape)
            return layer

        self.self_attention = MultiHeadAttention(
            self.num_heads, self.key_size, self.value_size, self.attention_dropout,
            self_attention=True, use_bias=self.attention_bias, name="self_attention",
            dtype=policy)
        self.self_attention.build(input_shape)
        self.self_attention_norm = norm("self_attention_norm")
        self.cross_attention = MultiHeadAttention(
            self.num_heads, self.key_size, self.value_size, self.attention_dropout,
            self_attention=False, use_bias=self.attention_bias, name="cross_attention",
            dtype=policy)
        self.cross_attention.build(input_shape)
        self.cross_attention_norm = norm("cross_attention_norm")
        self.ffn = FeedForwardNetwork(self.d_ff, self.relu_dropout, activation=self.ffn_activation,
            name="ffn", dtype=policy)
        self.ffn.build(input_shape)
        self.ffn_norm = norm("ffn_norm")
        self.residual_dropout = Dropout(self.dropout, dtype=policy)
        self.built = True

    def _sublayer(self, x, norm, fn, training):
        """The residual story of one sub-layer, post-LN or pre-LN."""
        if self.norm_type == "pre":
            return x + self.residual_dropout(fn(norm(x)), training=training)
        return norm(x + self.residual_dropout(fn(x), training=training))

    def init_cache(self, encoder_output, max_decode_length):
        """An empty self-attention buffer and the cross-attention keys/values.

        Args:
            encoder_output: `[batch, source_length, d_model]`.
            max_decode_length: static int, positions in the self-attention buffer.
        """
        batch, dtype = ops.shape(encoder_output)[0], self.compute_dtype
        return {
            "self": self.self_attention.empty_cache(batch, max_decode_length, dtype),
            PER_SENTENCE: {"cross": self.cross_attention.memory_cache(
                ops.cast(encoder_output, dtype))},
        }

    def resize_cache(self, cache, length):
        """`cache` with a self-attention buffer of `length` positions
        (`MultiHeadAttention.resize_cache`); the cross-attention keys and
        values are the same tensors."""
        return {"self": self.self_attention.resize_cache(cache["self"], length),
                PER_SENTENCE: cache[PER_SENTENCE]}

    def call(self, x, encoder_output=None, cross_attention_mask=None, cache=None,
             cache_index=None, self_attention_mask=None, training=None,
             return_attention=False):
        new_self_cache = None
        weights = {} if return_attention and cache is None else None
        if cache is None:
            causal = causal_mask(ops.shape(x)[1])  # (1, 1, T, T)
            if self_attention_mask is not None:  # e.g. (B, 1, T, T) same segment
                causal = ops.logical_and(causal, self_attention_mask)

            def self_attend(h):
                return attend_keeping_weights(self.self_attention, weights, "self", h,
                                              attention_mask=causal, training=training)
        else:
            def self_attend(h):
                nonlocal new_self_cache
                out, new_self_cache = self.self_attention(
                    h, cache=cache["self"], cache_index=cache_index, training=training)
                return out

        def cross_attend(h):
            if cache is None:
                return attend_keeping_weights(self.cross_attention, weights, "cross", h,
                                              memory=encoder_output,
                                              attention_mask=cross_attention_mask,
                                              training=training)
            # A sentence's rows (its beams) are its queries at once, over the
            # one copy of its keys and values: [B*k, T, D] -> [B, k*T, D].
            memory = cache[PER_SENTENCE]["cross"]
            rows, length, width = ops.shape(h)[0], ops.shape(h)[1], h.shape[-1]
            h = ops.reshape(h, (ops.shape(memory["key"])[0], -1, width))
            out, _ = self.cross_attention(h, attention_mask=cross_attention_mask,
                                          cache=memory, training=training)
            return ops.reshape(out, (rows, length, width))

        x = self._sublayer(x, self.self_attention_norm, self_attend, training)
        x = self._sublayer(x, self.cross_attention_norm, cross_attend, training)
        x = self._sublayer(x, self.ffn_norm,
                           lambda h: self.ffn(h, training=training), training)
        if return_attention:  # (B, T, D), {"self": (B, H, T, T), "cross": (B, H, T, S)}
            return x, weights
        if cache is None:
            return x  # (B, T, D)
        return x, {"self": new_self_cache, PER_SENTENCE: cache[PER_SENTENCE]}

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
