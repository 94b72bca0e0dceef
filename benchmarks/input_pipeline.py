"""Throughput of the training input pipeline on Multi30k; prints one JSON object.

    PYTHONPATH=. python benchmarks/input_pipeline.py [--data_dir=DIR] [--tmp_dir=DIR]

Without --data_dir (or when it lacks data) it runs the datagen first, into a
temporary folder, and reports how long that took. It then reads --batches
training batches (after --warmup) of `problem.dataset("train", ...)` with the
hparam set's batch_size and max_length and reports examples/s, real tokens/s
(non-PAD ids of inputs and targets) and padded token slots/s.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="translate_ende_multi30k")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--data_dir", default="")
    shared = pathlib.Path(os.environ.get("T2T_SHARED_DATA", ROOT.parent / "shared" / "data"))
    parser.add_argument("--tmp_dir", default=str(shared / "multi30k"),
                        help="raw Multi30k files (default: $T2T_SHARED_DATA/multi30k "
                             "or ../shared/data/multi30k)")
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from t2t_revival import registry
    from t2t_revival.hparams import resolve

    registry.load_all()
    problem = registry.problems.get(args.problem)(download=False)
    hp = resolve(args.hparams_set, problem=problem)
    tmp = None
    data_dir = args.data_dir
    if not data_dir:
        tmp = tempfile.TemporaryDirectory(prefix="bench_input_")
        data_dir = tmp.name
    datagen_s = None
    if not problem.has_data(data_dir):
        start = time.time()
        problem.generate_data(data_dir, args.tmp_dir)
        datagen_s = round(time.time() - start, 2)

    batches = iter(problem.dataset("train", data_dir, hp, seed=0))
    for _ in range(args.warmup):
        next(batches)
    examples = real = padded = 0
    start = time.perf_counter()
    for _ in range(args.batches):
        b = next(batches)
        x, y = b["inputs"].numpy(), b["targets"].numpy()
        examples += x.shape[0]
        real += int(np.count_nonzero(x) + np.count_nonzero(y))
        padded += x.size + y.size
    seconds = time.perf_counter() - start
    print(json.dumps({
        "benchmark": "input_pipeline",
        "problem": args.problem,
        "hparams_set": args.hparams_set,
        "batch_size_tokens": hp.batch_size,
        "max_length": hp.max_length,
        "batch_shapes": [list(s) for s in problem.batch_shapes(hp)],
        "batches": args.batches,
        "seconds": round(seconds, 3),
        "examples_per_s": round(examples / seconds, 1),
        "tokens_per_s": round(real / seconds, 1),
        "padded_tokens_per_s": round(padded / seconds, 1),
        "padding_fraction": round(1 - real / padded, 4),
        "datagen_s": datagen_s,
        "tf": tf.__version__,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
