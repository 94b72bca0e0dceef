"""Multi-head scaled dot-product attention with a key/value cache (section 3.2)."""

import keras
from keras import ops

from t2t_revival.layers.dropout import Dropout

# Added to masked-out attention logits. The logits are cast to float32 before
# masking, so this is safe under mixed_float16 (float16 would overflow to -inf).
_MASK_VALUE = -1e9


@keras.saving.register_keras_serializable(package="t2t_revival")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017, 3.2.2).

    `softmax(Q K^T / sqrt(d_k)) V` over `num_heads` heads, with separate per-head
    query/key size `key_size` (d_k) and value size `value_size` (d_v), as Table 3
    rows A and B vary them. No biases in the projections (tensor2tensor's choice)
    unless `use_bias` (Marian's and Hugging Face's models have them).

    Self-attention (`self_attention=True`) projects queries, keys and values with
    one fused `[d_model, h*(2*d_k + d_v)]` matrix. Encoder-decoder attention
    projects the queries from `query` and keys/values from `memory` with a fused
    `[d_model, h*(d_k + d_v)]` matrix; `compute_key_value(memory)` exposes that
    projection so a decoder computes it once per source.

    Softmax runs in float32 whatever the dtype policy.

    Args:
        num_heads: h.
        key_size: d_k, per-head query/key size.
        value_size: d_v, per-head value size.
        dropout: dropout rate on the attention weights (after softmax).
        self_attention: True for self-attention (fused QKV), False for
            attention over a `memory` (encoder-decoder attention).
        kernel_initializer: initializer of the projection matrices.
        use_bias: biases in the query, key, value and output projections.

    Call arguments:
        query: `[batch, query_length, d_model]`.
        memory: `[batch, memory_length, d_model]` for encoder-decoder attention
            (ignored for self-attention, and when `cache` holds the keys/values).
            Must have the query's width d_model.
        attention_mask: bool, broadcastable to
            `[batch, num_heads, query_length, key_length]`; True = may attend.
        cache: optional dict `{"key": [batch, h, L, d_k], "value": [batch, h, L, d_v]}`
            (heads first, as the attention reads them, so that no step
            transposes it; `empty_cache` and `memory_cache` make one).
            Self-attention: a preallocated buffer; this call's keys/values are
            written at positions `cache_index ... cache_index + query_length - 1`
            and the queries attend to buffer positions `<=` their own position.
            Encoder-decoder attention: the precomputed keys/values of `memory`.
        cache_index: int32 scalar, position of the first query (with a
            self-attention cache).
        training: enables attention dropout.
        return_attention: also return the attention weights (without `cache`):
            float32 `[batch, h, query_length, key_length]`, after the softmax
            and before dropout (word alignments, `decode/word_alignment.py`).

    Returns:
        `[batch, query_length, d_model]`, and the updated cache when `cache` is
        given (as a tuple `(output, cache)`), or `(output, weights)` with
        `return_attention`.
    """

    def __init__(self, num_heads, key_size, value_size, dropout=0.0,
                 self_attention=True, kernel_initializer="glorot_uniform", use_bias=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.use_bias = use_bias
        self.num_heads = num_heads
        self.key_size = key_size
        self.value_size = value_size
        self.dropout = dropout
        self.self_attention = self_attention
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        d_model = input_shape[-1]
        h, dk, dv = self.num_heads, self.key_size, self.value_size
        dense = dict(use_bias=self.use_bias, dtype=self.dtype_policy,
                     kernel_initializer=self.kernel_initializer)
        if self.self_attention:
            self.qkv_dense = keras.layers.Dense(h * (2 * dk + dv), name="qkv", **dense)
            self.qkv_dense.build(input_shape)
        else:
            self.query_dense = keras.layers.Dense(h * dk, name="query", **dense)
            self.query_dense.build(input_shape)
            self.key_value_dense = keras.layers.Dense(h * (dk + dv), name="key_value", **dense)
            self.key_value_dense.build(input_shape)
        self.output_dense = keras.layers.Dense(d_model, name="output", **dense)
        self.output_dense.build(tuple(input_shape[:-1]) + (h * dv,))
        self.dropout_layer = Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def _split_heads(self, x, size):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, length, self.num_heads, size))  # (B, T, H, d)

    def compute_key_value(self, memory):
        """Keys `[batch, S, h, d_k]` and values `[batch, S, h, d_v]` of `memory [batch, S, d_model]`."""
        kv = self.key_value_dense(memory)  # (B, S, H*(dk+dv))
        split = self.num_heads * self.key_size
        return (self._split_heads(kv[..., :split], self.key_size),
                self._split_heads(kv[..., split:], self.value_size))

    def empty_cache(self, batch, length, dtype):
        """A self-attention buffer of `length` positions, zeros:
        `{"key": [batch, h, length, d_k], "value": [batch, h, length, d_v]}`."""
        h = self.num_heads
        return {"key": ops.zeros((batch, h, length, self.key_size), dtype),
                "value": ops.zeros((batch, h, length, self.value_size), dtype)}

    def resize_cache(self, cache, length):
        """A self-attention buffer of `length` positions holding `cache`'s
        first ones: zeros appended, or positions dropped from the end (those
        must not have been written yet). `length` is a Python int or an
        int32 scalar tensor."""
        def resize(x):
            have = x.shape[2]
            if isinstance(length, int) and have is not None:
                if length <= have:
                    return x[:, :, :length]
                return ops.pad(x, ((0, 0), (0, 0), (0, length - have), (0, 0)))
            # A length or a buffer known only when the graph runs (a
            # SavedModel's: both follow from the input's shape).
            x = x[:, :, :length]
            return ops.pad(x, ((0, 0), (0, 0), (0, length - ops.shape(x)[2]), (0, 0)))
        return {"key": resize(cache["key"]), "value": resize(cache["value"])}

    def memory_cache(self, memory):
        """Encoder-decoder attention's cache of `memory [batch, S, d_model]`:
        `{"key": [batch, h, S, d_k], "value": [batch, h, S, d_v]}`, computed
        once per source."""
        key, value = self.compute_key_value(memory)  # (B, S, H, dk), (B, S, H, dv)
        return {"key": ops.transpose(key, (0, 2, 1, 3)),
                "value": ops.transpose(value, (0, 2, 1, 3))}

    def call(self, query, memory=None, attention_mask=None, cache=None,
             cache_index=None, training=None, return_attention=False):
        if return_attention and cache is not None:
            raise ValueError("MultiHeadAttention returns its attention weights only "
                             "without a cache (a teacher-forced pass). Received: cache")
        h, dk, dv = self.num_heads, self.key_size, self.value_size
        if self.self_attention:
            qkv = self.qkv_dense(query)  # (B, T, H*(2dk+dv))
            q = self._split_heads(qkv[..., : h * dk], dk)  # (B, T, H, dk)
            k = self._split_heads(qkv[..., h * dk: 2 * h * dk], dk)  # (B, T, H, dk)
            v = self._split_heads(qkv[..., 2 * h * dk:], dv)  # (B, T, H, dv)
            if cache is not None:
                # Write this call's keys/values into the static buffer at cache_index.
                start = [0, 0, cache_index, 0]
                k = ops.slice_update(cache["key"], start, ops.cast(
                    ops.transpose(k, (0, 2, 1, 3)), cache["key"].dtype))  # (B, H, L, dk)
                v = ops.slice_update(cache["value"], start, ops.cast(
                    ops.transpose(v, (0, 2, 1, 3)), cache["value"].dtype))  # (B, H, L, dv)
                cache = {"key": k, "value": v}
                # Query t (at position cache_index + t) sees buffer positions <= it.
                query_pos = cache_index + ops.arange(ops.shape(q)[1], dtype="int32")
                key_pos = ops.arange(ops.shape(k)[2], dtype="int32")
                causal = ops.expand_dims(key_pos, 0) <= ops.expand_dims(query_pos, 1)
                causal = causal[None, None, :, :]  # (1, 1, T, L)
                attention_mask = causal if attention_mask is None else \
                    ops.logical_and(attention_mask, causal)
        else:
            q = self._split_heads(self.query_dense(query), dk)  # (B, T, H, dk)
            if cache is not None:
                k, v = cache["key"], cache["value"]  # (B, H, S, dk), (B, H, S, dv)
            else:
                k, v = self.compute_key_value(memory)  # (B, S, H, dk), (B, S, H, dv)
        q = q * ops.cast(dk ** -0.5, q.dtype)
        # With a cache the keys and values are heads first (B, H, S, d): the
        # einsums are then batched matmuls over (B, H) that read the buffers as
        # they lie (with a [B, S, H, d] cache XLA transposed every buffer into
        # heads-first order at every decoding step: a quarter of a step).
        heads_first = cache is not None
        logits = ops.einsum("bthd,bhsd->bhts" if heads_first else "bthd,bshd->bhts",
                            q, k)  # (B, H, T, S)
        logits = ops.cast(logits, "float32")
        if attention_mask is not None:
            logits = ops.where(attention_mask, logits, _MASK_VALUE)
        probabilities = ops.softmax(logits, axis=-1)  # float32 (B, H, T, S)
        weights = ops.cast(probabilities, self.compute_dtype)
        weights = self.dropout_layer(weights, training=training)
        out = ops.einsum("bhts,bhsd->bthd" if heads_first else "bhts,bshd->bthd",
                         weights, v)  # (B, T, H, dv)
        out = ops.reshape(out, (ops.shape(out)[0], ops.shape(out)[1], h * dv))
        out = self.output_dense(out)  # (B, T, d_model)
        if cache is not None:
            return out, cache
        if return_attention:
            return out, probabilities
        return out

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "key_size": self.key_size,
            "value_size": self.value_size,
            "dropout": self.dropout,
            "self_attention": self.self_attention,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config


def attend_keeping_weights(attention: MultiHeadAttention, kept: dict | None, name: str,
                           query, **kwargs):
    """`attention(query, **kwargs)`'s output; with `kept` (a dict), its
    weights too, float32 `[batch, heads, T, S]` under `kept[name]` (a layer's
    `return_attention`, without a cache)."""
    if kept is None:
        return attention(query, **kwargs)
    out, kept[name] = attention(query, return_attention=True, **kwargs)
    return out

