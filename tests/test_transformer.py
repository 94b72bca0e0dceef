"""The Transformer model: the BRIEF.md contract, masks, incremental decoding,
serialization, parameter counts, the JAX backend and mixed precision."""

import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.hparams_sets.transformer import (transformer_base, transformer_big,
                                                  transformer_tiny)
from t2t_revival.models.transformer import Transformer
from t2t_revival.layers.sentence_cache import PER_SENTENCE

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = 37
RNG = np.random.default_rng(0)
SRC = RNG.integers(2, VOCAB, (3, 9)).astype("int32")
SRC[0, 6:] = 0  # padded sources end with PAD
SRC[1, 8:] = 0
TGT = RNG.integers(2, VOCAB, (3, 7)).astype("int32")
TGT[:, -1] = 1  # EOS
TGT[2, 5:] = 0


def tiny(**changes):
    """transformer_tiny with the test vocabulary, no dropout (deterministic)."""
    base = dict(vocab_size=VOCAB, dropout=0.0, attention_dropout=0.0, relu_dropout=0.0)
    base.update(changes)
    return transformer_tiny().replace(**base)


def run(model, src=SRC, tgt=TGT, **kwargs):
    return np.asarray(model({"inputs": src, "targets": tgt}, **kwargs))


def test_registered_and_contract_shapes():
    import t2t_revival.models  # noqa: F401
    assert registry.models.get("transformer") is Transformer
    model = Transformer(tiny())
    logits = model({"inputs": SRC, "targets": TGT})
    assert tuple(logits.shape) == (3, 7, VOCAB) and logits.dtype == "float32"
    encoder_output, encoder_padding = model.encode(SRC)
    assert tuple(encoder_output.shape) == (3, 9, 128)
    np.testing.assert_array_equal(np.asarray(encoder_padding), (SRC == 0).astype("float32"))
    decoded = model.decode(TGT, encoder_output, encoder_padding)
    np.testing.assert_allclose(np.asarray(decoded), np.asarray(logits), atol=1e-5)


def test_unknown_vocab_size_is_refused():
    with pytest.raises(ValueError, match="vocab_size"):
        Transformer(transformer_tiny())


def test_padded_source_positions_change_nothing():
    model = Transformer(tiny())
    logits = run(model)
    encoder_output = np.asarray(model.encode(SRC)[0])
    # More PAD after the source: the real positions' encodings and every logit stay.
    longer = np.pad(SRC, [[0, 0], [0, 4]])
    np.testing.assert_allclose(run(model, src=longer), logits, atol=1e-5)
    np.testing.assert_allclose(np.asarray(model.encode(longer)[0])[0, :6],
                               encoder_output[0, :6], atol=1e-5)
    # And a real source token does change them (so the check can fail).
    changed = SRC.copy()
    changed[0, 2] = (changed[0, 2] + 1) % VOCAB + 2
    assert not np.allclose(run(model, src=changed)[0], logits[0], atol=1e-4)


@pytest.mark.parametrize("norm_type", ["post", "pre"])
def test_decoder_is_causal(norm_type):
    model = Transformer(tiny(norm_type=norm_type))
    logits = run(model)
    for i in range(TGT.shape[1] - 1):
        changed = TGT.copy()
        changed[:, i + 1:] = (changed[:, i + 1:] + 3) % VOCAB
        other = run(model, tgt=changed)
        # logits[:, j] sees targets[:, :j] (shifted right), so up to i + 1 nothing moves.
        np.testing.assert_allclose(other[:, :i + 2], logits[:, :i + 2], atol=1e-5)
        if i + 2 < TGT.shape[1]:
            assert not np.allclose(other[:, i + 2:], logits[:, i + 2:], atol=1e-4)


def _incremental(model, src, tgt, step_fn=None):
    step_fn = step_fn or model.decode_step
    encoder_output, encoder_padding = model.encode(src)
    cache = model.init_cache(encoder_output, encoder_padding, tgt.shape[1] + 2)
    for leaf in tf.nest.flatten(cache):  # batch-first, static shapes (beam search tiles them)
        assert leaf.shape[0] == src.shape[0] and None not in leaf.shape
    ids, out = np.zeros((src.shape[0],), "int32"), []
    for i in range(tgt.shape[1]):
        logits, new_cache = step_fn(ids, cache, np.int32(i))
        assert tf.nest.map_structure(lambda t: tuple(t.shape), new_cache) == \
            tf.nest.map_structure(lambda t: tuple(t.shape), cache)
        cache = new_cache
        out.append(np.asarray(logits))
        ids = tgt[:, i]
    return np.stack(out, axis=1)  # (B, T, V)


@pytest.mark.parametrize("changes", [
    dict(norm_type="post"),
    dict(norm_type="pre"),
    dict(norm_type="post", shared_embedding=False),
    dict(norm_type="pre", shared_embedding=False),
    dict(position_encoding="learned", d_k=16, d_v=48),
], ids=["post", "pre", "post-unshared", "pre-unshared", "learned-dk16-dv48"])
def test_cached_decoding_equals_teacher_forcing(changes):
    model = Transformer(tiny(**changes))
    full = run(model)
    steps = _incremental(model, SRC, TGT)
    assert steps.dtype == np.float32
    assert np.abs(steps - full).max() < 1e-4


def test_cached_decoding_compiled_with_xla():
    model = Transformer(tiny(norm_type="pre"))
    full = run(model)
    step = tf.function(model.decode_step, jit_compile=True, autograph=False)
    assert np.abs(_incremental(model, SRC, TGT, step) - full).max() < 1e-4



def test_resized_cache_keeps_written_positions_and_decodes_the_same():
    """`resize_cache` (beam search's short buffers): a buffer of 4 positions,
    stepped through 4 positions and lengthened to 9, decodes the rest as the
    full buffer does; the written positions are kept, zeros appended, the
    cross-attention keys and values are the same tensors."""
    model = Transformer(tiny(norm_type="pre"))
    full = run(model)
    encoder_output, encoder_padding = model.encode(SRC)
    cache = model.resize_cache(model.init_cache(encoder_output, encoder_padding, 9), 4)
    assert tuple(cache["layer_0"]["self"]["key"].shape)[:3] == (3, 4, 4)  # [B, h, 4, d_k]
    ids, out = np.zeros((3,), "int32"), []
    for i in range(TGT.shape[1]):
        if i == 4:
            longer = model.resize_cache(cache, 9)
            for name in ("key", "value"):
                short, grown = cache["layer_1"]["self"][name], longer["layer_1"]["self"][name]
                assert tuple(grown.shape)[:3] == (3, 4, 9)
                np.testing.assert_array_equal(np.asarray(grown)[:, :, :4], np.asarray(short))
                assert not np.asarray(grown)[:, :, 4:].any()
            assert longer["layer_1"][PER_SENTENCE] is cache["layer_1"][PER_SENTENCE]
            assert longer[PER_SENTENCE] is cache[PER_SENTENCE]
            cache = longer
        logits, cache = model.decode_step(ids, cache, np.int32(i))
        out.append(np.asarray(logits))
        ids = TGT[:, i]
    assert np.abs(np.stack(out, axis=1) - full).max() < 1e-4


def test_resized_cache_with_lengths_known_only_when_the_graph_runs():
    """A SavedModel's search resizes buffers whose length, and to a length
    that, follow from the input's shape (tensors when traced): cut to 4
    positions, stepped through 4, lengthened to the full length, it decodes
    as the full buffer does."""
    model = Transformer(tiny(norm_type="pre"))
    full = run(model)
    encoder_output, encoder_padding = model.encode(SRC)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)], autograph=False)
    def decode(length):
        cache = model.init_cache(encoder_output, encoder_padding, length)
        assert cache["layer_0"]["self"]["key"].shape[2] is None   # known when run
        cache = model.resize_cache(cache, 4)
        ids, out = tf.zeros((3,), tf.int32), []
        for i in range(TGT.shape[1]):
            if i == 4:
                cache = model.resize_cache(cache, length)
                assert cache["layer_1"]["self"]["value"].shape[2] is None
            logits, cache = model.decode_step(ids, cache, tf.constant(i))
            out.append(logits)
            ids = TGT[:, i]
        return tf.stack(out, axis=1), tf.shape(cache["layer_1"]["self"]["key"])[2]

    logits, buffer = decode(tf.constant(9))
    assert int(buffer) == 9
    assert np.abs(logits.numpy() - full).max() < 1e-4


def test_compiled_decode_step_reads_the_cache_where_it_lies():
    """XLA's optimized decoding step transposes no self-attention buffer and
    no encoder keys/values: the cache is kept heads first, as the attention's
    batched matmuls read it. (With the [batch, L, h, d] layout of before, XLA
    transposed every one of them into heads-first order at every step: a
    quarter of a batch-32 step.)"""
    model = Transformer(tiny())
    model.build()
    encoder_output, encoder_padding = model.encode(SRC)
    length = 23  # the buffer's positions: a size no other dimension has
    cache = model.init_cache(encoder_output, encoder_padding, length)
    head_size = model.hparams.d_model // model.hparams.num_heads
    step = tf.function(model.decode_step, jit_compile=True, autograph=False)
    args = (np.zeros((SRC.shape[0],), "int32"), cache, np.int32(0))
    hlo = step.experimental_get_compiler_ir(*args)(stage="optimized_hlo")
    transposed = []
    for line in hlo.splitlines():
        match = re.search(r"(\S+) = f32\[([\d,]+)\]\S* (\w[\w-]*)\(", line)
        if not match or "transpose" not in match.group(1) + match.group(3):
            continue
        dims = {int(d) for d in match.group(2).split(",")}
        # A tensor of cache size: all positions (buffer or source) x a head.
        if head_size in dims and dims & {length, SRC.shape[1]}:
            transposed.append(line.strip()[:120])
    assert hlo.count("dot(") >= 4  # the check reads the real optimized step
    assert not transposed, "\n".join(transposed)
    # The step still gives the teacher-forced logits through that cache.
    assert np.abs(_incremental(model, SRC, TGT, step) - run(model)).max() < 1e-4


def test_shared_embedding_switch():
    shared = Transformer(tiny())
    shared.build()
    names = {w.path.split("/")[1] for w in shared.weights}
    assert "shared_embedding" in names and "output_projection" not in names
    unshared = Transformer(tiny(shared_embedding=False))
    unshared.build()
    names = {w.path.split("/")[1] for w in unshared.weights}
    assert {"source_embedding", "target_embedding", "output_projection"} <= names
    assert unshared.count_params() - shared.count_params() == 2 * VOCAB * 128


def test_dropout_only_in_training():
    model = Transformer(tiny(dropout=0.3))
    np.testing.assert_allclose(run(model), run(model), atol=1e-6)
    assert not np.allclose(run(model, training=True), run(model), atol=1e-3)


def test_serialization_round_trip(tmp_path):
    hp = tiny(norm_type="pre", position_encoding="learned")
    model = Transformer(hp)
    logits = run(model)
    config = model.get_config()
    assert config["hparams"] == hp.to_dict()
    assert Transformer.from_config(config).hparams == hp
    model.save(tmp_path / "model.keras")
    revived = keras.saving.load_model(tmp_path / "model.keras")
    assert isinstance(revived, Transformer) and revived.hparams == hp
    np.testing.assert_allclose(run(revived), logits, atol=1e-6)
    model.save_weights(tmp_path / "model.weights.h5")
    fresh = Transformer(hp)
    fresh.build()
    assert not np.allclose(run(fresh), logits, atol=1e-3)
    fresh.load_weights(tmp_path / "model.weights.h5")
    np.testing.assert_allclose(run(fresh), logits, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_forward_gives_float32_logits(policy):
    model = Transformer(tiny(mixed_precision=policy))
    assert model.dtype_policy.name == policy
    logits = run(model)
    assert model.shared_embedding.embeddings.dtype == "float32"  # variables stay float32
    assert logits.dtype == np.float32 and np.isfinite(logits).all()
    encoder_output, encoder_padding = model.encode(SRC)
    assert encoder_output.dtype == policy.split("_")[1]
    cache = model.init_cache(encoder_output, encoder_padding, 4)
    step, _ = model.decode_step(np.zeros((3,), "int32"), cache, np.int32(0))
    assert step.dtype == "float32" and np.isfinite(np.asarray(step)).all()
    # Close to the float32 model with the same weights.
    reference = Transformer(tiny())
    reference.build()
    reference.set_weights(model.get_weights())
    assert np.abs(run(reference) - logits).max() < 0.25
    # An explicit dtype kwarg wins over hparams.mixed_precision.
    assert Transformer(tiny(mixed_precision=policy), dtype="float32").dtype_policy.name == "float32"


def test_training_step_reduces_loss():
    model = Transformer(tiny())
    # Eagerly: tracing Keras's train function for 4 steps takes 4x their time;
    # the traced training step is the trainer's (UpdateStep), trained in many tests.
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    batch = {"inputs": SRC, "targets": TGT}
    first = float(model.train_on_batch(batch, TGT))
    for _ in range(3):
        last = float(model.train_on_batch(batch, TGT))
    assert np.isfinite(first) and last < first


# The paper's Table 3 counts against ours at a 37,000-token shared vocabulary.
# base: 18,944,000 shared embedding + 6 x 3,150,336 encoder + 6 x 4,199,936
# decoder layers = 63,045,632 (-3.0%); big: 37,888,000 + 6 x 12,592,128 +
# 6 x 16,788,480 = 214,171,648 (+0.6%). They differ from the paper because our
# attention projections have no biases (tensor2tensor's choice), the paper's
# vocabulary is only "about 37000" tokens, and the paper does not say how it
# counted (the shared matrix is counted once here). See the Transformer docstring.
PAPER_PARAMS = {"transformer_base": 65e6, "transformer_big": 213e6}
EXPECTED_PARAMS = {"transformer_base": 63_045_632, "transformer_big": 214_171_648}


@pytest.mark.parametrize("make", [transformer_base, transformer_big],
                         ids=["base", "big"])
def test_parameter_counts_match_the_paper(make):
    model = Transformer(make().replace(vocab_size=37000))
    model.build()  # one [1, 2] forward, no training
    count = model.count_params()
    paper = PAPER_PARAMS[make.__name__]
    print(f"{make.__name__} at vocab 37000: {count:,} parameters "
          f"(paper {paper / 1e6:.0f}M, {100 * (count - paper) / paper:+.1f}%)")
    assert count == EXPECTED_PARAMS[make.__name__]
    assert abs(count - paper) / paper < 0.05


@pytest.mark.slow  # about 20 s: a fresh interpreter imports JAX and compiles
def test_jax_backend_trains_one_step():
    # XLA's backend optimizations off: the programs compile in half the time
    # (the figures checked are the step's effect and the cache's, not speed).
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT),
               JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_backend_optimization_level=0")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "scripts" / "jax_train_step.py")],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.strip().splitlines()[-2:]]
    assert [r["norm_type"] for r in results] == ["post", "pre"]
    for result in results:
        assert result["backend"] == "jax"
        assert np.isfinite(result["loss"]) and result["moved"] == result["weights"]
        assert result["dtype"] == "float32" and result["cache_diff"] < 1e-4
