"""What dropout's random bits cost in an XLA-compiled CPU step, by generator.

    python -m benchmarks.dropout_rng [--shapes tiny,multi30k] [--rounds 5]

Keras' TensorFlow backend draws dropout masks with `stateless_dropout` and no
algorithm (`auto_select`); `t2t_revival.layers.Dropout` asks for ThreeFry when
XLA compiles it. This script times, in one process:

1. one dropout mask over a [2048, 512] float32 tensor (1M elements) in a
   `jit_compile=True` function, per generator (auto_select, philox, threefry),
   beside an identity and a [2048, 512] x [512, 128] matmul for scale;
2. the model's compiled forward/backward (a `Transformer` at the registered
   shape, full synthetic batches of 32 + 32 tokens at the set's token budget,
   cross-entropy of the targets) with `Dropout.XLA_RNG_ALG` = "auto_select"
   (Keras' behaviour), "philox", "threefry" (ours), and with dropout off
   (`training=False`, the floor), in interleaved rounds so a change of the
   machine's load falls on every variant alike.

Prints one JSON object: milliseconds per call (median over rounds) and the
ratios auto_select / threefry and threefry / off.
"""

import os
import statistics
import time

from benchmarks import harness

PROG = "dropout_rng"

# shape -> (hparam set, overrides): the Multi30k problem's 8,192-piece vocabulary
# for the two small sets (what the trainer's benchmarks train them on).
SHAPES = {"tiny": ("transformer_tiny", "vocab_size=8192"),
          "multi30k": ("transformer_multi30k", "vocab_size=8192"),
          "base": ("transformer_base", "")}


def parse_args(argv=None):
    p = harness.argument_parser(PROG, __doc__)
    p.add_argument("--shapes", default="tiny,multi30k",
                   help=f"comma-separated, of {sorted(SHAPES)}")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per variant")
    p.add_argument("--calls", type=int, default=3, help="timed calls per round")
    p.add_argument("--length", type=int, default=32, help="source and target tokens per row")
    a = p.parse_args(argv)
    unknown = [s for s in a.shapes.split(",") if s not in SHAPES]
    if unknown:
        p.error(f"unknown --shapes {unknown}; choose from {', '.join(sorted(SHAPES))}")
    return a


def timed(fn, calls):
    fn().numpy()
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    out.numpy()
    return (time.perf_counter() - start) / calls * 1e3


def mask_costs(rounds, calls):
    import tensorflow as tf

    x = tf.random.normal([2048, 512])
    w = tf.random.normal([512, 128])
    seed = tf.constant([1, 2], tf.int32)
    fns = {"identity": lambda: x * 2.0, "matmul_2048x512x128": lambda: x @ w}
    for alg in ("auto_select", "philox", "threefry"):
        fns[f"dropout_{alg}"] = (lambda alg=alg: tf.nn.experimental.stateless_dropout(
            x, 0.1, seed=seed, rng_alg=alg))
    compiled = {k: tf.function(f, jit_compile=True) for k, f in fns.items()}
    ms = {k: [] for k in compiled}
    for _ in range(rounds):
        for k, f in compiled.items():
            ms[k].append(timed(f, calls))
    return {k: round(statistics.median(v), 2) for k, v in ms.items()}


def step_costs(shape, rounds, calls, length):
    import keras
    import numpy as np
    import tensorflow as tf

    from t2t_revival.settings.hparams import resolve
    from t2t_revival.layers.dropout import Dropout
    from t2t_revival.models.transformer import Transformer

    hparams_set, overrides = SHAPES[shape]
    hp = resolve(hparams_set, overrides)
    rows = max(1, hp.batch_size // length)
    rng = np.random.default_rng(0)
    batch = {k: tf.constant(rng.integers(1, hp.vocab_size, (rows, length)).astype("int32"))
             for k in ("inputs", "targets")}
    keras.utils.set_random_seed(0)
    model = Transformer(hp)
    model(batch)

    def fwd_bwd(training):
        def step():
            with tf.GradientTape() as tape:
                logits = model(batch, training=training)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    batch["targets"], tf.cast(logits, tf.float32)))
            grads = tape.gradient(loss, model.trainable_variables)
            return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0
        return tf.function(step, jit_compile=True)

    fns = {}
    saved = Dropout.XLA_RNG_ALG
    try:
        for alg in ("auto_select", "philox", "threefry"):
            Dropout.XLA_RNG_ALG = alg
            fns[alg] = fwd_bwd(True)
            fns[alg]().numpy()   # traced now, with this generator
        fns["off"] = fwd_bwd(False)
        fns["off"]().numpy()
    finally:
        Dropout.XLA_RNG_ALG = saved
    ms = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            ms[k].append(timed(f, calls))
    med = {k: round(statistics.median(v), 1) for k, v in ms.items()}
    return {"hparams_set": hparams_set, "hparams": overrides, "batch": [rows, length],
            "dropout": [hp.dropout, hp.attention_dropout, hp.relu_dropout],
            "ms_per_fwd_bwd": med,
            "auto_select_over_threefry": round(med["auto_select"] / med["threefry"], 3),
            "threefry_over_off": round(med["threefry"] / med["off"], 3)}


def main(argv=None):
    a = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import tensorflow as tf

    out = {"benchmark": "dropout_rng", "machine": harness.describe(),
           "tf": tf.__version__, "load_average_1m": harness.load_average()[0],
           "mask_ms": mask_costs(a.rounds, a.calls)}
    out["shapes"] = {s: step_costs(s, a.rounds, a.calls, a.length)
                     for s in a.shapes.split(",")}
    out["load_average_1m_after"] = harness.load_average()[0]
    harness.print_result(out)


if __name__ == "__main__":
    harness.run(main, PROG)
