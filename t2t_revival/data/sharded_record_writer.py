"""`ShardedRecordWriter`: deterministic, resumable sharded TFRecords of token ids."""

from __future__ import annotations

import os
import random
import time
from typing import Iterable, Sequence

from absl import logging

from t2t_revival.atomic_file import atomic_output

_PROGRESS_EVERY = 100_000


def serialize_pair(inputs: Sequence[int], targets: Sequence[int]) -> bytes:
    """A `tf.train.Example` with int64 lists "inputs" and "targets", serialized."""
    import tensorflow as tf

    return tf.train.Example(features=tf.train.Features(feature={
        "inputs": tf.train.Feature(int64_list=tf.train.Int64List(value=inputs)),
        "targets": tf.train.Feature(int64_list=tf.train.Int64List(value=targets)),
    })).SerializeToString(deterministic=True)  # map keys sorted: same bytes in every process


def shard_paths(prefix: str, num_shards: int) -> list[str]:
    """`prefix-00000-of-00010`, ... (tensor2tensor's naming)."""
    return [f"{prefix}-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]


class ShardedRecordWriter:
    """Writes one split's examples to `num_shards` TFRecord files, resumably.

    Example `i` goes to shard `i % num_shards` (round robin, so every shard
    samples the whole corpus); each shard is then shuffled with its own seed.
    The shards' bytes depend only on the example sequence and the seed, so a
    run that was killed and rerun writes exactly what one uninterrupted run
    writes. Every shard is written under a temporary name and renamed when
    complete; a rerun keeps the finished shards and writes only the missing
    ones (stale temporary files are overwritten).

    Args:
        paths: the final shard paths.
        seed: seed of the per-shard shuffles.
        description: what is written, for the progress log.
    """

    def __init__(self, paths: Sequence[str], seed: int = 1234, description: str = ""):
        self.paths = list(paths)
        self.seed = seed
        self.description = description or os.path.basename(self.paths[0])

    def missing(self) -> list[int]:
        """Indices of the shards not yet complete."""
        return [i for i, p in enumerate(self.paths) if not os.path.isfile(p)]

    def write(self, pairs: Iterable[tuple[Sequence[int], Sequence[int]]]) -> int:
        """Write the missing shards from the full sequence of (inputs, targets) id lists.

        `pairs` must be the same sequence as in any earlier (interrupted) run.
        Returns the number of pairs seen.
        """
        import tensorflow as tf

        todo = set(self.missing())
        n = len(self.paths)
        writers = {}
        for i in sorted(todo):
            os.makedirs(os.path.dirname(os.path.abspath(self.paths[i])), exist_ok=True)
            writers[i] = tf.io.TFRecordWriter(self.paths[i] + ".raw.incomplete")
        start = time.time()
        count = 0
        try:
            for count, (inputs, targets) in enumerate(pairs, start=1):
                shard = (count - 1) % n
                if shard in writers:
                    writers[shard].write(serialize_pair(inputs, targets))
                if count % _PROGRESS_EVERY == 0:
                    logging.info("%s: %d pairs encoded (%.0f pairs/s)", self.description,
                                 count, count / max(time.time() - start, 1e-9))
        finally:
            for w in writers.values():
                w.close()
        for i in sorted(todo):
            raw = self.paths[i] + ".raw.incomplete"
            records = [r.numpy() for r in tf.data.TFRecordDataset(raw)]
            random.Random(self.seed * 100_003 + i).shuffle(records)
            with atomic_output(self.paths[i]) as tmp, tf.io.TFRecordWriter(tmp) as w:
                for r in records:
                    w.write(r)
            os.unlink(raw)
        logging.info("%s: %d pairs, %d of %d shards written in %.1f s", self.description,
                     count, len(todo), n, time.time() - start)
        return count
