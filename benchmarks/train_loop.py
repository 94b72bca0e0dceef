"""The trainer's own loop on Multi30k: real target tokens/s and where one
update's time goes, one update per call and N per call (issue 17, items 1, 3
and 4); prints one JSON object.

    python -m benchmarks.train_loop [--shapes tiny,multi30k,base]
        [--steps 24] [--steps_per_execution 8] [--data_dir DIR] [--skip_peer]

Everything timed is the trainer's (`t2t_revival.train.trainer.Trainer`,
built from t2t-trainer's flags by `resolve_train_config`): its loop
(`TrainingLoop`: progress lines, stats, saves, evaluations,
`--steps_per_execution`), its update (`UpdateStep` on the trainer's model,
optimizer and strategy: the per-replica XLA forward/backward, the all-reduce
of the token-mean gradient, `ReducedGradientsAdam`; or, with one replica,
the same update fused into one XLA call, `UpdateStep(fuse=True)`), under the
strategy the trainer makes on this machine (one device: the all-reduce is
that of one replica). Shapes:

    tiny      transformer_tiny on the real Multi30k pipeline (datagen into a
              temporary folder unless --data_dir has the data)
    multi30k  transformer_multi30k, the same
    base      transformer_base's shape on synthetic full batches (64 x 32, as
              benchmarks.train_step), no pipeline: only the update's split

Variants of the update, on --cached_batches batches of the pipeline held in
memory (tf.data from tensors, repeated), read back only after the last call
unless said; every bucket shape is XLA-compiled first, on all-pad batches that
change no weight, so no timed update compiles; the variants run in 3
interleaved rounds, so a change of the machine's load falls on all of them:

    grads_only         the per-replica XLA forward/backward alone (`first_micro`)
    grads_reduce       that and the all-reduce (`first_micro`, then `reduce`)
    unfused            the whole update as main had it (XLA forward/backward,
                       then the all-reduce and Adam as graph ops per variable)
    unfused_sync_each  the same, the token count read back after each update
    fused              the whole update in one XLA call (item 4)
    unfused_nN/fused_nN  N updates per call (`UpdateStep.run_many`)

and of the loop, the trainer's `TrainingLoop` itself (with the trainer's
checkpoints, evaluator, faults and a time budget of the run), --steps
updates after a warm-up (seconds per update from a wrapper around the
update step's compiled call, which reads the call's token count back, as the
loop does anyway):

    loop_real_before    the real pipeline, one update per call, unfused (main)
    loop_cached_before  the same on the cached batches
    loop_real_after     the real pipeline, N per call, fused
    loop_cached_after   the same on the cached batches
    loop_real_nN_unfused, loop_real_n1_fused: one change at a time

The split of one update (seconds and share of loop_real_before):

    input_wait  = loop_real_before - loop_cached_before
    python      = loop_cached_before - unfused_sync_each (the loop's bookkeeping)
    host_sync   = unfused_sync_each - unfused
    optimizer   = unfused - grads_reduce
    all_reduce  = grads_reduce - grads_only
    fwd_bwd     = grads_only     (compiled forward and backward, and its dispatch)

After (of loop_real_after): input_wait = loop_real_after - loop_cached_after,
host_sync_and_python = loop_cached_after - fused, optimizer_fused = fused -
grads_reduce. Differences of timings taken under load can come out slightly
negative: they are noise around 0.

The figure is real (non-pad) target tokens/s: padded slots are cost, not
work. The PyTorch peer (`harness.peer_command`: the shared nn.Transformer
step, or `benchmarks.torch_peer_step` with --peer_device) runs in the
same process tree at the same shape on full synthetic batches of the same
token budget (batch_size / 32 rows of 32 tokens); `ratio` = our loop_real
tokens/s (after) / the peer's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time

from benchmarks import harness

PROG = "train_loop"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

PROBLEM = harness.PROBLEM
ROUNDS = 3   # interleaved rounds of the update's variants
REAL_SETS = {"tiny": "transformer_tiny", "multi30k": "transformer_multi30k"}
SHAPES = {"tiny": harness.SHAPES["tiny"], "base": harness.SHAPES["base"],
          "multi30k": dict(d_model=256, layers=3, heads=4, ff=1024, vocab=8192)}


def parse_args(argv=None):
    p = harness.argument_parser(PROG, __doc__)
    p.add_argument("--shapes", default="tiny,multi30k,base")
    p.add_argument("--steps", type=int, default=16, help="timed updates per variant")
    p.add_argument("--base_steps", type=int, default=2, help="timed updates per base variant")
    p.add_argument("--steps_per_execution", type=int, default=8, help="N of the 'after' runs")
    p.add_argument("--cached_batches", type=int, default=32)
    p.add_argument("--data_dir", default="", help="Multi30k data (default: datagen to a temp dir)")
    p.add_argument("--tmp_dir", default=str(harness.SHARED_DATA / "multi30k"))
    p.add_argument("--hparams", default="", help="more overrides of every shape's hparams")
    p.add_argument("--skip_peer", action="store_true")
    p.add_argument("--peer_steps", type=int, default=4)
    p.add_argument("--peer_python", default=sys.executable)
    p.add_argument("--peer_script", default=str(harness.PEER_SCRIPT))
    p.add_argument("--peer_device", default="")
    a = p.parse_args(argv)
    a.shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    unknown = [s for s in a.shapes if s not in SHAPES]
    if unknown or not a.shapes:
        p.error(f"unknown --shapes {unknown}; choose from {', '.join(SHAPES)}")
    if a.steps < a.steps_per_execution:
        p.error("--steps must be at least --steps_per_execution")
    return a


def make_trainer(hparams_set, hparams, data_dir, out_dir):
    """The trainer of t2t-trainer's flags for a run that saves and evaluates
    only at its end, on one dev batch, without dev decoding."""
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    config = resolve_train_config(problem=PROBLEM, output_dir=out_dir, data_dir=data_dir,
                                  hparams_set=hparams_set, hparams=hparams, seed=0,
                                  local_eval_frequency=0, save_checkpoints_steps=0,
                                  eval_steps=1, eval_decode_sentences=0,
                                  keep_checkpoint_max=1)
    return Trainer(config, log=lambda *args: None)


def distribute(trainer, batches):
    """The batches (dicts of numpy arrays) in memory, repeated, as the trainer's input."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    return trainer.strategy.experimental_distribute_dataset(dataset.repeat())


def all_pad_batches(shapes, template):
    """One batch per bucket shape, all ids PAD (0): no target token, zero
    gradients, so Adam moves no weight; they make XLA compile every shape."""
    import numpy as np

    return [{k: np.zeros((rows, length), v.dtype) for k, v in template.items()}
            for rows, length in shapes]


def real_target_tokens(batch):
    import numpy as np

    return int(np.count_nonzero(batch["targets"]))


def timed_calls(fn, calls, per_call=1):
    """Seconds per update of `calls` calls of `fn()` (each returns a tensor),
    read back only after the last; `per_call` updates per call."""
    start = time.perf_counter()
    out = [fn() for _ in range(calls)]
    float(out[-1])
    return (time.perf_counter() - start) / (calls * per_call)


def update_step(trainer, fused):
    """The trainer's update (`UpdateStep` on its model, optimizer and
    strategy, as `Trainer` makes it) with the fused update forced on or off."""
    from t2t_revival.train.update_step import UpdateStep

    return UpdateStep(trainer.model, trainer.optimizer, trainer.strategy, trainer.hparams,
                      xla=trainer.config.xla, fuse=fused)


def bare_variants(trainer, iterator, warm_batches, steps, spe, steps_by_fused):
    """Per-update seconds of the trainer's update and its parts (see the
    docstring); each variant first compiles the shapes of `warm_batches`.
    `steps_by_fused`: {False: the unfused `UpdateStep`, True: the fused one}."""
    import tensorflow as tf

    run = trainer.strategy.run
    first = trainer.strategy.experimental_local_results
    unfused, fused = steps_by_fused[False], steps_by_fused[True]

    def grads_only(it):
        grads, loss_sum, tokens = run(unfused.first_micro, (next(it),))
        return first(tokens)[0] + tf.reduce_sum(first(grads[0])[0])

    def grads_reduce(it):
        state = run(unfused.first_micro, (next(it),))
        _, _, tokens, norm = run(unfused.reduce, state)
        return first(tokens)[0] + first(norm)[0]

    n = tf.constant(spe)
    fns = {"grads_only": tf.function(grads_only, autograph=False),
           "grads_reduce": tf.function(grads_reduce, autograph=False),
           "unfused": lambda it: unfused.run(it)[1], "fused": lambda it: fused.run(it)[1],
           f"unfused_n{spe}": lambda it: unfused.run_many(it, n)[1],
           f"fused_n{spe}": lambda it: fused.run_many(it, n)[1]}
    warm_it = iter(distribute(trainer, warm_batches))
    for fn in fns.values():
        for _ in warm_batches:
            float(fn(warm_it))

    def unfused_sync_each():
        return tf.constant(float(unfused.run(iterator)[1]))   # read back after each update

    timed = {name: (lambda fn=fn: fn(iterator), spe if "_n" in name else 1)
             for name, fn in fns.items()}
    timed["unfused_sync_each"] = (unfused_sync_each, 1)
    # Interleaved rounds, so a change of the machine's load falls on every variant.
    rounds = max(1, min(ROUNDS, steps // spe))
    seconds = dict.fromkeys(timed, 0.0)
    for _ in range(rounds):
        for name, (fn, per_call) in timed.items():
            calls = max(1, steps // rounds // per_call)
            seconds[name] += timed_calls(fn, calls, per_call) / rounds
    return seconds


def loop_variant(trainer, dataset_for, steps, spe, warmup, update):
    """Seconds per update and real target tokens/s of the trainer's loop
    (`TrainingLoop`, with the trainer's checkpoints, evaluator and faults),
    `steps` updates after `warmup`, with --steps_per_execution=spe and the
    update step `update` (fused or not, its shapes compiled already);
    `dataset_for(step)` gives the distributed batches."""
    from t2t_revival.train.time_budget import TimeBudget
    from t2t_revival.train.training_loop import TrainingLoop, updates_in_next_call

    start_step = trainer.step
    config = dataclasses.replace(trainer.config, steps_per_execution=spe,
                                 train_steps=start_step + warmup + steps,
                                 log_step_count_steps=max(spe, 50))
    marks = []   # (time, tokens) after each call

    def timed(fn):
        def call(iterator, *n):
            out = fn(iterator, *n)
            marks.append((time.perf_counter(), float(out[1])))   # the loop reads it too
            return out
        return call

    budget = TimeBudget(config, None, trainer.strategy, trainer.log)
    loop = TrainingLoop(config, update, trainer.checkpoints, trainer.evaluator,
                        trainer.faults, budget, check_stop=lambda: None, log=trainer.log)
    compiled = update.run, update.run_many
    update.run, update.run_many = timed(update.run), timed(update.run_many)
    try:
        loop.run(iter(dataset_for(start_step)))
    finally:
        update.run, update.run_many = compiled
    # The calls after the warm-up updates (a call's size is in the step counter).
    step = start_step
    sizes = []
    while step < config.train_steps:
        n = updates_in_next_call(step, config.train_steps, config)
        sizes.append(n)
        step += n
    assert len(sizes) == len(marks), (sizes, len(marks))
    done, first = 0, None
    for i, n in enumerate(sizes):
        done += n
        if done >= warmup and first is None:
            first = i
    timed_marks = marks[first:]
    updates = sum(sizes[first + 1:])
    tokens = sum(t for _, t in timed_marks[1:])
    seconds = timed_marks[-1][0] - timed_marks[0][0]
    return {"s_per_update": seconds / updates, "updates": updates,
            "real_target_tokens_per_s": tokens / seconds,
            "real_target_tokens_per_update": tokens / updates}


def split(v, spe):
    """Before: main's loop (one update per call, unfused); after: N per call, fused."""
    loop = lambda key: v[key]["s_per_update"]   # noqa: E731
    before = {"input_wait": loop("loop_real_before") - loop("loop_cached_before"),
              "python": loop("loop_cached_before") - v["unfused_sync_each"],
              "host_sync": v["unfused_sync_each"] - v["unfused"],
              "optimizer": v["unfused"] - v["grads_reduce"],
              "all_reduce": v["grads_reduce"] - v["grads_only"],
              "fwd_bwd": v["grads_only"]}
    after = {"input_wait": loop("loop_real_after") - loop("loop_cached_after"),
             "host_sync_and_python": loop("loop_cached_after") - v["fused"],
             "optimizer_fused": v["fused"] - v["grads_reduce"],
             "all_reduce": before["all_reduce"], "fwd_bwd": before["fwd_bwd"]}
    out = []
    for parts, total in ((before, loop("loop_real_before")), (after, loop("loop_real_after"))):
        out.append({"s_per_update": round(total, 5),
                    "seconds": {k: round(x, 5) for k, x in parts.items()},
                    "share": {k: round(x / total, 4) for k, x in parts.items()}})
    return out


def measure_real(name, a, data_dir):
    import numpy as np
    import tensorflow as tf

    hparams_set = REAL_SETS[name]
    with tempfile.TemporaryDirectory(prefix="bench_loop_") as out_dir:
        trainer = make_trainer(hparams_set, a.hparams, data_dir, out_dir)
        hp = trainer.hparams
        pipeline = trainer.problem.dataset("train", data_dir, hp, seed=0)
        cached = [{k: v.numpy() for k, v in b.items()}
                  for b in pipeline.take(a.cached_batches)]
        pad = all_pad_batches(trainer.problem.batch_shapes(hp), cached[0])
        seen = sorted({b["targets"].shape for b in cached})
        pad_seen = [b for b in pad if b["targets"].shape in seen]
        steps_by_fused = {fused: update_step(trainer, fused) for fused in (False, True)}
        # Compile every bucket shape in every update function (1 and N per call).
        warm_it = iter(distribute(trainer, pad))
        for update in steps_by_fused.values():
            for _ in pad:
                float(update.run(warm_it)[1])
            float(update.run_many(warm_it, tf.constant(len(pad)))[1])
        cached_it = iter(distribute(trainer, cached))
        spe = a.steps_per_execution
        v = bare_variants(trainer, cached_it, pad_seen, a.steps, spe, steps_by_fused)
        tokens_per_update = float(np.mean([real_target_tokens(b) for b in cached]))
        cached_ds = lambda step: distribute(trainer, cached)   # noqa: E731
        real_ds = trainer.train_dataset
        warmup = max(4, spe)
        for label, n, fused, datasets in (
                ("before", 1, False, (("cached", cached_ds), ("real", real_ds))),
                ("after", spe, True, (("cached", cached_ds), ("real", real_ds))),
                (f"n{spe}_unfused", spe, False, (("real", real_ds),)),
                ("n1_fused", 1, True, (("real", real_ds),))):
            for kind, dataset in datasets:
                v[f"loop_{kind}_{label}"] = loop_variant(trainer, dataset, a.steps, n, warmup,
                                                         steps_by_fused[fused])
        before, after = split(v, spe)
        params = trainer.model.count_params()
        padding = 1 - tokens_per_update / float(np.mean([b["targets"].size for b in cached]))
    return {"hparams_set": hparams_set, "params": params, "batch_size": hp.batch_size,
            "cached_target_padding_fraction": round(padding, 4),
            "cached_real_target_tokens_per_update": tokens_per_update,
            "variants_s_per_update": {k: (round(x, 5) if isinstance(x, float) else x)
                                      for k, x in v.items()},
            "fused_speedup_of_the_update": round(v["unfused"] / v["fused"], 3),
            "before": before, "after": after,
            "real_target_tokens_per_s": {
                label: round(v[f"loop_real_{label}"]["real_target_tokens_per_s"], 1)
                for label in ("before", f"n{spe}_unfused", "n1_fused", "after")}}


def measure_base(a):
    """transformer_base's shape on synthetic full batches: the update's split only."""
    import numpy as np

    shape = SHAPES["base"]
    with tempfile.TemporaryDirectory(prefix="bench_loop_") as out_dir:
        trainer = make_trainer("transformer_base",
                               harness.hparams_overrides(shape, 64, 32, 32, more=a.hparams),
                               out_dir, out_dir)
        batch = harness.synthetic_batch(shape, 64, 32, 32)
        spe = min(a.steps_per_execution, a.base_steps)
        steps_by_fused = {fused: update_step(trainer, fused) for fused in (False, True)}
        it = iter(distribute(trainer, [batch]))
        v = bare_variants(trainer, it, [batch], a.base_steps, spe, steps_by_fused)
    tokens = float(np.count_nonzero(batch["targets"]))
    return {"hparams_set": "transformer_base (shape of benchmarks.train_step)",
            "batch": [64, 32], "variants_s_per_update": {k: round(x, 4) for k, x in v.items()},
            "split_s": {"host_sync": round(v["unfused_sync_each"] - v["unfused"], 4),
                        "optimizer": round(v["unfused"] - v["grads_reduce"], 4),
                        "all_reduce": round(v["grads_reduce"] - v["grads_only"], 4),
                        "fwd_bwd": round(v["grads_only"], 4)},
            "fused_speedup_of_the_update": round(v["unfused"] / v["fused"], 3),
            "real_target_tokens_per_s": {
                "before": round(tokens / v["unfused_sync_each"], 1),
                f"n{spe}_fused": round(tokens / v[f"fused_n{spe}"], 1)}}


def main(argv=None):
    a = parse_args(argv)
    import tensorflow as tf

    from t2t_revival import registry

    result = {"benchmark": "train_loop", "steps": a.steps,
              "steps_per_execution": a.steps_per_execution, "shapes": {}}
    tmp = None
    data_dir, datagen_s = a.data_dir, None
    if any(s in REAL_SETS for s in a.shapes):
        problem = registry.problems.get(PROBLEM)(download=False)
        if not data_dir:
            tmp = tempfile.TemporaryDirectory(prefix="bench_loop_data_")
            data_dir = tmp.name
        if not problem.has_data(data_dir):
            start = time.time()
            problem.generate_data(data_dir, a.tmp_dir)
            datagen_s = round(time.time() - start, 1)
    for name in a.shapes:
        entry = measure_base(a) if name == "base" else measure_real(name, a, data_dir)
        if not a.skip_peer:
            hp_batch = entry.get("batch_size", 64 * 32)
            run_flags = dict(batch=hp_batch // 32, src_len=32, tgt_len=32, steps=a.peer_steps,
                             warmup=2, threads=0)
            peer = harness.run_peer(*harness.peer_command(
                SHAPES[name], run_flags, a.peer_python, a.peer_script, a.peer_device))
            entry["peer"] = {k: peer[k] for k in ("peer", "torch", "device", "threads", "params",
                                                  "step_s", "tgt_tokens_per_s") if k in peer}
            ours = list(entry["real_target_tokens_per_s"].values())[-1]
            entry["ratio_after_vs_peer"] = round(ours / peer["tgt_tokens_per_s"], 3)
        result["shapes"][name] = entry
        print(json.dumps({"shape": name, **entry}), file=sys.stderr, flush=True)
    result.update({"datagen_s": datagen_s, "tf": tf.__version__, "cpus": os.cpu_count(),
                   "machine": harness.describe(),
                   "load_average_1m": harness.load_average()[0]})
    harness.print_result(result)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    harness.run(main, PROG)
