"""Parallel datagen: the same bytes for any number of workers, resumable after a kill."""

import gzip
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from conftest import ROOT
from t2t_revival.data import sharded_record_writer
from t2t_revival.data.sharded_record_writer import frame_record, serialize_pair

sys.path.insert(0, str(ROOT / "tests" / "scripts"))
from small_datagen import SmallDatagen  # noqa: E402

PAIRS = 30_000


def _digests(data_dir):
    return {name: hashlib.sha256((data_dir / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(data_dir))}


@pytest.fixture(scope="module")
def raw_dir(shared_data, tmp_path_factory):
    """Multi30k's layout with 30,000 training pairs from the WMT sample (repeated, perturbed)."""
    d = tmp_path_factory.mktemp("raw")
    sample = shared_data / "wmt14/train_sample_tokenized"
    en = (sample / "src-train.txt").read_text(encoding="utf-8").splitlines()
    de = (sample / "tgt-train.txt").read_text(encoding="utf-8").splitlines()
    rng = random.Random(0)
    with gzip.open(d / "train.en.gz", "wt", encoding="utf-8") as fe, \
            gzip.open(d / "train.de.gz", "wt", encoding="utf-8") as fd:
        for i in range(PAIRS):
            tag = f" {rng.randint(0, 999)}" if i >= len(en) else ""
            fe.write(en[i % len(en)] + tag + "\n")
            fd.write(de[i % len(de)] + tag + "\n")
    for stem in ("val", "test_2016_flickr"):
        for lang in ("en", "de"):
            shutil.copy(shared_data / "multi30k" / f"{stem}.{lang}.gz", d / f"{stem}.{lang}.gz")
    return d


@pytest.fixture(scope="module")
def reference(raw_dir, tmp_path_factory):
    """One uninterrupted run with one worker: (data_dir, digests)."""
    data_dir = tmp_path_factory.mktemp("one_worker")
    SmallDatagen(download=False, num_workers=1).generate_data(str(data_dir), str(raw_dir))
    return data_dir, _digests(data_dir)


def _run(data_dir, raw_dir, workers):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    cmd = [sys.executable, str(ROOT / "tests/scripts/small_datagen.py"), str(data_dir),
           str(raw_dir), str(workers)]
    return cmd, env


def test_records_are_tensorflows_bytes():
    rng = random.Random(1)
    cases = [([], []), ([1], [0]), ([127, 128, 16383, 16384], [2**31 - 1, 2**40]), ([-1], [5])]
    cases += [([rng.randrange(40000) for _ in range(rng.randrange(300))],
               [rng.randrange(40000) for _ in range(rng.randrange(300))]) for _ in range(50)]
    for inputs, targets in cases:
        ours = serialize_pair(inputs, targets)
        theirs = tf.train.Example(features=tf.train.Features(feature={
            "inputs": tf.train.Feature(int64_list=tf.train.Int64List(value=inputs)),
            "targets": tf.train.Feature(int64_list=tf.train.Int64List(value=targets)),
        })).SerializeToString(deterministic=True)
        assert ours == theirs, (inputs, targets)


def test_framed_records_read_back_with_tensorflow(tmp_path):
    path = tmp_path / "r.tfrecord"
    records = [serialize_pair([i, i + 1], [1] * i) for i in range(20)]
    path.write_bytes(b"".join(frame_record(r) for r in records))
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(path)).apply(
        tf.data.experimental.ignore_errors(log_warning=False))]
    assert read == records
    # TensorFlow checks the CRCs: a flipped data byte is a DataLossError.
    damaged = bytearray(path.read_bytes())
    damaged[20] ^= 0xFF
    path.write_bytes(bytes(damaged))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))


def test_one_and_two_workers_write_the_same_bytes(raw_dir, reference, tmp_path):
    ref_dir, expected = reference
    assert len([n for n in expected if "-train-" in n]) == 8
    assert SmallDatagen().stats("train", str(ref_dir))["examples"] == PAIRS - 1  # one blank line
    SmallDatagen(download=False, num_workers=2).generate_data(str(tmp_path), str(raw_dir))
    assert _digests(tmp_path) == expected  # no work file is left either


def test_killed_mid_run_then_rerun_completes_identically(raw_dir, reference, tmp_path):
    _, expected = reference
    data_dir = tmp_path / "killed"
    data_dir.mkdir()
    # Start from the vocabulary so the kill falls while shards are written.
    shutil.copy(reference[0] / "vocab.small_datagen.model", data_dir)
    cmd, env = _run(data_dir, raw_dir, 2)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if any(n.endswith(".raw.incomplete") for n in os.listdir(data_dir)):
            time.sleep(0.5)  # some pairs are encoded and written
            break
        time.sleep(0.02)
    assert proc.poll() is None, "datagen finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert any(n.endswith(".incomplete") for n in os.listdir(data_dir))
    assert not SmallDatagen().has_data(str(data_dir))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert _digests(data_dir) == expected


def test_rerun_after_a_kill_while_shuffling_encodes_only_unfinished_shards(
        raw_dir, reference, tmp_path, monkeypatch):
    """A kill after some shards are final: the rerun writes the rest, same bytes."""
    _, expected = reference
    real = sharded_record_writer._shuffle_shard
    finished = []

    def dies_after_three(raw, path, seed):
        if len(finished) == 3:
            raise KeyboardInterrupt  # stands for the kill
        finished.append(real(raw, path, seed))
        return finished[-1]

    monkeypatch.setattr(sharded_record_writer, "_shuffle_shard", dies_after_three)
    with pytest.raises(KeyboardInterrupt):
        SmallDatagen(download=False, num_workers=1).generate_data(str(tmp_path), str(raw_dir))
    names = os.listdir(tmp_path)
    assert sum(n.endswith(".hist.json") and "-train-" in n for n in names) == 8
    assert sum(n.endswith(".raw") for n in names) == 5
    monkeypatch.setattr(sharded_record_writer, "_shuffle_shard", real)
    encoded = []
    real_encode = sharded_record_writer._encode_chunk

    def counting(start, pairs, num_shards, encode, records_of):
        encoded.append(len(encode))
        return real_encode(start, pairs, num_shards, encode, records_of)

    monkeypatch.setattr(sharded_record_writer, "_encode_chunk", counting)
    SmallDatagen(download=False, num_workers=1).generate_data(str(tmp_path), str(raw_dir))
    assert _digests(tmp_path) == expected
    # train: every shard had its records and histogram, nothing was encoded
    # again; dev was never started, so both its shards were encoded.
    assert encoded and set(encoded) == {2}


def test_a_full_disk_while_encoding_is_one_line_then_a_rerun_completes(raw_dir, reference,
                                                                      tmp_path, monkeypatch):
    """The disk fills while the shards' records are written: a UserError that
    names the split and the folder, no partial work file left (they hold the
    space), and a rerun on a disk with room writes the same bytes."""
    import errno

    from test_disk_failures import _disk_full_after
    from t2t_revival.errors import UserError

    _, expected = reference
    shutil.copy(reference[0] / "vocab.small_datagen.model", tmp_path)
    _disk_full_after(monkeypatch, sharded_record_writer, room=100_000, suffix=".raw.incomplete")
    with pytest.raises(UserError) as e:
        SmallDatagen(download=False, num_workers=1).generate_data(str(tmp_path), str(raw_dir))
    assert str(e.value) == (
        f"could not write the shards of small_datagen train in {tmp_path} "
        f"({os.strerror(errno.ENOSPC)}); the shards already written are kept and the partial "
        f"ones removed; free some space on that disk, then rerun the same command: it writes "
        f"only the missing shards. Received: shards=8")
    assert sorted(os.listdir(tmp_path)) == ["vocab.small_datagen.model"]
    monkeypatch.undo()
    SmallDatagen(download=False, num_workers=1).generate_data(str(tmp_path), str(raw_dir))
    assert _digests(tmp_path) == expected
