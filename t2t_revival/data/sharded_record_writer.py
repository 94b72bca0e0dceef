"""`ShardedRecordWriter`: deterministic, resumable, parallel sharded TFRecords of token ids.

Nothing here imports TensorFlow: the records are `tf.train.Example` protos
encoded by hand (`serialize_pair`, checked byte for byte against TensorFlow's
own serializer in the tests) in TFRecord framing (`frame_record`, CRC32C
from google-crc32c), so the worker processes stay small and start fast.
"""

from __future__ import annotations

import array
import collections
import concurrent.futures
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import random
import struct
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Iterable, Iterator, Sequence

import google_crc32c
from absl import logging

from t2t_revival.files.atomic_file import (atomic_open, disk_failure, disk_failure_fix,
                                     write_atomically)
from t2t_revival.errors import UserError
from t2t_revival.data.vocabulary_file import load_vocabulary
from t2t_revival.files.protobuf_wire import varint
from t2t_revival.special_ids import EOS_ID

_CHUNK_PAIRS = 2000
"""Pairs per task sent to a worker (big enough to amortize the pickling)."""
_IN_FLIGHT_PER_WORKER = 4
"""Chunks queued per worker: keeps the workers busy and the memory bounded."""
_PROGRESS_EVERY_S = 15.0


# ---- the bytes of one record ------------------------------------------------
_SMALL_VARINTS = [varint(i) for i in range(1 << 16)]   # the common case, precomputed


def _int64_varint(i: int) -> bytes:
    if 0 <= i < len(_SMALL_VARINTS):
        return _SMALL_VARINTS[i]
    return varint(i)


def _len_field(tag: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    return bytes((tag,)) + _int64_varint(len(payload)) + payload


def _int64_feature(key: bytes, values: Sequence[int]) -> bytes:
    packed = b"".join(map(_int64_varint, values))
    int64_list = _len_field(0x0A, packed) if packed else b""  # Int64List.value = 1, packed
    feature = _len_field(0x1A, int64_list)                     # Feature.int64_list = 3
    entry = _len_field(0x0A, key) + _len_field(0x12, feature)  # map entry: key = 1, value = 2
    return _len_field(0x0A, entry)                             # Features.feature = 1


def serialize_pair(inputs: Sequence[int], targets: Sequence[int]) -> bytes:
    """A `tf.train.Example` with int64 lists "inputs" and "targets", serialized.

    The same bytes as TensorFlow's `SerializeToString(deterministic=True)`
    (map keys sorted), without importing TensorFlow.
    """
    features = _int64_feature(b"inputs", inputs) + _int64_feature(b"targets", targets)
    return _len_field(0x0A, features)                          # Example.features = 1


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def frame_record(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC32C of the length, data, masked CRC32C of the data."""
    length = struct.pack("<Q", len(data))
    return length + _masked_crc(length) + data + _masked_crc(data)


def _record_offsets(path: str) -> array.array:
    """Start offsets of the framed records in `path`, and its size last."""
    offsets = array.array("Q")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        position = 0
        while position < size:
            offsets.append(position)
            f.seek(position)
            (length,) = struct.unpack("<Q", f.read(8))
            position += 16 + length
    offsets.append(size)
    return offsets


def shard_paths(prefix: str, num_shards: int) -> list[str]:
    """`prefix-00000-of-00010`, ... (tensor2tensor's naming)."""
    return [f"{prefix}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]


# ---- what a worker process does ---------------------------------------------
def vocabulary_of(vocab_file: str):
    """The vocabulary in `vocab_file`, loaded once per process and file version
    (a worker encodes many chunks with it): the one most recently asked for
    is kept, keyed by the file's path, size and modification time."""
    stat = os.stat(vocab_file)
    return _loaded_vocabulary(vocab_file, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1)
def _loaded_vocabulary(vocab_file: str, size: int, mtime_ns: int):
    return load_vocabulary(vocab_file)


def _init_worker_process(vocab_file: str, parent: int) -> None:
    """A worker process's start: it loads the vocabulary before its first
    task, and ends itself once its parent is gone (killed with SIGKILL, which
    runs no clean-up): it would otherwise wait for tasks for ever, holding
    its memory."""
    vocabulary_of(vocab_file)

    def watch_parent():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch_parent, name="watch_parent", daemon=True).start()


def encode_chunk(vocab_file: str, start: int, pairs: list[tuple[str, str]], num_shards: int,
                 encode: frozenset[int], records_of: frozenset[int]) -> tuple[dict, dict]:
    """Encode the pairs `start, start + 1, ...` whose shard (i % num_shards) is
    in `encode`, with the vocabulary in `vocab_file` (`vocabulary_of`).

    Returns ({shard: framed records of the shards in `records_of`, in pair
    order}, {shard: Counter of max(len(inputs), len(targets)), EOS included}).
    """
    shards = [(start + k) % num_shards for k in range(len(pairs))]
    kept = [(shard, pair) for shard, pair in zip(shards, pairs) if shard in encode]
    vocab = vocabulary_of(vocab_file)
    src = vocab.encode_batch([s for _, (s, _) in kept], num_threads=1)
    tgt = vocab.encode_target_batch([t for _, (_, t) in kept], num_threads=1)
    blobs: dict[int, list[bytes]] = collections.defaultdict(list)
    hists: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for (shard, _), s, t in zip(kept, src, tgt):
        s.append(EOS_ID)
        t.append(EOS_ID)
        hists[shard][max(len(s), len(t))] += 1
        if shard in records_of:
            blobs[shard].append(frame_record(serialize_pair(s, t)))
    return {i: b"".join(b) for i, b in blobs.items()}, dict(hists)


def shuffle_shard(raw: str, path: str, seed: int) -> str:
    """Write `path` from its unshuffled records in `raw`: a seeded permutation, atomically.

    Only the record offsets are held in memory (8 bytes a record); the order
    is that of `random.Random(seed).shuffle` on the list of records.
    """
    offsets = _record_offsets(raw)
    order = array.array("Q", range(len(offsets) - 1))
    random.Random(seed).shuffle(order)
    with open(raw, "rb") as f, atomic_open(path, "wb") as out:
        for i in order:
            f.seek(offsets[i])
            out.write(f.read(offsets[i + 1] - offsets[i]))
    os.unlink(raw)
    return path


@contextlib.contextmanager
def _main_module_hidden():
    """Start spawned workers without re-importing the caller's `__main__`.

    'spawn' runs the parent's main module again in every child (as
    `__mp_main__`); for t2t_trainer.py that would import TensorFlow into each
    worker (seconds and hundreds of MB apiece). The workers need only this
    module, so the main module's name and path are hidden while they start.
    """
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__spec__", "__file__")
             if main is not None and k in main.__dict__}
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__spec__ = None
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)
            if "__spec__" not in saved:
                main.__dict__.pop("__spec__", None)


class WorkerDiedError(UserError):
    """A datagen worker process ended in the middle of its work."""


class _WorkerPool:
    """`num_workers` spawned worker processes, with `_InProcessPool`'s interface.

    concurrent.futures rather than multiprocessing.Pool: when a worker dies
    (killed, out of memory, a native crash) the Pool starts another and the
    lost task's result never comes, so datagen would wait for ever; here
    every task still waiting raises `WorkerDiedError` instead.
    """

    class _Task:
        def __init__(self, future):
            self._future = future

        def get(self):
            try:
                return self._future.result()
            except BrokenProcessPool:
                raise WorkerDiedError(
                    "a datagen worker process died (killed, or out of memory?); the "
                    "shards already written are kept; rerun the same command, with "
                    "fewer --num_workers if memory is short: it writes only the "
                    "missing shards") from None

    def __init__(self, num_workers: int, vocab_file: str):
        self._executor = concurrent.futures.ProcessPoolExecutor(
            num_workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker_process, initargs=(vocab_file, os.getpid()))
        # Start every worker now, with the main module hidden: the executor
        # starts them as tasks come, each in `submit`.
        with _main_module_hidden():
            started = [self._executor.submit(os.getpid) for _ in range(num_workers)]
        for task in started:
            self._Task(task).get()

    def apply_async(self, fn, args):
        return self._Task(self._executor.submit(fn, *args))

    def close(self):
        pass

    def join(self):
        self._executor.shutdown(wait=True)

    def terminate(self):
        """Stop now: the workers killed, the tasks not started dropped."""
        # (The executor forgets its processes in shutdown: take them first.)
        processes = list((getattr(self._executor, "_processes", None) or {}).values())
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()
        self._executor.shutdown(wait=False, cancel_futures=True)


class _InProcessPool:
    """The one-worker case: the same tasks run in this process, in order."""

    class _Done:
        def __init__(self, value):
            self._value = value

        def get(self):
            return self._value

    def __init__(self, vocab_file: str):
        vocabulary_of(vocab_file)   # (a missing or bad vocabulary is said before any pair is read)

    def apply_async(self, fn, args):
        return self._Done(fn(*args))

    def close(self):
        pass

    def join(self):
        pass

    def terminate(self):
        pass


class ShardedRecordWriter:
    """Encodes one split's text pairs into `num_shards` TFRecord files, in parallel, resumably.

    Pair `i` (in the order the pairs come) goes to shard `i % num_shards`
    (round robin, so every shard samples the whole corpus); each shard is
    then shuffled with its own seed. This process reads the pairs and hands
    chunks of them to `num_workers` worker processes ('spawn' start method:
    safe after TensorFlow is imported) that encode them with the vocabulary
    and return framed records, which are appended in pair order to one
    unshuffled file per shard; the workers then shuffle whole shards. So the
    bytes depend only on the pair sequence, the vocabulary and the seed,
    never on the number of workers; memory is bounded by the chunks in
    flight and the offsets of one shard, not by the corpus.

    Resumable: every file is written under a temporary name and renamed when
    complete. Per shard, the unshuffled records (`<shard>.raw`) and the
    length histogram (`<shard>.hist.json`) are kept until the split is done,
    so a rerun after a kill reads the pairs again but encodes only those of
    shards still lacking one of them, and writes only the missing shards;
    it writes exactly what one uninterrupted run writes.

    Args:
        paths: the final shard paths.
        seed: seed of the per-shard shuffles.
        description: what is written, for the progress log.
        num_workers: worker processes (1: encode in this process).
    """

    def __init__(self, paths: Sequence[str], seed: int = 1234, description: str = "",
                 num_workers: int = 1):
        self.paths = list(paths)
        self.seed = seed
        self.description = description or os.path.basename(self.paths[0])
        self.num_workers = max(1, int(num_workers))

    def missing(self) -> list[int]:
        """Indices of the shards not yet complete."""
        return [i for i, p in enumerate(self.paths) if not os.path.isfile(p)]

    def _hist_file(self, i: int) -> str:
        return self.paths[i] + ".hist.json"

    def _raw_file(self, i: int) -> str:
        return self.paths[i] + ".raw"

    def _shuffle_seed(self, i: int) -> int:
        return self.seed * 100_003 + i

    def clean_up(self) -> None:
        """Remove the per-shard work files (after the split's stats are written)."""
        for i in range(len(self.paths)):
            for path in (self._hist_file(i), self._raw_file(i), self._raw_file(i) + ".incomplete"):
                if os.path.exists(path):
                    os.unlink(path)

    def _pool(self, vocab_file: str):
        if self.num_workers == 1:
            return _InProcessPool(vocab_file)
        return _WorkerPool(self.num_workers, vocab_file)

    def write(self, pairs: Iterable[tuple[str, str]], vocab_file: str,
              expected_pairs: int | None = None) -> collections.Counter:
        """Write the missing shards from the full sequence of (source, target) texts.

        `pairs` must be the same sequence as in any earlier (interrupted) run;
        `expected_pairs`, when known, gives the progress log an ETA. Returns
        the histogram of pair lengths (the longer side in tokens, EOS
        included) over all shards.
        """
        n = len(self.paths)
        done = set(range(n)) - set(self.missing())
        has_hist = {i for i in range(n) if os.path.isfile(self._hist_file(i))}
        has_raw = {i for i in range(n) if os.path.isfile(self._raw_file(i))} & has_hist
        records_of = frozenset(i for i in range(n) if i not in done and i not in has_raw)
        encode = frozenset(records_of | (set(range(n)) - has_hist))
        start_time = time.time()
        pool = self._pool(vocab_file)
        try:
            self._encode_all(pairs, vocab_file, pool, n, encode, records_of, expected_pairs,
                             start_time)
            shuffles = [pool.apply_async(shuffle_shard, (self._raw_file(i), self.paths[i],
                                                         self._shuffle_seed(i)))
                        for i in range(n) if i not in done]
            for task in shuffles:
                task.get()
            pool.close()
        except BaseException as e:
            pool.terminate()
            reason = disk_failure(e)
            if reason is not None:
                raise UserError(
                    f"could not write the shards of {self.description} in "
                    f"{os.path.dirname(os.path.abspath(self.paths[0]))} ({reason}); the "
                    f"shards already written are kept and the partial ones removed; "
                    f"{disk_failure_fix(reason)}, then rerun the same command: it writes "
                    f"only the missing shards. Received: shards={n}") from None
            raise
        finally:
            pool.join()
        total: collections.Counter = collections.Counter()
        for i in range(n):
            with open(self._hist_file(i), encoding="utf-8") as f:
                total.update({int(k): v for k, v in json.load(f).items()})
        logging.info("%s: %d pairs, %d of %d shards written in %.1f s with %d worker(s)",
                     self.description, sum(total.values()), n - len(done), n,
                     time.time() - start_time, self.num_workers)
        return total

    def _encode_all(self, pairs: Iterable[tuple[str, str]], vocab_file: str, pool, n: int,
                    encode: frozenset[int], records_of: frozenset[int],
                    expected_pairs: int | None, start_time: float) -> dict:
        """Stream the pairs through the workers; write raw records and histograms."""
        raws = {}
        hists: dict[int, collections.Counter] = {i: collections.Counter() for i in encode}
        in_flight: collections.deque = collections.deque()
        max_in_flight = _IN_FLIGHT_PER_WORKER * self.num_workers
        progress = _Progress(self.description, expected_pairs, start_time)

        def collect_one():
            blobs, chunk_hists = in_flight.popleft().get()
            for i, blob in blobs.items():
                raws[i].write(blob)
            for i, h in chunk_hists.items():
                hists[i].update(h)

        try:
            for i in sorted(records_of):
                os.makedirs(os.path.dirname(os.path.abspath(self.paths[i])), exist_ok=True)
                raws[i] = open(self._raw_file(i) + ".incomplete", "wb")
            count = 0
            for start, chunk in _chunks(pairs):
                count = start + len(chunk)
                if encode:  # else only read (the readers count what they drop)
                    in_flight.append(pool.apply_async(
                        encode_chunk, (vocab_file, start, chunk, n, encode, records_of)))
                while len(in_flight) >= max_in_flight:
                    collect_one()
                progress.update(count)
            while in_flight:
                collect_one()
            for f in raws.values():
                f.close()   # (flushes: a full disk may show only here)
        except BaseException:
            for i, f in raws.items():   # partial: a rerun writes them again
                with contextlib.suppress(OSError):
                    f.close()
                with contextlib.suppress(OSError):
                    os.unlink(self._raw_file(i) + ".incomplete")
            raise
        progress.finish(count)
        for i in sorted(encode):
            write_atomically(self._hist_file(i), json.dumps(
                {str(k): hists[i][k] for k in sorted(hists[i])}))
        for i in sorted(records_of):
            os.replace(self._raw_file(i) + ".incomplete", self._raw_file(i))
        return hists


def _chunks(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """(index of the chunk's first pair, the chunk's pairs), in order."""
    it = iter(pairs)
    start = 0
    while chunk := list(itertools.islice(it, _CHUNK_PAIRS)):
        yield start, chunk
        start += len(chunk)


class _Progress:
    """Log lines with pairs/s and, when the total is known, an ETA."""

    def __init__(self, description: str, expected: int | None, start: float):
        self.description, self.expected, self.start = description, expected, start
        self.last = start

    def update(self, count: int) -> None:
        now = time.time()
        if now - self.last < _PROGRESS_EVERY_S:
            return
        self.last = now
        rate = count / max(now - self.start, 1e-9)
        if self.expected:
            eta = f"ETA {max(self.expected - count, 0) / max(rate, 1e-9):.0f} s"
            logging.info("%s: %d of %d pairs read (%.0f%%), %.0f pairs/s, %s",
                         self.description, count, self.expected,
                         100.0 * count / self.expected, rate, eta)
        else:
            logging.info("%s: %d pairs read, %.0f pairs/s (no ETA: total unknown)",
                         self.description, count, rate)

    def finish(self, count: int) -> None:
        elapsed = max(time.time() - self.start, 1e-9)
        logging.info("%s: %d pairs encoded in %.1f s (%.0f pairs/s)", self.description,
                     count, elapsed, count / elapsed)
