"""Target tokens per second of one compiled Transformer training step, beside
the PyTorch nn.Transformer peer (`../shared/peers/torch_transformer_train.py`).

One step = forward, backward and Adam(0.9, 0.98, 1e-9), with label-smoothed
(0.1) cross-entropy over the non-pad target tokens, at the same shape, batch and
vocabulary as the peer (its defaults are the paper's base model shape: d_model
512, 6 layers, 8 heads, d_ff 2048, vocab 32000, batch 64 x 32 source and 32
target tokens). Our step is a `tf.function`, timed with XLA
(`jit_compile=True`) and without; the faster one is compared with the peer.

    PYTHONPATH=$PWD python benchmarks/train_step.py [--steps 10 --warmup 2 ...]

Prints one JSON object: our figures (both compile modes), the peer's, and
`ratio` = our best tokens/s / the peer's tokens/s.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The shared folder beside the repository (../shared); T2T_SHARED overrides it
# (a git worktree elsewhere has no ../shared).
SHARED = pathlib.Path(os.environ.get("T2T_SHARED", ROOT.parent / "shared"))
SHAPE_FLAGS = [("d_model", 512), ("layers", 6), ("heads", 8), ("ff", 2048),
               ("vocab", 32000), ("batch", 64), ("src_len", 32), ("tgt_len", 32),
               ("steps", 10), ("warmup", 2), ("threads", 0)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in SHAPE_FLAGS:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--jit_compile", choices=["both", "true", "false"], default="both",
                   help="time our step with XLA, without, or both (default)")
    p.add_argument("--mixed_precision", default="float32",
                   help="dtype policy of our model (the peer is float32)")
    p.add_argument("--peer_python", default=sys.executable,
                   help="a python with torch, to run the peer")
    p.add_argument("--peer_script",
                   default=str(SHARED / "peers" / "torch_transformer_train.py"),
                   help="the peer script (default: $T2T_SHARED or ../shared, /peers/...)")
    p.add_argument("--skip_peer", action="store_true")
    return p.parse_args(argv)


def label_smoothed_loss(logits, labels, smoothing):
    """Mean over non-pad tokens of cross-entropy against (1-e) one-hot + e/V.

    logits: float32 [B, T, V]; labels: int32 [B, T] (0 = PAD, ignored).
    Uses -sum_v q_v log p_v = (1-e)(lse - logit_y) + e (lse - mean_v logit_v),
    so no one-hot [B, T, V] is built.
    """
    from keras import ops
    lse = ops.logsumexp(logits, axis=-1)  # (B, T)
    target = ops.squeeze(ops.take_along_axis(logits, labels[..., None], axis=-1), -1)
    per_token = (1.0 - smoothing) * (lse - target) + smoothing * (lse - ops.mean(logits, -1))
    weights = ops.cast(ops.not_equal(labels, 0), "float32")
    return ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)


def time_ours(a, jit_compile):
    import keras
    import numpy as np
    import tensorflow as tf

    from t2t_revival.hparams import HParams
    from t2t_revival.models.transformer import Transformer

    if a.threads:
        tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    keras.utils.set_random_seed(0)
    hp = HParams(num_hidden_layers=a.layers, d_model=a.d_model, num_heads=a.heads,
                 d_ff=a.ff, vocab_size=a.vocab, max_length=max(a.src_len, a.tgt_len),
                 mixed_precision=a.mixed_precision)
    model = Transformer(hp)
    model.build()
    optimizer = keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    batch = {"inputs": tf.constant(rng.integers(1, a.vocab, (a.batch, a.src_len)), tf.int32),
             "targets": tf.constant(rng.integers(1, a.vocab, (a.batch, a.tgt_len)), tf.int32)}

    @tf.function(jit_compile=jit_compile)
    def step(batch):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)
            loss = label_smoothed_loss(logits, batch["targets"], hp.label_smoothing)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    start = time.perf_counter()
    for _ in range(a.warmup):
        float(step(batch))
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = float(step(batch))
    elapsed = time.perf_counter() - start
    return {"jit_compile": jit_compile, "tensorflow": tf.__version__,
            "keras": keras.__version__, "params": model.count_params(),
            "warmup_s": warmup_s, "step_s": elapsed / a.steps, "loss": loss,
            "tgt_tokens_per_s": a.batch * a.tgt_len * a.steps / elapsed}


def run_peer(a):
    cmd = [a.peer_python, a.peer_script]
    for name, _ in SHAPE_FLAGS:
        cmd += [f"--{name}", str(getattr(a, name))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"the peer failed ({' '.join(cmd)}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    a = parse_args(argv)
    modes = {"both": [True, False], "true": [True], "false": [False]}[a.jit_compile]
    result = {"shape": {name: getattr(a, name) for name, _ in SHAPE_FLAGS},
              "mixed_precision": a.mixed_precision}
    ours = [time_ours(a, mode) for mode in modes]
    result["ours"] = {("xla" if r["jit_compile"] else "no_xla"): r for r in ours}
    best = max(ours, key=lambda r: r["tgt_tokens_per_s"])
    result["ours_best"] = "xla" if best["jit_compile"] else "no_xla"
    if not a.skip_peer:
        result["peer"] = run_peer(a)
        result["ratio"] = best["tgt_tokens_per_s"] / result["peer"]["tgt_tokens_per_s"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
