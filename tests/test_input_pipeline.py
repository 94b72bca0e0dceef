"""The token-bucketed pipeline: declared shapes, token budget, filtering, sharding;
the trainer's --skip_corrupt_records (issue 20 item 8)."""

import collections
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_cli
from t2t_revival.data.data_error import DataError
from t2t_revival.data.input_pipeline import (bucket_shapes, default_bucket_boundaries,
                                             token_bucketed_dataset)
from t2t_revival.data.sharded_record_writer import serialize_pair, shard_paths
from tiny_runs import TinyMulti30k, digests, trainer_args


def test_default_boundaries():
    assert default_bucket_boundaries(128) == [8, 16, 24, 32, 48, 64, 96, 128]
    assert default_bucket_boundaries(256) == [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert default_bucket_boundaries(100) == [8, 16, 24, 32, 48, 64, 100]
    assert bucket_shapes(2048, 128) == [(256, 8), (128, 16), (85, 24), (64, 32),
                                        (42, 48), (32, 64), (21, 96), (16, 128)]
    assert bucket_shapes(1000, 50, (10, 20, 100)) == [(100, 10), (50, 20), (20, 50)]
    with pytest.raises(DataError, match="batch_size=64"):
        bucket_shapes(64, 128)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """4 shards of 400 pairs with lengths 2..70 (inputs), 1..70 (targets) (EOS included), ids = row number + 3."""
    rng = random.Random(0)
    paths = shard_paths(str(tmp_path_factory.mktemp("rec") / "toy-train"), 4)
    pairs = []
    for i in range(400):
        n, m = rng.randint(2, 70), rng.randint(1, 70)
        pairs.append(([i + 3] * (n - 1) + [1], [i + 3] * (m - 1) + [1]))
    for k, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as w:
            for inputs, targets in pairs[k::4]:
                w.write(serialize_pair(inputs, targets))
    return paths, pairs


def test_training_batches_have_declared_shapes_and_token_budget(records):
    paths, _ = records
    shapes = set(bucket_shapes(256, 64))
    ds = token_bucketed_dataset(paths, batch_size=256, max_length=64, seed=3)
    seen = collections.Counter()
    for batch in ds.take(150):
        x, y = batch["inputs"].numpy(), batch["targets"].numpy()
        assert x.shape == y.shape and x.shape in shapes and x.dtype == np.int32
        assert x.size <= 256
        lengths = np.maximum((x != 0).sum(1), (y != 0).sum(1))
        prev = max([b for _, b in shapes if b < x.shape[1]], default=0)
        assert (lengths > prev).all() and (lengths <= x.shape[1]).all()  # right bucket
        assert (x[:, 0] != 0).all() and (y[:, 0] != 0).all()  # right-padded
        seen[x.shape] += 1
    assert len(seen) >= 4


def test_eval_is_one_ordered_pass_without_too_long_pairs(records):
    paths, pairs = records
    ds = token_bucketed_dataset(paths, batch_size=256, max_length=48, training=False)
    rows = [r for b in ds for r in b["inputs"].numpy()]
    kept = {i for i, (a, b) in enumerate(pairs) if max(len(a), len(b)) <= 48}
    assert len(kept) < 400  # the filter has work to do
    assert sorted(int(r[0]) - 3 for r in rows) == sorted(kept)
    again = [r for b in ds for r in b["inputs"].numpy()]
    assert all((a == b).all() for a, b in zip(rows, again))


@pytest.mark.parametrize("num_files", [4, 1])
def test_input_context_splits_the_data_between_workers(records, num_files):
    paths, pairs = records
    files = paths[:num_files]
    got = []
    for worker in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker)
        ds = token_bucketed_dataset(files, batch_size=256, max_length=70,
                                    training=False, input_context=ctx)
        got.append({int(r[0]) - 3 for b in ds for r in b["inputs"].numpy()})
    assert got[0] and got[1] and not got[0] & got[1]
    expected = {i for i in range(400) if i % 4 < num_files}
    assert got[0] | got[1] == expected


def test_skip_corrupt_records_counts_and_names_the_shards(tiny_data, tmp_path, fake_updates):
    copy = tmp_path / "data"
    shutil.copytree(tiny_data, copy)
    shards = TinyMulti30k().data_files("train", str(copy))
    os.truncate(shards[3], os.path.getsize(shards[3]) - 7)
    before = digests(copy)
    out = tmp_path / "run"
    result = run_cli("trainer", *trainer_args(copy, out, 2), "--skip_corrupt_records")
    stdout = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [l for l in stdout.splitlines() if l.startswith("--skip_corrupt_records:")]
    assert len(lines) == 1, stdout
    assert lines[0].startswith("--skip_corrupt_records: skipping 1 record(s) of the train "
                               "split of translate_ende_multi30k: 1 shard(s)")
    assert f"first {shards[3]} (truncated record at" in lines[0]
    assert (out / "ckpt-2.index").is_file()
    assert digests(copy) == before
