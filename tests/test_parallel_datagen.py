"""Parallel datagen: the same bytes for any number of workers, resumable after a kill."""

import gzip
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
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


def _children(pid):
    """The pids of `pid`'s child processes (Linux)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
        return [int(p) for p in f.read().split()]


def _cmdline(pid):
    """The command line of process `pid` (Linux), its arguments joined by NUL."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


def _running(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


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
    children = _children(proc.pid)   # the workers, and multiprocessing's resource tracker
    workers = [pid for pid in children if b"spawn_main" in _cmdline(pid)]
    assert len(workers) == 2, [_cmdline(pid) for pid in children]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # The workers see their parent gone and end (they held their memory for
    # ever), and so does everything else datagen started.
    deadline = time.time() + 20
    while time.time() < deadline and any(_running(pid) for pid in children):
        time.sleep(0.2)
    assert not any(_running(pid) for pid in children), children
    assert any(n.endswith(".incomplete") for n in os.listdir(data_dir))
    assert not SmallDatagen().has_data(str(data_dir))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert _digests(data_dir) == expected


def test_rerun_after_a_kill_while_shuffling_encodes_only_unfinished_shards(
        raw_dir, reference, tmp_path, monkeypatch):
    """A kill after some shards are final: the rerun writes the rest, same bytes.
    (From the vocabulary, as after a kill that fell while shards were written.)"""
    _, expected = reference
    shutil.copy(reference[0] / "vocab.small_datagen.model", tmp_path)
    real = sharded_record_writer.shuffle_shard
    finished = []

    def dies_after_three(raw, path, seed):
        if len(finished) == 3:
            raise KeyboardInterrupt  # stands for the kill
        finished.append(real(raw, path, seed))
        return finished[-1]

    monkeypatch.setattr(sharded_record_writer, "shuffle_shard", dies_after_three)
    with pytest.raises(KeyboardInterrupt):
        SmallDatagen(download=False, num_workers=1).generate_data(str(tmp_path), str(raw_dir))
    names = os.listdir(tmp_path)
    assert sum(n.endswith(".hist.json") and "-train-" in n for n in names) == 8
    assert sum(n.endswith(".raw") for n in names) == 5
    monkeypatch.setattr(sharded_record_writer, "shuffle_shard", real)
    encoded = []
    real_encode = sharded_record_writer.encode_chunk

    def counting(vocab_file, start, pairs, num_shards, encode, records_of):
        encoded.append(len(encode))
        return real_encode(vocab_file, start, pairs, num_shards, encode, records_of)

    monkeypatch.setattr(sharded_record_writer, "encode_chunk", counting)
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

    from full_disk import disk_full_after
    from t2t_revival.errors import UserError

    _, expected = reference
    shutil.copy(reference[0] / "vocab.small_datagen.model", tmp_path)
    disk_full_after(monkeypatch, sharded_record_writer, room=100_000, suffix=".raw.incomplete")
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


def test_a_worker_that_dies_is_one_error_not_a_wait_for_ever(tmp_path):
    """A worker killed in the middle of a task (the OOM killer, kill -9):
    multiprocessing.Pool never returned that task's result, so datagen
    waited for ever; now every task still waiting raises WorkerDiedError."""
    script = tmp_path / "dies.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from t2t_revival.data.sharded_record_writer import ShardedRecordWriter, WorkerDiedError
        from t2t_revival.data.subword_vocabulary import SubwordVocabulary

        class DiesInWorker:  # unpickled in the worker: it exits there, mid-task
            def __reduce__(self):
                return (os._exit, (9,))

        d = sys.argv[1]
        vocab = SubwordVocabulary.train((f"w{i} x{i % 7}" for i in range(20000)),
                                        f"{d}/v.model", 300)
        writer = ShardedRecordWriter([f"{d}/s-{i}" for i in range(2)], num_workers=2)
        pairs = [("w1", "x1")] * 2000 + [(DiesInWorker(), "x")] + [("w2", "x2")] * 8000
        try:
            writer.write(pairs, vocab.model_file)
        except WorkerDiedError as e:
            print("WorkerDiedError:", e)
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("WorkerDiedError: a datagen worker process died (killed, "
                                 "or out of memory?); the shards already written are kept"), \
        out.stdout + out.stderr[-2000:]
    assert not (tmp_path / "s-0").exists() and not (tmp_path / "s-1").exists()


def test_temporary_files_a_kill_left_are_removed_by_the_rerun(raw_dir, reference, tmp_path):
    """A SIGKILL mid-write leaves `.<name>.<random>.incomplete` files (no
    finally runs); the next datagen of the problem removes its own, and only
    those, then writes the same bytes."""
    _, expected = reference
    left = [".small_datagen-train-00003-of-00008.k3j2h1.incomplete",
            ".small_datagen-train-00003-of-00008.hist.json.a1b2.incomplete",
            ".vocab.small_datagen.model.zz9.incomplete",
            ".small_datagen-dev.source.txt.q1.incomplete"]
    others = [".other_problem-train-00000-of-00001.x1.incomplete", "notes.incomplete"]
    for name in left + others:
        (tmp_path / name).write_bytes(b"partial")
    SmallDatagen(download=False, num_workers=1).generate_data(str(tmp_path), str(raw_dir))
    names = set(os.listdir(tmp_path))
    assert not names & set(left)
    assert names >= set(others)
    assert {n: d for n, d in _digests(tmp_path).items() if n not in others} == expected


def test_a_process_loads_a_vocabulary_once_per_version_of_its_file(tmp_path):
    """What a worker encodes its chunks with (`vocabulary_of`): loaded at
    the first chunk, the same object after, and loaded again when the file
    was written anew."""
    from t2t_revival.data.sharded_record_writer import vocabulary_of
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary

    vocab = SubwordVocabulary.train((f"w{i} x{i % 7}" for i in range(2000)),
                                    str(tmp_path / "v.model"), 300)
    first = vocabulary_of(vocab.model_file)
    assert vocabulary_of(vocab.model_file) is first
    assert first.encode_batch(["w1 x1"], num_threads=1) == vocab.encode_batch(["w1 x1"],
                                                                              num_threads=1)
    os.utime(vocab.model_file, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert vocabulary_of(vocab.model_file) is not first
