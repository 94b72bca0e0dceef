"""The Transformer layers: shapes, masks, serialization, compiled calls, gradients."""

import numpy as np
import pytest

from layer_testing import run_layer_test
from t2t_revival.layers import (DecoderLayer, Dropout, EncoderLayer, FeedForwardNetwork,
                                MultiHeadAttention, PositionEmbedding,
                                SinusoidalPositionEncoding, TokenEmbedding)
from t2t_revival.layers.sentence_cache import PER_SENTENCE

B, T, S, D = 2, 5, 7, 16
RNG = np.random.default_rng(0)
X = RNG.normal(size=(B, T, D)).astype("float32")
MEMORY = RNG.normal(size=(B, S, D)).astype("float32")
SOURCE_MASK = np.ones((B, 1, 1, S), bool)
SOURCE_MASK[0, ..., 4:] = False  # the first source has 3 padded positions


@pytest.mark.parametrize("key_size,value_size", [(8, 8), (4, 12)])
def test_self_attention(key_size, value_size):
    layer, _ = run_layer_test(
        MultiHeadAttention,
        dict(num_heads=2, key_size=key_size, value_size=value_size, dropout=0.1),
        X, expected_output_shape=(B, T, D))
    # One fused QKV matrix with the separate key and value sizes.
    assert tuple(layer.qkv_dense.kernel.shape) == (D, 2 * (2 * key_size + value_size))
    assert tuple(layer.output_dense.kernel.shape) == (2 * value_size, D)


def test_cross_attention_ignores_masked_memory_positions():
    layer, out = run_layer_test(
        MultiHeadAttention,
        dict(num_heads=4, key_size=4, value_size=6, self_attention=False),
        X, call_kwargs=dict(memory=MEMORY, attention_mask=SOURCE_MASK),
        expected_output_shape=(B, T, D))
    changed = MEMORY.copy()
    changed[0, 4:] = 100.0  # only masked positions of the first example
    out2 = layer(X, memory=changed, attention_mask=SOURCE_MASK)
    np.testing.assert_allclose(np.asarray(out), np.asarray(out2), atol=1e-6)
    # An unmasked position does change the output (so the check above can fail).
    changed[0, 0] = 100.0
    assert not np.allclose(np.asarray(out), np.asarray(
        layer(X, memory=changed, attention_mask=SOURCE_MASK)), atol=1e-3)


def test_self_attention_cache_matches_causal_attention():
    layer = MultiHeadAttention(num_heads=2, key_size=8, value_size=4)
    pos = np.arange(T)
    causal = (pos[None, :] <= pos[:, None])[None, None]
    full = np.asarray(layer(X, attention_mask=causal))
    cache = layer.empty_cache(B, T + 2, "float32")
    assert tuple(cache["key"].shape) == (B, 2, T + 2, 8)  # heads first
    assert tuple(cache["value"].shape) == (B, 2, T + 2, 4)
    for i in range(T):
        out, cache = layer(X[:, i:i + 1], cache=cache, cache_index=np.int32(i))
        np.testing.assert_allclose(np.asarray(out)[:, 0], full[:, i], atol=1e-5)
    assert np.asarray(cache["key"])[:, :, T:].max() == 0  # unwritten positions stay empty
    assert np.abs(np.asarray(cache["key"])[:, :, :T]).min() > 0  # written ones are not


def test_feed_forward_network():
    layer, _ = run_layer_test(FeedForwardNetwork, dict(d_ff=32, dropout=0.1), X,
                              expected_output_shape=(B, T, D))
    assert tuple(layer.inner_dense.kernel.shape) == (D, 32)
    # FFN(x) = max(0, x W1 + b1) W2 + b2 at inference (dropout off).
    w1 = np.asarray(layer.inner_dense.kernel)
    w2, b2 = (np.asarray(v) for v in (layer.output_dense.kernel, layer.output_dense.bias))
    layer.inner_dense.bias.assign(RNG.normal(size=32).astype("float32"))
    b1 = np.asarray(layer.inner_dense.bias)
    pre = X @ w1 + b1
    assert (pre < 0).any() and (pre > 0).any()  # both sides of the kink are exercised
    np.testing.assert_allclose(np.asarray(layer(X, training=False)),
                               np.maximum(pre, 0.0) @ w2 + b2, rtol=1e-5, atol=1e-5)
    # Negative pre-activations contribute nothing: only b2 is left when all are < 0.
    layer.inner_dense.bias.assign(np.full(32, -1e3, "float32"))
    np.testing.assert_allclose(np.asarray(layer(X, training=False)),
                               np.broadcast_to(b2, (B, T, D)), atol=1e-6)


def test_token_embedding_scales_by_sqrt_d_model_and_projects():
    ids = np.array([[3, 1, 0], [4, 2, 2]], "int32")
    layer, out = run_layer_test(TokenEmbedding, dict(vocab_size=11, d_model=D), ids,
                                expected_output_shape=(2, 3, D))
    table = np.asarray(layer.embeddings)
    np.testing.assert_allclose(np.asarray(out), table[ids] * np.sqrt(D), rtol=1e-6)
    logits = np.asarray(layer.project(X))
    assert logits.dtype == np.float32 and logits.shape == (B, T, 11)
    np.testing.assert_allclose(logits, X @ table.T, rtol=1e-4, atol=1e-4)


def test_sinusoidal_position_encoding_is_the_papers_formula():
    _, pe = run_layer_test(SinusoidalPositionEncoding, {}, X,
                           expected_output_shape=(T, D), expect_weights=False)
    pe = np.asarray(pe)
    pos, i = 3, 2  # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)
    np.testing.assert_allclose(pe[pos, 2 * i], np.sin(pos / 10000 ** (2 * i / D)), atol=1e-6)
    np.testing.assert_allclose(pe[pos, 2 * i + 1], np.cos(pos / 10000 ** (2 * i / D)), atol=1e-6)
    shifted = np.asarray(SinusoidalPositionEncoding()(X[:, :1], start_index=np.int32(3)))
    np.testing.assert_allclose(shifted[0], pe[3], atol=1e-6)


def test_learned_position_embedding():
    layer, out = run_layer_test(PositionEmbedding, dict(max_length=12), X,
                                expected_output_shape=(T, D))
    table = np.asarray(layer.position_embeddings)
    np.testing.assert_allclose(np.asarray(out), table[:T])
    shifted = layer(X[:, :1], start_index=np.int32(4))
    np.testing.assert_allclose(np.asarray(shifted)[0], table[4])


LAYER_ARGS = dict(num_heads=2, key_size=8, value_size=8, d_ff=32, dropout=0.1,
                  attention_dropout=0.1, relu_dropout=0.1)


@pytest.mark.parametrize("norm_type", ["post", "pre"])
def test_encoder_layer(norm_type):
    layer, out = run_layer_test(
        EncoderLayer, dict(LAYER_ARGS, norm_type=norm_type), MEMORY,
        call_kwargs=dict(attention_mask=SOURCE_MASK), expected_output_shape=(B, S, D))
    out = np.asarray(out)
    if norm_type == "post":  # ends in a LayerNorm: zero mean per position
        np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-4)
    # Padded positions (masked as keys) do not affect the real ones.
    changed = MEMORY.copy()
    changed[0, 4:] = -50.0
    out2 = np.asarray(layer(changed, attention_mask=SOURCE_MASK))
    np.testing.assert_allclose(out[0, :4], out2[0, :4], atol=1e-5)
    np.testing.assert_allclose(out[1], out2[1], atol=1e-5)


@pytest.mark.parametrize("norm_type", ["post", "pre"])
def test_decoder_layer(norm_type):
    layer, out = run_layer_test(
        DecoderLayer, dict(LAYER_ARGS, norm_type=norm_type), X,
        call_kwargs=dict(encoder_output=MEMORY, cross_attention_mask=SOURCE_MASK),
        expected_output_shape=(B, T, D))
    out = np.asarray(out)
    # Causal: changing position 3 changes no earlier position.
    changed = X.copy()
    changed[:, 3:] += 5.0
    out2 = np.asarray(layer(changed, encoder_output=MEMORY, cross_attention_mask=SOURCE_MASK))
    np.testing.assert_allclose(out[:, :3], out2[:, :3], atol=1e-5)
    assert not np.allclose(out[:, 3:], out2[:, 3:], atol=1e-3)
    # Incremental decoding through the cache gives the same outputs.
    cache = layer.init_cache(MEMORY, max_decode_length=T)
    assert tuple(cache["self"]["key"].shape) == (B, 2, T, 8)  # heads first
    assert tuple(cache[PER_SENTENCE]["cross"]["value"].shape) == (B, 2, S, 8)
    for i in range(T):
        step, cache = layer(X[:, i:i + 1], cross_attention_mask=SOURCE_MASK,
                            cache=cache, cache_index=np.int32(i))
        np.testing.assert_allclose(np.asarray(step)[:, 0], out[:, i], atol=1e-5)


def test_decoder_layer_rows_of_a_sentence_share_its_cross_attention_cache():
    """A search's k rows per sentence (sentence-major) read one copy of the
    sentence's encoder keys and values (the cache's per-sentence part): each
    row decodes as it does alone, with the sentence's memory and mask."""
    k = 3
    layer = DecoderLayer(**LAYER_ARGS)
    rows_x = np.random.default_rng(1).normal(size=(B * k, T, D)).astype("float32")
    out = np.asarray(layer(rows_x, encoder_output=np.repeat(MEMORY, k, axis=0),
                           cross_attention_mask=np.repeat(SOURCE_MASK, k, axis=0)))
    cache = layer.init_cache(MEMORY, max_decode_length=T)
    cache["self"] = {name: np.repeat(value, k, axis=0) for name, value in cache["self"].items()}
    for i in range(T):
        step, cache = layer(rows_x[:, i:i + 1], cross_attention_mask=SOURCE_MASK,
                            cache=cache, cache_index=np.int32(i))
        np.testing.assert_allclose(np.asarray(step)[:, 0], out[:, i], atol=1e-5)
    assert tuple(cache[PER_SENTENCE]["cross"]["key"].shape)[0] == B
    assert tuple(cache["self"]["key"].shape)[0] == B * k


def _masks(layer, x):
    """The layer's next draw as ThreeFry and as Keras' own dropout would make
    it, from its generator's next seed."""
    import tensorflow as tf

    seed = tf.cast(tf.math.floormod(tf.identity(layer.seed_generator.state),
                                    tf.int32.max - 1), tf.int32)
    compiled = tf.function(lambda alg: tf.nn.experimental.stateless_dropout(
        x, rate=layer.rate, seed=seed, rng_alg=alg), jit_compile=True)
    return np.asarray(compiled("threefry")), np.asarray(
        tf.nn.experimental.stateless_dropout(x, rate=layer.rate, seed=seed))


def test_dropout_draws_threefry_masks_under_xla_from_its_seed_generator():
    import tensorflow as tf

    x = np.ones((64, 128), "float32")
    layer = Dropout(0.25, seed=7)
    compiled = tf.function(lambda v: layer(v, training=True), jit_compile=True)
    threefry, keras_default = _masks(layer, x)
    out = np.asarray(compiled(x))
    np.testing.assert_array_equal(out, threefry)
    # Keras' own draw from the same seed is another mask: the check above can fail.
    assert not np.array_equal(out, keras_default)
    # Kept elements are scaled by 1 / (1 - rate), and about `rate` of them dropped.
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    assert abs((1 - kept.mean()) - 0.25) < 0.02
    # The generator advances: the next call draws another mask, its own ThreeFry one.
    threefry2, _ = _masks(layer, x)
    out2 = np.asarray(compiled(x))
    np.testing.assert_array_equal(out2, threefry2)
    assert not np.array_equal(out, out2)
    # The same seed repeats the masks: runs reproduce from their seed.
    again = Dropout(0.25, seed=7)
    np.testing.assert_array_equal(
        np.asarray(tf.function(lambda v: again(v, training=True), jit_compile=True)(x)), out)
    # Outside XLA (TensorFlow has no ThreeFry kernel there) it is Keras' dropout.
    _, keras_default3 = _masks(layer, x)
    np.testing.assert_array_equal(np.asarray(layer(x, training=True)), keras_default3)
    # Inference and rate 0 leave the inputs alone.
    np.testing.assert_array_equal(np.asarray(layer(x, training=False)), x)
    np.testing.assert_array_equal(np.asarray(Dropout(0.0)(x, training=True)), x)


def _reachable_layers(layer):
    """Every Keras layer reachable from `layer` through its attributes (and
    the lists, tuples and dicts in them), `layer` included: the layers Keras
    tracks, and any it would not."""
    import keras

    found = {}

    def visit(obj):
        if isinstance(obj, keras.layers.Layer):
            if id(obj) not in found:
                found[id(obj)] = obj
                visit(vars(obj))
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                visit(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                visit(item)

    visit(layer)
    return list(found.values())


def test_every_dropout_of_the_model_is_ours():
    import keras

    from t2t_revival.hparams_sets.transformer import transformer_tiny
    from t2t_revival.models.transformer import Transformer

    model = Transformer(transformer_tiny().replace(vocab_size=37))
    model({"inputs": np.ones((1, 3), "int32"), "targets": np.ones((1, 2), "int32")})
    dropouts = [layer for layer in _reachable_layers(model)
                if isinstance(layer, keras.layers.Dropout)]
    # embedding + per layer: encoder (residual, attention, FFN) x 2, decoder
    # (residual, self and cross attention, FFN) x 2
    assert len(dropouts) >= 1 + 2 * 3 + 2 * 4
    assert all(type(layer) is Dropout for layer in dropouts), \
        sorted({type(layer).__name__ for layer in dropouts})
