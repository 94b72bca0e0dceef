"""Throughput and padding of the training input pipeline on Multi30k; prints one JSON object.

    python -m benchmarks.input_pipeline [--data_dir=DIR] [--tmp_dir=DIR]
        [--hparams_set=SET] [--hparams=k=v,...] [--packing=both|off|on]

Without --data_dir (or when it lacks data) it runs the datagen first, into a
temporary folder, and reports how long that took. It then reads --batches
training batches (after --warmup) of `problem.dataset("train", ...)` with the
hparam set's batch_size and max_length and reports examples/s, real tokens/s
(non-PAD ids of inputs and targets), padded token slots/s, the padding
fraction (of inputs and targets slots, and of target slots alone: the loss's
tokens) and real target tokens per batch. With --packing=both (the default)
it measures the token-bucketed batches ("bucketed") and the packed ones
(`packing=true`, "packed") in the same run and gives their ratio. With
--sampling_alpha=A above 0 it measures each batching again with subword
sampling on both sides (`source_sampling_alpha=A,target_sampling_alpha=A`:
"bucketed_sampled", "packed_sampled") and gives each run's real target
tokens/s over --trainer_target_tokens_per_s (the fastest trainer's rate,
benchmarks/RESULTS.md's train_speed) as "vs_trainer".
"""

from __future__ import annotations

import os
import tempfile
import time

from benchmarks import harness

PROG = "input_pipeline"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--problem", default="translate_ende_multi30k")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--tmp_dir", default=str(harness.SHARED_DATA / "multi30k"),
                        help="raw Multi30k files (default: the shared folder's "
                             "data/multi30k: $T2T_SHARED or ../shared)")
    parser.add_argument("--hparams", default="", help='overrides, e.g. "batch_size=4096"')
    parser.add_argument("--packing", choices=("both", "off", "on"), default="both",
                        help="measure bucketed (off), packed (on) or both batchings")
    parser.add_argument("--sampling_alpha", type=float, default=0.0,
                        help="also measure with subword sampling of this alpha, both sides")
    parser.add_argument("--trainer_target_tokens_per_s", type=float, default=5486.0,
                        help="what the trainer consumes (RESULTS.md's train_speed)")
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from t2t_revival import registry
    from t2t_revival.settings.hparams import resolve

    problem = registry.problems.get(args.problem)(download=False)
    hp = resolve(args.hparams_set, args.hparams, problem=problem)
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

    def measure(packing: bool, alpha: float = 0.0) -> dict:
        hparams = hp.replace(packing=packing, source_sampling_alpha=alpha,
                             target_sampling_alpha=alpha)
        batches = iter(problem.dataset("train", data_dir, hparams, seed=0))
        for _ in range(args.warmup):
            next(batches)
        examples = real = padded = real_targets = target_slots = 0
        start = time.perf_counter()
        for _ in range(args.batches):
            b = next(batches)
            x, y = b["inputs"].numpy(), b["targets"].numpy()
            if packing:  # pairs: segments (ids 1..n in each row)
                examples += int(b["targets_segmentation"].numpy().max(axis=1).sum())
            else:
                examples += x.shape[0]
            real += int(np.count_nonzero(x) + np.count_nonzero(y))
            padded += x.size + y.size
            real_targets += int(np.count_nonzero(y))
            target_slots += y.size
        seconds = time.perf_counter() - start
        return {
            "batch_shapes": [list(s) for s in problem.batch_shapes(hparams)],
            "seconds": round(seconds, 3),
            "examples_per_s": round(examples / seconds, 1),
            "tokens_per_s": round(real / seconds, 1),
            "padded_tokens_per_s": round(padded / seconds, 1),
            "padding_fraction": round(1 - real / padded, 4),
            "target_padding_fraction": round(1 - real_targets / target_slots, 4),
            "pairs_per_batch": round(examples / args.batches, 1),
            "real_target_tokens_per_batch": round(real_targets / args.batches, 1),
            "target_tokens_per_s": round(real_targets / seconds, 1),
            "vs_trainer": round(real_targets / seconds / args.trainer_target_tokens_per_s, 1),
        }

    batchings = [(name, packing) for name, packing in (("bucketed", False), ("packed", True))
                 if args.packing in ("both", "on" if packing else "off")]
    runs = {name: measure(packing) for name, packing in batchings}
    if args.sampling_alpha > 0:
        runs.update({f"{name}_sampled": measure(packing, args.sampling_alpha)
                     for name, packing in batchings})
    result = {
        "benchmark": "input_pipeline",
        "problem": args.problem,
        "hparams_set": args.hparams_set,
        "hparams": args.hparams,
        "batch_size_tokens": hp.batch_size,
        "max_length": hp.max_length,
        "batches": args.batches,
        "sampling_alpha": args.sampling_alpha,
        **runs,
    }
    if "bucketed" in runs and "packed" in runs:
        result["packed_vs_bucketed_real_target_tokens_per_batch"] = round(
            runs["packed"]["real_target_tokens_per_batch"]
            / runs["bucketed"]["real_target_tokens_per_batch"], 3)
    result.update({
        "datagen_s": datagen_s,
        "tf": tf.__version__,
        "cpus": os.cpu_count(),
        "machine": harness.describe(),
        "load_average_1m": harness.load_average()[0],
    })
    harness.print_result(result)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    harness.run(main, PROG)
