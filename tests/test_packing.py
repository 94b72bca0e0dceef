"""Sequence packing: the packed input pipeline, and a packed batch giving the
same per-token losses as its pairs unpacked, with each attention kept inside
its segment (encoder self, decoder causal self, and cross attention)."""

import collections
import itertools
import random

import numpy as np
import pytest
import tensorflow as tf

from t2t_revival.data.data_error import DataError
from t2t_revival.data.input_pipeline import (PACKED_FEATURES, pack_window_rows,
                                             packed_dataset, packed_shape)
from t2t_revival.data.sharded_record_writer import serialize_pair, shard_paths
from t2t_revival.settings.hparams import HParamsError
from t2t_revival.hparams_sets.transformer import transformer_tiny
from t2t_revival.models.transformer import Transformer
from t2t_revival.train.losses import smoothed_cross_entropy_sum

VOCAB = 37
ROW = 24  # packed row length in the model tests
ATOL = 1e-5


def tiny(**changes):
    """transformer_tiny with the test vocabulary, no dropout (deterministic)."""
    base = dict(vocab_size=VOCAB, dropout=0.0, attention_dropout=0.0,
                relu_dropout=0.0, max_length=ROW)
    base.update(changes)
    return transformer_tiny().replace(**base)


def make_pairs(seed=0):
    """Seven (source, target) id lists with EOS, of unequal source/target lengths."""
    rng = np.random.default_rng(seed)
    lengths = [(5, 7), (3, 2), (9, 4), (4, 6), (6, 9), (2, 3), (8, 5)]
    return [(list(rng.integers(2, VOCAB, n - 1)) + [1],
             list(rng.integers(2, VOCAB, m - 1)) + [1]) for n, m in lengths]


# Which pairs share a row: in every row, segment k's source and target start
# at different offsets, so a mask keyed on offsets instead of segments leaks.
LAYOUT = [[0, 1, 2], [3, 4], [5, 6]]


def pack(pairs, layout=LAYOUT, length=ROW):
    """Pairs -> the six packed features, int32 `[len(layout), length]`."""
    out = {k: np.zeros((len(layout), length), np.int32) for k in PACKED_FEATURES}
    for r, members in enumerate(layout):
        for side, k in ((0, "inputs"), (1, "targets")):
            at = 0
            for seg, i in enumerate(members, start=1):
                ids = pairs[i][side]
                out[k][r, at:at + len(ids)] = ids
                out[k + "_segmentation"][r, at:at + len(ids)] = seg
                out[k + "_position"][r, at:at + len(ids)] = np.arange(len(ids))
                at += len(ids)
            assert at <= length
    return out


def unpack(packed, layout=LAYOUT):
    """Per pair i: (row, source slots, target slots) of packed features."""
    where = {}
    for r, members in enumerate(layout):
        for seg, i in enumerate(members, start=1):
            where[i] = (r, np.flatnonzero(packed["inputs_segmentation"][r] == seg),
                        np.flatnonzero(packed["targets_segmentation"][r] == seg))
    return where


def one_per_row(pairs):
    """The unpacked batch: each pair alone in its own (right-padded) row."""
    s = max(len(a) for a, _ in pairs)
    t = max(len(b) for _, b in pairs)
    x = np.zeros((len(pairs), s), np.int32)
    y = np.zeros((len(pairs), t), np.int32)
    for i, (a, b) in enumerate(pairs):
        x[i, :len(a)], y[i, :len(b)] = a, b
    return {"inputs": x, "targets": y}


def gold_losses(logits, targets):
    """Per-token cross-entropy -log p(gold) `[batch, T]`."""
    logits = np.asarray(logits, np.float64)
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, targets[..., None].astype(int), -1)[..., 0]


# ----------------------------------------------------------------- the model
@pytest.mark.parametrize("changes", [
    {},
    {"position_encoding": "learned", "norm_type": "pre", "shared_embedding": False},
])
def test_packed_batch_gives_the_unpacked_per_token_losses(changes):
    pairs = make_pairs()
    model = Transformer(tiny(**changes))
    packed = pack(pairs)
    plain = one_per_row(pairs)
    packed_logits = np.asarray(model(packed))  # (3, ROW, V)
    plain_logits = np.asarray(model(plain))  # (7, T, V)
    packed_loss = gold_losses(packed_logits, packed["targets"])
    plain_loss = gold_losses(plain_logits, plain["targets"])
    for i, (row, _, tgt) in unpack(packed).items():
        n = len(pairs[i][1])
        np.testing.assert_allclose(packed_logits[row, tgt], plain_logits[i, :n], atol=ATOL)
        np.testing.assert_allclose(packed_loss[row, tgt], plain_loss[i, :n], atol=ATOL)
    # The trainer's loss: the same smoothed sum over the same number of tokens.
    loss_p, tokens_p = smoothed_cross_entropy_sum(packed_logits, packed["targets"], 0.1)
    loss_u, tokens_u = smoothed_cross_entropy_sum(plain_logits, plain["targets"], 0.1)
    assert float(tokens_p) == float(tokens_u) == sum(len(b) for _, b in pairs)
    np.testing.assert_allclose(float(loss_p), float(loss_u), rtol=1e-5)


def test_packed_encoder_output_is_each_source_alone():
    """Encoder self-attention alone: no decoder, no cross attention involved."""
    pairs = make_pairs(1)
    model = Transformer(tiny())
    packed = pack(pairs)
    out, padding = model.encode(packed["inputs"], segmentation=packed["inputs_segmentation"],
                                position=packed["inputs_position"])
    np.testing.assert_array_equal(np.asarray(padding), packed["inputs"] == 0)
    alone, _ = model.encode(one_per_row(pairs)["inputs"])
    for i, (row, src, _) in unpack(packed).items():
        np.testing.assert_allclose(np.asarray(out)[row, src],
                                   np.asarray(alone)[i, :len(pairs[i][0])], atol=ATOL)


def _other_segments_changed(packed, side, row_of_kept, kept_segment, rng):
    """A copy of `packed` with the ids of `side` in every other segment redrawn."""
    changed = {k: v.copy() for k, v in packed.items()}
    other = (changed[side + "_segmentation"] > 0) & ~(
        (np.arange(len(LAYOUT))[:, None] == row_of_kept)
        & (changed[side + "_segmentation"] == kept_segment))
    changed[side][other] = rng.integers(2, VOCAB, other.sum())
    return changed


@pytest.mark.parametrize("segment", [1, 2, 3])
def test_decoder_self_attention_stays_in_its_segment(segment):
    """Only the other pairs' targets change: the encoder output and the
    cross-attention memory are the same in both runs, so a change of segment
    k's logits can only come through decoder self-attention (or a decoder
    input shifted across the segment boundary)."""
    pairs = make_pairs(2)
    model = Transformer(tiny())
    packed = pack(pairs)
    changed = _other_segments_changed(packed, "targets", 0, segment,
                                      np.random.default_rng(segment))
    assert (changed["targets"] != packed["targets"]).any()
    keep = packed["targets_segmentation"][0] == segment
    np.testing.assert_allclose(np.asarray(model(changed))[0, keep],
                               np.asarray(model(packed))[0, keep], atol=ATOL)


@pytest.mark.parametrize("row", [0, 1, 2])
def test_cross_attention_sees_only_its_own_source_segment(row):
    """The decoder alone, given an encoder output that is noise outside source
    segment 1 of `row`: only cross attention reads it. Target segment 1 comes
    first in its row, so causal self-attention alone keeps the other targets
    (and the noise they read) out of it: only a cross-attention leak changes it."""
    pairs = make_pairs(3)
    model = Transformer(tiny())
    packed = pack(pairs)
    out, padding = model.encode(packed["inputs"], segmentation=packed["inputs_segmentation"],
                                position=packed["inputs_position"])
    out = np.asarray(out)
    noisy = out.copy()
    other = np.ones(noisy.shape[:2], bool)
    other[row] = packed["inputs_segmentation"][row] != 1
    noisy[other] = np.random.default_rng(row).normal(size=noisy[other].shape)

    def decode(memory):
        return np.asarray(model.decode(
            packed["targets"], memory, padding, segmentation=packed["targets_segmentation"],
            position=packed["targets_position"],
            encoder_segmentation=packed["inputs_segmentation"]))

    keep = packed["targets_segmentation"][row] == 1
    np.testing.assert_allclose(decode(noisy)[row, keep], decode(out)[row, keep], atol=ATOL)


def test_one_segment_per_row_gives_the_unpacked_logits():
    """Segment ids that mark each row as one pair give the unpacked logits
    (at target tokens; PAD queries attend differently and are not scored)."""
    pairs = make_pairs(4)
    model = Transformer(tiny())
    plain = one_per_row(pairs)
    ones = {k + "_segmentation": (plain[k] != 0).astype(np.int32) for k in ("inputs", "targets")}
    positions = {k + "_position": np.broadcast_to(np.arange(plain[k].shape[1]),
                                                  plain[k].shape).astype(np.int32)
                 for k in ("inputs", "targets")}
    real = plain["targets"] != 0
    np.testing.assert_allclose(np.asarray(model({**plain, **ones, **positions}))[real],
                               np.asarray(model(plain))[real], atol=ATOL)


def test_decode_needs_the_source_segmentation():
    model = Transformer(tiny())
    packed = pack(make_pairs())
    out, padding = model.encode(packed["inputs"])
    with pytest.raises(ValueError, match="encoder_segmentation"):
        model.decode(packed["targets"], out, padding,
                      segmentation=packed["targets_segmentation"])


# --------------------------------------------------------------- the pipeline
@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """3 shards of 300 pairs, lengths 1..40 (some over 32), pair i's ids all i + 3."""
    rng = random.Random(1)
    paths = shard_paths(str(tmp_path_factory.mktemp("rec") / "toy-train"), 3)
    pairs = []
    for i in range(300):
        n, m = rng.randint(1, 40), rng.randint(1, 40)
        pairs.append(([i + 3] * (n - 1) + [1], [i + 3] * (m - 1) + [1]))
    for k, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as w:
            for inputs, targets in pairs[k::3]:
                w.write(serialize_pair(inputs, targets))
    return paths, pairs


def segments_of(batch):
    """Every (source, target) pair of a packed batch, checking the features."""
    got = []
    b = {k: v.numpy() for k, v in batch.items()}
    for r in range(b["inputs"].shape[0]):
        row = {}
        for side in ("inputs", "targets"):
            seg, pos, ids = (b[side + "_segmentation"][r], b[side + "_position"][r],
                             b[side][r])
            assert ((seg == 0) == (ids == 0)).all()  # PAD exactly where segment 0
            used = seg[seg > 0]
            n = used.max(initial=0)
            # Segments 1..n, contiguous, in order, then only padding.
            assert (np.diff(used) >= 0).all() and set(used) == set(range(1, n + 1))
            assert (seg[len(used):] == 0).all()
            for s in range(1, n + 1):
                np.testing.assert_array_equal(pos[seg == s], np.arange((seg == s).sum()))
                row.setdefault(s, {})[side] = ids[seg == s].tolist()
        assert all(len(v) == 2 for v in row.values())  # both sides of every pair
        got += [(v["inputs"], v["targets"]) for _, v in sorted(row.items())]
    return got


def test_one_pass_packs_every_pair_exactly_once(records):
    paths, pairs = records
    batches = list(packed_dataset(paths, batch_size=8 * 32, max_length=32,
                                  training=False, pack_window=50))
    got = []
    for i, batch in enumerate(batches):
        assert set(batch) == set(PACKED_FEATURES)
        for k, v in batch.items():
            assert v.dtype == tf.int32 and v.shape[1] == 32
            assert v.shape[0] == 8 or (i == len(batches) - 1 and v.shape[0] < 8)
        got += segments_of(batch)
    kept = [(list(a), list(b)) for a, b in pairs if max(len(a), len(b)) <= 32]
    assert len(kept) < len(pairs)  # the length filter has work to do
    key = lambda p: (p[0][0], len(p[0]), len(p[1]))  # noqa: E731
    assert sorted(got, key=key) == sorted(kept, key=key)
    rows = sum(int(b["inputs"].shape[0]) for b in batches)
    # Pairs of 1..32 tokens a side (independent lengths) in rows of 32, in
    # windows of 50 pairs: about 1.5 pairs per row, and within 40% of the
    # rows the tokens of the fuller side need.
    fewest = max(sum(len(a) for a, _ in kept), sum(len(b) for _, b in kept)) / 32
    assert rows < 0.7 * len(kept) and rows < 1.4 * fewest, (rows, len(kept), fewest)


def test_training_batches_have_one_shape_and_few_pads(records):
    paths, _ = records
    real = slots = 0
    for batch in packed_dataset(paths, batch_size=300, max_length=32, seed=5).take(60):
        for v in batch.values():
            assert tuple(v.shape) == packed_shape(300, 32) == (9, 32)
        segments_of(batch)
        x, y = batch["inputs"].numpy(), batch["targets"].numpy()
        real += np.maximum((x != 0).sum(1), (y != 0).sum(1)).sum()
        slots += x.shape[0] * x.shape[1]
    assert real / slots > 0.85  # first fit leaves few longer-side slots empty


def test_first_fit_fills_the_first_row_with_room():
    window = {"inputs": tf.constant([[5, 6, 1], [7, 1, 0], [8, 9, 1], [3, 1, 0]]),
              "targets": tf.constant([[2, 1, 0], [4, 4, 1], [1, 0, 0], [9, 1, 0]]),
              "inputs_length": tf.constant([3, 2, 3, 2]),
              "targets_length": tf.constant([2, 3, 1, 2])}
    out = {k: v.numpy().tolist() for k, v in pack_window_rows(window, 6).items()}
    # Pair 2 (3 + 1 tokens) does not fit row 0 after pairs 0, 1 (5 + 5): row 1.
    assert out["inputs"] == [[5, 6, 1, 7, 1, 0], [8, 9, 1, 3, 1, 0]]
    assert out["targets"] == [[2, 1, 4, 4, 1, 0], [1, 9, 1, 0, 0, 0]]
    assert out["inputs_segmentation"] == [[1, 1, 1, 2, 2, 0], [1, 1, 1, 2, 2, 0]]
    assert out["targets_segmentation"] == [[1, 1, 2, 2, 2, 0], [1, 2, 2, 0, 0, 0]]
    assert out["targets_position"] == [[0, 1, 0, 1, 2, 0], [0, 0, 1, 0, 0, 0]]


def test_packed_shape_and_hparam_are_checked():
    assert packed_shape(2048, 128) == (16, 128)
    with pytest.raises(DataError, match="batch_size=64"):
        packed_shape(64, 128)
    assert transformer_tiny().packing is False  # off by default
    assert transformer_tiny().override_from_string("packing=true").packing is True
    with pytest.raises(HParamsError, match="packing"):
        transformer_tiny().override_from_string("packing=sometimes")
    with pytest.raises(HParamsError, match="batch_size=100, max_length=128"):
        transformer_tiny().override_from_string("packing=true,batch_size=100")


@pytest.mark.slow
def test_problem_packs_training_batches_only(multi30k_data_dir):
    """The real Multi30k data: packed training batches, bucketed eval batches."""
    from t2t_revival import registry
    from t2t_revival.settings.hparams import resolve

    data_dir, _ = multi30k_data_dir
    problem = registry.problems.get("translate_ende_multi30k")(download=False)
    hp = resolve("transformer_tiny", "packing=true", problem)
    assert problem.batch_shapes(hp) == [(16, 128)]
    counts = collections.Counter()
    for batch in problem.dataset("train", str(data_dir), hp, seed=0).take(5):
        assert set(batch) == set(PACKED_FEATURES)
        assert tuple(batch["targets"].shape) == (16, 128)
        counts["pairs"] += len(segments_of(batch))
    assert counts["pairs"] > 5 * 16 * 4  # Multi30k pairs are short: many per row
    batch = next(iter(problem.dataset("eval", str(data_dir), hp)))
    assert set(batch) == {"inputs", "targets"}


@pytest.mark.slow
def test_trainer_takes_packed_batches_with_one_compiled_shape(multi30k_data_dir, tmp_path):
    """The packed features flow through the trainer's update unchanged: one
    XLA-compiled shape, nearly full batches of real target tokens. (A model
    of 1 narrow layer: a smaller program for XLA to compile, through the same
    packed features.)"""
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    data_dir, _ = multi30k_data_dir
    trainer = Trainer(resolve_train_config(
        problem="translate_ende_multi30k", hparams_set="transformer_tiny",
        hparams="packing=true,num_hidden_layers=1,d_model=16,d_ff=32,num_heads=2",
        data_dir=str(data_dir), output_dir=str(tmp_path / "run")),
        log=lambda *a: None)
    iterator = iter(trainer.train_dataset(0))
    losses = []
    for _ in range(4):
        loss, tokens, _ = trainer.update_step.run(iterator)
        losses.append(float(loss))
        assert 0.9 * 2048 < float(tokens) <= 2048  # 16 rows x 128, few pads
    assert all(np.isfinite(losses))
    # One shape for every packed batch, so XLA compiles the update once (with
    # one CPU replica the update is fused and strategy.run re-enters it, so
    # no per-shape trace count of ours is visible: check the shapes).
    shapes = {tuple((k, tuple(v.shape)) for k, v in sorted(batch.items()))
              for batch in itertools.islice(iter(trainer.train_dataset(0)), 4)}
    assert len(shapes) == 1, shapes
    assert trainer.update_step.run.experimental_get_tracing_count() == 1
