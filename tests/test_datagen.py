"""Datagen: resumable, deterministic shards; Multi30k end to end on the real data."""

import collections
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT
from t2t_revival.hparams_sets.transformer import transformer_tiny
from t2t_revival.problems.translate_multi30k import TranslateEndeMulti30k


def _digests(data_dir):
    return {name: hashlib.sha256((data_dir / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(data_dir))}


def _datagen(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return [sys.executable, "-m", "t2t_revival.cli.datagen", *args], env


class _SmallMulti30k(TranslateEndeMulti30k):
    """Multi30k with val as its training set: a datagen of a few seconds."""
    vocab_size = 1000
    num_shards = {"train": 3, "dev": 1}


@pytest.fixture
def small_tmp_dir(shared_data, tmp_path):
    d = tmp_path / "raw"
    d.mkdir()
    src = shared_data / "multi30k"
    for stem, as_stem in (("val", "train"), ("val", "val"), ("test_2016_flickr",
                                                               "test_2016_flickr")):
        for lang in ("en", "de"):
            shutil.copy(src / f"{stem}.{lang}.gz", d / f"{as_stem}.{lang}.gz")
    return d


def test_rerun_completes_a_partial_datagen_identically(small_tmp_dir, tmp_path):
    full, partial = tmp_path / "full", tmp_path / "partial"
    _SmallMulti30k(download=False).generate_data(str(full), str(small_tmp_dir))
    expected = _digests(full)
    assert len([n for n in expected if "-train-" in n]) == 3
    problem = _SmallMulti30k(download=False)
    problem.generate_data(str(partial), str(small_tmp_dir))
    # What a kill leaves: a missing shard with a stale half-written temp file,
    # a split without its stats, a missing text file.
    train = problem.data_files("train", str(partial))
    os.unlink(train[1])
    with open(train[1] + ".raw.incomplete", "wb") as f:
        f.write(b"half a record")
    os.unlink(problem.data_files("dev", str(partial))[0])
    os.unlink(problem.stats_file("dev", str(partial)))
    os.unlink(problem.source_target_files("test", str(partial))[1])
    kept = os.stat(train[0]).st_mtime_ns
    assert not problem.has_data(str(partial))
    problem.generate_data(str(partial), str(small_tmp_dir))
    assert _digests(partial) == expected
    assert os.stat(train[0]).st_mtime_ns == kept  # finished work is not redone


def test_datagen_cli_reports_misaligned_corpus(small_tmp_dir, tmp_path):
    import gzip
    with gzip.open(small_tmp_dir / "train.de.gz", "wt") as f:
        f.write("nur eine Zeile\n")
    cmd, env = _datagen(f"--data_dir={tmp_path / 'd'}", f"--tmp_dir={small_tmp_dir}",
                        "--nodownload")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 2
    lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-datagen: error:")]
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "train.en.gz has 1014 lines" in lines[0] and "train.de.gz has 1" in lines[0]


# ---------------------------------------------------------------------------
# The full Multi30k training set (slow: shared session fixture, ~10-20 s).
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_multi30k_datagen_finishes_in_minutes(multi30k_data_dir):
    data_dir, seconds = multi30k_data_dir
    problem = TranslateEndeMulti30k()
    assert problem.has_data(str(data_dir))
    assert seconds < 180
    stats = problem.stats("train", str(data_dir))
    assert stats["examples"] == 29000 and stats["empty_dropped"] == 0
    assert sum(stats["length_histogram"].values()) == 29000
    assert problem.stats("dev", str(data_dir))["examples"] == 1014
    assert problem.vocabulary(str(data_dir)).vocab_size == 8192


@pytest.mark.slow
def test_multi30k_vocab_round_trips_val(multi30k_data_dir, shared_data):
    data_dir, _ = multi30k_data_dir
    problem = TranslateEndeMulti30k()
    vocab = problem.vocabulary(str(data_dir))
    pairs = list(problem.text_pairs("dev", str(shared_data / "multi30k")))
    assert len(pairs) == 1014
    for src, tgt in pairs:
        assert vocab.decode(vocab.encode(src)) == src
        assert vocab.decode(vocab.encode(tgt)) == tgt
    # The dev text files written for the decoder hold the same text.
    src_file, tgt_file = problem.source_target_files("dev", str(data_dir))
    assert open(src_file, encoding="utf-8").read().splitlines() == [s for s, _ in pairs]


@pytest.mark.slow
def test_multi30k_training_batches(multi30k_data_dir):
    data_dir, _ = multi30k_data_dir
    problem = TranslateEndeMulti30k()
    hp = transformer_tiny().replace(**problem.hparams_overrides(transformer_tiny()))
    shapes = problem.batch_shapes(hp)
    assert shapes == [(256, 8), (128, 16), (85, 24), (64, 32), (42, 48), (32, 64),
                      (21, 96), (16, 128)]
    seen = collections.Counter()
    for batch in problem.dataset("train", str(data_dir), hp, seed=0).take(400):
        x, y = batch["inputs"].numpy(), batch["targets"].numpy()
        assert x.shape == y.shape and tuple(x.shape) in shapes
        assert x.size <= hp.batch_size and y.size <= hp.batch_size
        # every row ends in EOS (1) then PAD (0)
        for row in y[:4]:
            n = int((row != 0).sum())
            assert row[n - 1] == 1 and not row[n:].any()
        seen[x.shape] += 1
    assert len(seen) >= 4
    assert max(np.prod(s) for s in seen) <= hp.batch_size


@pytest.mark.slow
def test_multi30k_datagen_killed_and_rerun_gives_the_same_files(multi30k_data_dir,
                                                                 shared_data, tmp_path):
    reference, _ = multi30k_data_dir
    data_dir = tmp_path / "killed"
    cmd, env = _datagen(f"--data_dir={data_dir}",
                        f"--tmp_dir={shared_data / 'multi30k'}", "--nodownload")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    # Kill as soon as the training shards are being written.
    while time.time() < deadline and proc.poll() is None:
        if data_dir.is_dir() and any(n.endswith(".incomplete") and "-train-" in n
                                     for n in os.listdir(data_dir)):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "datagen finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    names = os.listdir(data_dir)
    assert any(n.endswith(".incomplete") for n in names)
    assert not TranslateEndeMulti30k().has_data(str(data_dir))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got, expected = _digests(data_dir), _digests(reference)
    assert sorted(got) == sorted(expected)
    assert [n for n in got if got[n] != expected[n]] == []
