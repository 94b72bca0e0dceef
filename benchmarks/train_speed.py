"""Tokens per second of the full trainer (input pipeline included) on Multi30k,
and the fraction of step time spent waiting for input. Prints one JSON line.

    python -m benchmarks.train_speed --data_dir=/tmp/t2t_data --steps=100

Each update is the trainer's own (`trainer.update_step.run`). The input
wait is measured by running the same number of updates twice: on the real
tf.data pipeline, then on the same batches cached in memory (no parsing,
shuffling or bucketing). wait_fraction = 1 - t_cached / t_real. Datagen
runs first if data_dir has no data.
"""

import os
import tempfile
import time

from benchmarks import harness

PROG = "train_speed"


def main():
    parser = harness.argument_parser(PROG, __doc__)
    parser.add_argument("--problem", default="translate_ende_multi30k")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--hparams", default="")
    parser.add_argument("--data_dir", default=os.path.join(tempfile.gettempdir(), "t2t_data"))
    parser.add_argument("--tmp_dir", default="")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup_steps", type=int, default=30,
                        help="untimed updates first (XLA compiles each bucket shape)")
    parser.add_argument("--cpu_devices", type=int, default=0)
    parser.add_argument("--no_xla", action="store_true")
    args = parser.parse_args()

    import tensorflow as tf

    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    out_dir = tempfile.mkdtemp(prefix="train_speed_")
    config = resolve_train_config(problem=args.problem, output_dir=out_dir,
                                  data_dir=args.data_dir, hparams_set=args.hparams_set,
                                  hparams=args.hparams, tmp_dir=args.tmp_dir,
                                  cpu_devices=args.cpu_devices, xla=not args.no_xla)
    trainer = Trainer(config, log=lambda *a: None)
    if not trainer.problem.has_data(args.data_dir):
        trainer.problem.generate_data(args.data_dir, config.tmp_dir)
    strategy = trainer.strategy

    def timed(iterator, steps):
        tokens = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            _, n, _ = trainer.update_step.run(iterator)
            tokens += float(n)
        return time.perf_counter() - start, tokens

    real = iter(trainer.train_dataset(0))
    timed(real, args.warmup_steps)
    t_real, tokens_real = timed(real, args.steps)

    # The same kind of batches, materialized in memory first.
    def cached_fn(ctx):
        ds = trainer.problem.dataset("train", args.data_dir, trainer.hparams,
                                     input_context=ctx, seed=1)
        return ds.take(args.steps * trainer.hparams.gradient_accumulation_steps).cache().repeat()

    cached = iter(strategy.distribute_datasets_from_function(cached_fn))
    timed(cached, args.steps)  # fills the cache, compiles any new shape
    t_cached, tokens_cached = timed(cached, args.steps)

    harness.print_result({
        "benchmark": "train_speed", "problem": args.problem,
        "hparams_set": args.hparams_set, "hparams": args.hparams,
        "replicas": strategy.num_replicas_in_sync, "xla": not args.no_xla,
        "steps": args.steps,
        "target_tokens_per_second": round(tokens_real / t_real, 1),
        "seconds_per_step": round(t_real / args.steps, 4),
        "cached_input_tokens_per_second": round(tokens_cached / t_cached, 1),
        "input_wait_fraction": round(max(0.0, 1.0 - (t_cached / tokens_cached)
                                         / (t_real / tokens_real)), 4),
        "machine": harness.describe(tensorflow=tf.__version__),
    })


if __name__ == "__main__":
    harness.run(main, PROG)
