"""The trainer's own loop on Multi30k: real target tokens/s and where one
update's time goes, one update per call and N per call (issue 17, items 1, 3
and 4); prints one JSON object.

    PYTHONPATH=$PWD python benchmarks/train_loop.py [--shapes tiny,multi30k,base]
        [--steps 24] [--steps_per_execution 8] [--data_dir DIR] [--skip_peer]

Everything timed is `t2t_revival.train.trainer.Trainer`'s: its `train()` loop
(progress lines, stats, signal checks, `--steps_per_execution`), its update
(`train_step`, `train_steps`: the per-replica XLA forward/backward, the
all-reduce of the token-mean gradient, `ReducedGradientsAdam`), under the
default strategy (one device: the all-reduce is the strategy's own, of one
replica). Shapes:

    tiny      transformer_tiny on the real Multi30k pipeline (datagen into a
              temporary folder unless --data_dir has the data)
    multi30k  transformer_multi30k, the same
    base      transformer_base's shape on synthetic full batches (64 x 32, as
              benchmarks/train_step.py), no pipeline: only the update's split

Variants, each `--steps` updates after its warm-up (all bucket shapes are
XLA-compiled first, on all-pad batches that change no weight, so no timed
update compiles):

    loop_real       Trainer.train() on the real pipeline (seconds per update
                    from the wrapper around the trainer's compiled call, which
                    reads the call's token count back, as the loop does anyway)
    loop_cached     the same loop on --cached_batches batches of that pipeline
                    held in memory (tf.data from tensors, repeated)
    bare_sync_each  trainer.train_step on the cached batches, the token count
                    read back after each update (a sync per step, no loop)
    bare_no_sync    trainer.train_step, read back once at the end
    grads_reduce    the per-replica XLA forward/backward and the all-reduce
                    (trainer._first_micro, trainer._reduce), no optimizer
    grads_only      the per-replica XLA forward/backward alone
    fused           forward/backward, all-reduce and the Adam apply in ONE
                    XLA-compiled function (item 4), read back at the end

and each loop_* again with --steps_per_execution=N ("after"). The split of one
update of loop_real (before; per update, seconds and share):

    input_wait  = loop_real - loop_cached
    python      = loop_cached - bare_sync_each   (the loop's own bookkeeping)
    host_sync   = bare_sync_each - bare_no_sync
    optimizer   = bare_no_sync - grads_reduce
    all_reduce  = grads_reduce - grads_only
    fwd_bwd     = grads_only                    (compiled forward and backward,
                                                 and its call's dispatch)

After (N per call): input_wait = loop_real_N - loop_cached_N and
host_sync_and_python = loop_cached_N - bare_no_sync. Differences of timings
taken under load can come out slightly negative: they are noise around 0.

The figure is real (non-pad) target tokens/s: padded slots are cost, not
work. The PyTorch peer (`benchmarks/train_step.py`'s `run_peer`: the shared
nn.Transformer step, or `torch_peer_step.py` with --peer_device) runs in the
same process tree at the same shape on full synthetic batches of the same
token budget (batch_size / 32 rows of 32 tokens); `ratio` = our loop_real
tokens/s (after) / the peer's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_step as peer_bench  # noqa: E402  (run_peer, SHAPES, the peer's flags)

PROBLEM = "translate_ende_multi30k"
ROUNDS = 3   # interleaved rounds of the update's variants
REAL_SETS = {"tiny": "transformer_tiny", "multi30k": "transformer_multi30k"}
SHAPES = {"tiny": peer_bench.SHAPES["tiny"], "base": peer_bench.SHAPES["base"],
          "multi30k": dict(d_model=256, layers=3, heads=4, ff=1024, vocab=8192)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="tiny,multi30k,base")
    p.add_argument("--steps", type=int, default=16, help="timed updates per variant")
    p.add_argument("--base_steps", type=int, default=2, help="timed updates per base variant")
    p.add_argument("--steps_per_execution", type=int, default=8, help="N of the 'after' runs")
    p.add_argument("--cached_batches", type=int, default=32)
    p.add_argument("--data_dir", default="", help="Multi30k data (default: datagen to a temp dir)")
    shared = pathlib.Path(os.environ.get("T2T_SHARED_DATA", ROOT.parent / "shared" / "data"))
    p.add_argument("--tmp_dir", default=str(shared / "multi30k"))
    p.add_argument("--hparams", default="", help="more overrides of every shape's hparams")
    p.add_argument("--skip_peer", action="store_true")
    p.add_argument("--peer_steps", type=int, default=4)
    p.add_argument("--peer_python", default=sys.executable)
    p.add_argument("--peer_script", default=str(peer_bench.SHARED / "peers" /
                                                "torch_transformer_train.py"))
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
    from t2t_revival.train.train_config import TrainConfig
    from t2t_revival.train.trainer import Trainer

    config = TrainConfig(problem=PROBLEM, output_dir=out_dir, data_dir=data_dir,
                         hparams_set=hparams_set, hparams=hparams, seed=0, eval_every=0,
                         save_every=0, eval_steps=1, eval_decode_sentences=0,
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


def bare_variants(trainer, iterator, warm_batches, steps, spe):
    """Per-update seconds of the trainer's update and its parts (see the
    docstring); each variant first compiles the shapes of `warm_batches`."""
    import tensorflow as tf

    run = trainer.strategy.run
    first = trainer.strategy.experimental_local_results

    def grads_only(it):
        grads, loss_sum, tokens = run(trainer._first_micro, (next(it),))
        return first(tokens)[0] + tf.reduce_sum(first(grads[0])[0])

    def grads_reduce(it):
        state = run(trainer._first_micro, (next(it),))
        _, _, tokens, norm = run(trainer._reduce, state)
        return first(tokens)[0] + first(norm)[0]

    fused_update = tf.function(lambda batch: trainer._finish(*trainer._replica_grads(batch)),
                               jit_compile=True, autograph=False, reduce_retracing=True)

    def fused(it):
        _, tokens, _ = run(fused_update, (next(it),))
        return first(tokens)[0]

    fns = {"grads_only": tf.function(grads_only, autograph=False),
           "grads_reduce": tf.function(grads_reduce, autograph=False)}
    if trainer.strategy.num_replicas_in_sync == 1:   # all-reduce in XLA: one device only
        fns["fused"] = tf.function(fused, autograph=False)
    warm_it = iter(distribute(trainer, warm_batches))
    for fn in fns.values():
        for _ in warm_batches:
            float(fn(warm_it))
    n = tf.constant(spe)
    float(trainer.train_steps(iterator, n)[1])

    def step_sync():
        _, tokens, _ = trainer.train_step(iterator)
        return tf.constant(float(tokens))   # read back after each update

    timed = {name: (lambda fn=fn: fn(iterator), 1) for name, fn in fns.items()}
    timed.update({"bare_sync_each": (step_sync, 1),
                  "bare_no_sync": (lambda: trainer.train_step(iterator)[1], 1),
                  f"bare_n{spe}": (lambda: trainer.train_steps(iterator, n)[1], spe)})
    # Interleaved rounds, so a change of the machine's load falls on every variant.
    rounds = max(1, min(ROUNDS, steps // spe))
    seconds = dict.fromkeys(timed, 0.0)
    for _ in range(rounds):
        for name, (fn, per_call) in timed.items():
            calls = max(1, steps // rounds // per_call)
            seconds[name] += timed_calls(fn, calls, per_call) / rounds
    result = seconds
    return result


def loop_variant(trainer, dataset_for, steps, spe, warmup):
    """Seconds per update and real target tokens/s of `trainer.train()` itself,
    `steps` updates after `warmup`, with --steps_per_execution=spe."""
    start_step = trainer.step
    trainer.config = dataclasses.replace(trainer.config, steps_per_execution=spe,
                                         train_steps=start_step + warmup + steps,
                                         log_every=max(spe, 50))
    trainer.train_dataset = dataset_for
    trainer._last_eval = None
    marks = []   # (time, step, tokens) after each call
    calls = {"train_step": trainer.train_step, "train_steps": trainer.train_steps}

    def wrap(name):
        fn = calls[name]

        def timed(iterator, *n):
            out = fn(iterator, *n)
            marks.append((time.perf_counter(), float(out[1])))   # the loop reads it too
            return out
        return timed

    trainer.train_step, trainer.train_steps = wrap("train_step"), wrap("train_steps")
    try:
        trainer.train()
    finally:
        trainer.train_step, trainer.train_steps = calls["train_step"], calls["train_steps"]
    del trainer.train_dataset   # back to the class's
    # The calls after the warm-up updates (a call's size is in the step counter).
    step = start_step
    sizes = []
    while step < trainer.config.train_steps:
        n = trainer._updates_in_next_call(step)
        sizes.append(n)
        step += n
    assert len(sizes) == len(marks), (sizes, len(marks))
    done, first = 0, None
    for i, n in enumerate(sizes):
        done += n
        if done >= warmup and first is None:
            first = i
    timed = marks[first:]
    updates = sum(sizes[first + 1:])
    tokens = sum(t for _, t in timed[1:])
    seconds = timed[-1][0] - timed[0][0]
    return {"s_per_update": seconds / updates, "updates": updates,
            "real_target_tokens_per_s": tokens / seconds,
            "real_target_tokens_per_update": tokens / updates}


def split(v, spe):
    before = {"input_wait": v["loop_real_n1"]["s_per_update"] - v["loop_cached_n1"]["s_per_update"],
              "python": v["loop_cached_n1"]["s_per_update"] - v["bare_sync_each"],
              "host_sync": v["bare_sync_each"] - v["bare_no_sync"],
              "optimizer": v["bare_no_sync"] - v["grads_reduce"],
              "all_reduce": v["grads_reduce"] - v["grads_only"],
              "fwd_bwd": v["grads_only"]}
    total = v["loop_real_n1"]["s_per_update"]
    after_total = v[f"loop_real_n{spe}"]["s_per_update"]
    after = {"input_wait": after_total - v[f"loop_cached_n{spe}"]["s_per_update"],
             "host_sync_and_python": v[f"loop_cached_n{spe}"]["s_per_update"]
             - v["bare_no_sync"],
             "optimizer": before["optimizer"], "all_reduce": before["all_reduce"],
             "fwd_bwd": before["fwd_bwd"]}
    return ({"s_per_update": total, "seconds": before,
             "share": {k: round(s / total, 4) for k, s in before.items()}},
            {"s_per_update": after_total, "seconds": after,
             "share": {k: round(s / after_total, 4) for k, s in after.items()}})


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
        # Compile every bucket shape in both calls (one update, and N per call).
        warm_it = iter(distribute(trainer, pad))
        for _ in pad:
            float(trainer.train_step(warm_it)[1])
        n_warm = tf.constant(len(pad))
        float(trainer.train_steps(warm_it, n_warm)[1])
        cached_it = iter(distribute(trainer, cached))
        v = bare_variants(trainer, cached_it, pad_seen, a.steps, a.steps_per_execution)
        tokens_per_update = float(np.mean([real_target_tokens(b) for b in cached]))
        cached_ds = lambda step: distribute(trainer, cached)   # noqa: E731
        real_ds = type(trainer).train_dataset.__get__(trainer)
        warmup = max(4, a.steps_per_execution)
        for n in (1, a.steps_per_execution):
            v[f"loop_cached_n{n}"] = loop_variant(trainer, cached_ds, a.steps, n, warmup)
            v[f"loop_real_n{n}"] = loop_variant(trainer, real_ds, a.steps, n, warmup)
        before, after = split(v, a.steps_per_execution)
        params = trainer.model.count_params()
        padding = 1 - tokens_per_update / float(np.mean([b["targets"].size for b in cached]))
    return {"hparams_set": hparams_set, "params": params, "batch_size": hp.batch_size,
            "cached_target_padding_fraction": round(padding, 4),
            "cached_real_target_tokens_per_update": tokens_per_update,
            "variants_s_per_update": {k: (round(x, 5) if isinstance(x, float) else x)
                                      for k, x in v.items()},
            "fused_vs_bare_no_sync": round(v["bare_no_sync"] / v["fused"], 3)
            if "fused" in v else None,
            "before": before, "after": after,
            "real_target_tokens_per_s": {
                "n1": round(v["loop_real_n1"]["real_target_tokens_per_s"], 1),
                f"n{a.steps_per_execution}":
                    round(v[f"loop_real_n{a.steps_per_execution}"]
                          ["real_target_tokens_per_s"], 1)}}


def measure_base(a):
    """transformer_base's shape on synthetic full batches: the update's split only."""
    import numpy as np

    shape = SHAPES["base"]
    args = argparse.Namespace(batch=64, src_len=32, tgt_len=32, mixed_precision="float32",
                              hparams=a.hparams)
    with tempfile.TemporaryDirectory(prefix="bench_loop_") as out_dir:
        from t2t_revival.train.train_config import TrainConfig
        from t2t_revival.train.trainer import Trainer

        config = TrainConfig(problem=PROBLEM, output_dir=out_dir, data_dir=out_dir,
                             hparams_set="transformer_base",
                             hparams=peer_bench.hparams_overrides(shape, args), seed=0)
        trainer = Trainer(config, log=lambda *x: None)
        batch = peer_bench.synthetic_batch(shape, args)
        it = iter(distribute(trainer, [batch]))
        float(trainer.train_step(it)[1])
        v = bare_variants(trainer, it, [batch], a.base_steps,
                          min(a.steps_per_execution, a.base_steps))
    tokens = float(np.count_nonzero(batch["targets"]))
    spe = min(a.steps_per_execution, a.base_steps)
    return {"hparams_set": "transformer_base (shape of benchmarks/train_step.py)",
            "batch": [64, 32], "variants_s_per_update": {k: round(x, 4) for k, x in v.items()},
            "split_s": {"host_sync": v["bare_sync_each"] - v["bare_no_sync"],
                        "optimizer": v["bare_no_sync"] - v["grads_reduce"],
                        "all_reduce": v["grads_reduce"] - v["grads_only"],
                        "fwd_bwd": v["grads_only"]},
            "fused_vs_bare_no_sync": round(v["bare_no_sync"] / v["fused"], 3),
            "real_target_tokens_per_s": {"n1_sync_each": round(tokens / v["bare_sync_each"], 1),
                                         f"n{spe}": round(tokens / v[f"bare_n{spe}"], 1)}}


def main(argv=None):
    a = parse_args(argv)
    import tensorflow as tf

    from t2t_revival import registry

    registry.load_all()
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
            peer_args = argparse.Namespace(
                batch=hp_batch // 32, src_len=32, tgt_len=32, steps=a.peer_steps, warmup=2,
                threads=0, peer_python=a.peer_python, peer_script=a.peer_script,
                peer_device=a.peer_device, peer_autocast="none", peer_compile=False)
            peer = peer_bench.run_peer(SHAPES[name], peer_args)
            entry["peer"] = {k: peer[k] for k in ("peer", "torch", "device", "threads", "params",
                                                  "step_s", "tgt_tokens_per_s") if k in peer}
            ours = list(entry["real_target_tokens_per_s"].values())[-1]
            entry["ratio_after_vs_peer"] = round(ours / peer["tgt_tokens_per_s"], 3)
        result["shapes"][name] = entry
        print(json.dumps({"shape": name, **entry}), file=sys.stderr, flush=True)
    result.update({"datagen_s": datagen_s, "tf": tf.__version__, "cpus": os.cpu_count(),
                   "machine": platform.machine(),
                   "load_average_1m": round(os.getloadavg()[0], 2)})
    print(json.dumps(result))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
