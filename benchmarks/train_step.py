"""Target tokens per second and FLOP/s of one compiled Transformer training
step, beside the PyTorch nn.Transformer peer (`../shared/peers/torch_transformer_train.py`)
and the machine's measured matrix-multiply peak.

    python -m benchmarks.train_step --shapes base,tiny
    python -m benchmarks.train_step --backend jax --shapes big \\
        --mixed_precision mixed_bfloat16 --batch 256 --peak_tflops 989 \\
        --peer_device cuda --peer_autocast bfloat16 --peer_python python3

The step timed is the product's. Either backend builds the run as
`t2t-trainer` does: its config (`resolve_train_config`: hparam set
transformer_base overridden to the shape below, one update per step: no
gradient accumulation), its model (`build_model`), its optimizer
(`make_optimizer`: `ReducedGradientsAdam`, beta2 0.98, eps 1e-9, the Noam
schedule, clipping by the global norm) and its loss (`train/losses.py`: the
label-smoothed cross-entropy, eps on the other V-1 tokens, normalized by the
target token count). Only the input is synthetic: a full batch (default 64
sentences x 32 source and 32 target tokens, the peer's defaults, no padding),
repeated, so the input pipeline is not timed.

`--backend tensorflow` (the default, or `KERAS_BACKEND`) builds the trainer
(`t2t_revival.train.trainer.Trainer`) and times `trainer.update_step.run`,
the very update `t2t-trainer` runs: its per-replica forward and backward
(XLA-compiled with `--jit_compile true`, as `--xla` does), its all-reduce
and its optimizer under its tf.distribute strategy (one device, or every
visible GPU); on one CPU device the whole update is one XLA call
(`UpdateStep.fused`). The batch goes through
`strategy.experimental_distribute_dataset`. The step is timed with XLA and
without (`--jit_compile`); the faster is compared with the peer.

`--backend jax` (or `KERAS_BACKEND=jax`: how GPU figures are taken; the GPU
image has no TensorFlow) times a `jax.jit` of Keras's stateless call of that
model, that loss, and that optimizer's `stateless_apply`. What still differs
from the trainer there: no tf.distribute, so no all-reduce (one device); the
loss differentiated is the token mean itself, where the trainer
differentiates loss_sum / batch_size and scales the gradient by batch_size /
tokens (the same gradient, up to rounding); no loss scaling
(mixed_float16 is refused); and the whole update is one compiled call, as
the trainer's only on one CPU device (its GPU step compiles the forward and
backward alone). Shapes (`--shapes`, in one run):

    base  d_model 512,  6 layers,  8 heads, d_ff 2048, vocab 32000 (transformer_base)
    big   d_model 1024, 6 layers, 16 heads, d_ff 4096, vocab 32000 (transformer_big)
    tiny  d_model 128,  2 layers,  4 heads, d_ff 512,  vocab 8192  (transformer_tiny, Multi30k)

FLOPs of one step (the usual 6 x parameters x tokens, split by the tokens each
part of the model sees, plus the attention scores, which have no parameters):

    matmul = 6 * B * (P_enc * S + (P_dec + d * V) * T)
    attn   = 12 * B * L * d * (S*S + T*T + T*S)
    P_enc, P_dec: encoder and decoder weights without the embedding (a lookup,
    no FLOPs); d * V: the shared embedding used as the softmax projection;
    B sentences, S source and T target tokens, L layers per stack. The
    attention term is QK^T and AV (2 * 2*Tq*Tk*d forward, x3 with backward)
    for encoder self (S*S), decoder self (T*T, all of it, as computed) and
    cross attention (T*S).

`flops_fraction` = achieved FLOP/s / peak. The peak is measured here: the best
of float32 (or --matmul_dtype) square matmuls of size --matmul_n in the same
framework and thread setting, unless --peak_tflops gives a device's
datasheet figure (e.g. 989 for an H100 SXM in dense bf16); MFU is then that
fraction against the datasheet.

On a GPU the peer is the same nn.Transformer model run by
`benchmarks.torch_peer_step` on `--peer_device` under torch.autocast
(`--peer_compile` adds torch.compile); without `--peer_device` it is the
shared peer script itself, on the CPU in float32.

Prints one JSON object: per shape, our figures, the peer's, `ratio` = our best
tokens/s / the peer's, FLOPs per step and the fraction of the peak.
"""

import functools
import inspect
import os
import sys
import tempfile
import time

from benchmarks import harness
from t2t_revival.errors import UserError

PROG = "train_step"
BACKENDS = ("tensorflow", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# JAX takes 75% of the GPU's memory up front by default, which leaves the
# PyTorch peer (a subprocess on the same GPU) too little: allocate as needed.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
SHAPES = harness.SHAPES
RUN_FLAGS = harness.RUN_FLAGS


def parse_args(argv=None):
    p = harness.argument_parser(PROG, __doc__)
    p.add_argument("--backend", default=os.environ.get("KERAS_BACKEND", "tensorflow"),
                   help="Keras backend of our step: tensorflow (the trainer's update) or jax "
                        "(a jax.jit of the trainer's loss and optimizer); default "
                        "$KERAS_BACKEND, else tensorflow")
    p.add_argument("--shapes", default="base,tiny",
                   help=f"comma-separated, of {', '.join(SHAPES)}")
    for name, default in RUN_FLAGS:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--jit_compile", choices=["both", "true", "false"], default="both",
                   help="TensorFlow backend: time our step with XLA, without, or both")
    p.add_argument("--mixed_precision", default="float32",
                   help="dtype policy of our model (the peer is float32)")
    p.add_argument("--matmul_n", type=int, default=2048, help="size of the peak matmul")
    p.add_argument("--matmul_dtype", default="float32")
    p.add_argument("--peak_tflops", type=float, default=0.0,
                   help="the device's datasheet peak instead of the measured one")
    p.add_argument("--peer_python", default=sys.executable,
                   help="a python with torch, to run the peer")
    p.add_argument("--peer_script", default=str(harness.PEER_SCRIPT),
                   help="the peer script (default: $T2T_SHARED or ../shared, /peers/...)")
    p.add_argument("--peer_device", default="",
                   help="run the peer's model on this torch device (e.g. cuda) through "
                        "benchmarks.torch_peer_step; default: the shared peer as is (CPU)")
    p.add_argument("--peer_autocast", default="none", choices=["none", "bfloat16", "float16"],
                   help="with --peer_device: torch.autocast dtype of the peer's step")
    p.add_argument("--peer_compile", action="store_true",
                   help="with --peer_device: torch.compile the peer's model")
    p.add_argument("--skip_peer", action="store_true")
    p.add_argument("--sync_every", type=int, default=1,
                   help="JAX backend: read the loss back to the host every N steps "
                        "(1: every step, as a loop that prints or sums it per step; "
                        "0: only after the last step, so the host queues steps ahead)")
    p.add_argument("--donate", action="store_true",
                   help="JAX backend: donate the weights and optimizer state to the step")
    p.add_argument("--profile_steps", type=int, default=0,
                   help="JAX backend: after timing, trace this many steps with "
                        "jax.profiler and add where the device time goes (by HLO "
                        "category and the top ops) to the JSON")
    p.add_argument("--hparams", default="",
                   help="more overrides of our model's hparams (e.g. dropout=0.0), "
                        "after the shape's")
    a = p.parse_args(argv)
    if a.backend not in BACKENDS:
        p.error(f"--backend must be one of {', '.join(BACKENDS)} (KERAS_BACKEND gives the "
                f"default). Received: --backend={a.backend!r}")
    if not a.peer_device and (a.peer_autocast != "none" or a.peer_compile):
        p.error("--peer_autocast and --peer_compile need --peer_device (e.g. cuda or cpu); "
                "the shared peer script runs in float32 as it is")
    a.shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    unknown = [s for s in a.shapes if s not in SHAPES]
    if unknown or not a.shapes:
        p.error(f"unknown --shapes {unknown}; choose from {', '.join(SHAPES)}")
    return a


def use_backend(name: str) -> None:
    """Load Keras with backend `name` (--backend); a UserError when this
    process already loaded it with another."""
    os.environ["KERAS_BACKEND"] = name
    import keras

    if keras.backend.backend() != name:
        raise UserError(f"--backend {name} needs a process of its own: Keras is already "
                        f"loaded with the {keras.backend.backend()} backend here. "
                        f"Received: --backend={name}")


def step_flops(shape, batch, src_len, tgt_len, enc_params, dec_params):
    """Model FLOPs of one training step (forward + backward), as in the docstring."""
    d, vocab, layers = shape["d_model"], shape["vocab"], shape["layers"]
    matmul = 6 * batch * (enc_params * src_len + (dec_params + d * vocab) * tgt_len)
    attention = 12 * batch * layers * d * (src_len ** 2 + tgt_len ** 2 + tgt_len * src_len)
    return matmul + attention


def train_config(shape, a, output_dir, jit_compile=True):
    """The `TrainConfig` of our run at `shape`: t2t-trainer's flags resolved
    (`resolve_train_config`). Nothing is written to `output_dir`."""
    from t2t_revival.settings.config_resolution import resolve_train_config

    return resolve_train_config(
        problem=harness.PROBLEM, output_dir=output_dir, data_dir=output_dir,
        hparams_set="transformer_base",
        hparams=harness.hparams_overrides(shape, a.batch, a.src_len, a.tgt_len,
                                          a.mixed_precision, a.hparams),
        xla=jit_compile, seed=0)


def synthetic_batch(shape, a):
    """Full batches of random non-pad ids: {"inputs": [B, S], "targets": [B, T]}."""
    return harness.synthetic_batch(shape, a.batch, a.src_len, a.tgt_len)


def param_counts(model, shape):
    """All weights, the encoder stack's, and the decoder stack's (the rest but
    the shared embedding)."""
    import numpy as np

    embedding = shape["vocab"] * shape["d_model"]
    enc = sum(int(np.prod(w.shape)) for w in model.weights if "encoder" in w.path)
    total = model.count_params()
    return {"params": total, "enc": enc, "dec": total - enc - embedding}


def build(shape, a, output_dir, jit_compile=True):
    """The trainer for `shape` (TensorFlow backend), a synthetic batch and the
    parameter counts. Nothing is written to `output_dir` (no checkpoint is saved)."""
    from t2t_revival.train.trainer import Trainer

    trainer = Trainer(train_config(shape, a, output_dir, jit_compile), log=lambda *args: None)
    return trainer, synthetic_batch(shape, a), param_counts(trainer.model, shape)


def _timed(step, a):
    """Warm-up and per-step seconds of `step`; its last call of each phase syncs."""
    kwargs = {"last": True} if "last" in inspect.signature(step).parameters else {}
    start = time.perf_counter()
    for i in range(a.warmup):
        loss = step(**kwargs) if i == a.warmup - 1 else step()
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(a.steps):
        loss = step(**kwargs) if i == a.steps - 1 else step()
    return warmup_s, (time.perf_counter() - start) / a.steps, float(loss)


def time_update(trainer, batch, a):
    """Times the trainer's own update, `trainer.update_step.run`, on `batch`
    repeated through the trainer's strategy: --warmup, then --steps calls."""
    import tensorflow as tf

    if a.threads:
        tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    tokens = []

    def step():
        loss, step_tokens, _ = trainer.update_step.run(iterator)
        tokens.append(float(step_tokens))
        return float(loss)  # waits for the step

    warmup_s, step_s, loss = _timed(step, a)
    targets = batch["targets"]
    assert set(tokens) == {float(targets.size)}, tokens  # every target token counted
    optimizer = getattr(trainer.optimizer, "inner_optimizer", trainer.optimizer)
    return {"backend": "tensorflow", "jit_compile": trainer.config.xla,
            "tensorflow": tf.__version__, "step": "Trainer.update_step.run",
            "fused": trainer.update_step.fused, "optimizer": type(optimizer).__name__,
            "replicas": trainer.strategy.num_replicas_in_sync,
            "updates": trainer.step,   # the trainer's optimizer counted every timed update
            "warmup_s": warmup_s, "step_s": step_s, "loss": loss}


def time_ours_tensorflow(shape, a, jit_compile):
    """The trainer's update (`time_update`) at `shape`, with or without XLA,
    and its parameter counts."""
    with tempfile.TemporaryDirectory() as output_dir:
        trainer, batch, counts = build(shape, a, output_dir, jit_compile)
        return {**time_update(trainer, batch, a), **counts}


def time_ours_jax(shape, a):
    """A `jax.jit` step of the trainer's model, loss and optimizer (see the docstring)."""
    import jax
    import keras

    from t2t_revival.models.build_model import build_model
    from t2t_revival.train.losses import smoothed_cross_entropy_sum
    from t2t_revival.train.optimizer import make_optimizer

    with tempfile.TemporaryDirectory() as output_dir:   # nothing is written there
        config = train_config(shape, a, output_dir)
    hp = config.hparams
    if hp.mixed_precision == "mixed_float16":
        raise UserError("--backend jax times the update without loss scaling; use "
                        "--mixed_precision mixed_bfloat16 (or float32), or --backend "
                        "tensorflow. Received: --mixed_precision=mixed_float16")
    # The trainer's set-up (`TrainingSetup.build`), without tf.distribute.
    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(hp.mixed_precision)
    model = build_model(hp, config.model)
    optimizer = make_optimizer(hp, config.train_steps)
    optimizer.build(model.trainable_variables)
    batch = {k: jax.numpy.asarray(v) for k, v in synthetic_batch(shape, a).items()}

    def loss_fn(trainable, non_trainable, batch):
        logits, non_trainable = model.stateless_call(trainable, non_trainable, batch,
                                                     training=True)
        loss_sum, tokens = smoothed_cross_entropy_sum(logits, batch["targets"],
                                                      hp.label_smoothing)
        return loss_sum / jax.numpy.maximum(tokens, 1.0), non_trainable

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    @functools.partial(jax.jit, donate_argnums=(0,) if a.donate else ())
    def step(state, batch):
        trainable, non_trainable, opt_vars = state
        (loss, non_trainable), grads = grad_fn(trainable, non_trainable, batch)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return loss, (trainable, non_trainable, opt_vars)

    # A tuple, as `step` returns it: a list would be another pytree, and the
    # second call would compile the step again.
    state = ([v.value for v in model.trainable_variables],
             [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])

    calls = 0

    def run(last=False):
        nonlocal state, calls
        loss, state = step(state, batch)
        calls += 1
        if last or (a.sync_every and calls % a.sync_every == 0):
            return float(loss)  # waits for the device
        return loss

    warmup_s, step_s, loss = _timed(run, a)
    profile = device_time_profile(run, a.profile_steps) if a.profile_steps else None
    # The optimizer's step counter after the timed updates: its `iterations`
    # in the state the step returned.
    updates = next(int(value) for variable, value in zip(optimizer.variables, state[2])
                   if variable.path == optimizer.iterations.path)
    return {"backend": "jax", "jit_compile": True, "jax": jax.__version__,
            "step": "jax.jit(stateless_call + trainer loss + make_optimizer's stateless_apply)",
            "sync_every": a.sync_every, "donate": a.donate,
            "optimizer": type(optimizer).__name__, "updates": updates,
            "devices": [str(d) for d in jax.devices()], "keras": keras.__version__,
            "warmup_s": warmup_s, "step_s": step_s, "loss": loss,
            **({"profile": profile} if profile else {}),
            **param_counts(model, shape)}


def _op_kind(name):
    """A coarse kind of an XLA op from its name (fusion kinds as XLA names them)."""
    low = name.lower()
    for kind, keys in (("matmul", ("gemm", "dot", "cublas", "cutlass", "nvjet", "matmul")),
                       ("rng", ("rng", "threefry", "random")),
                       ("reduce", ("reduce",)), ("copy/transpose", ("copy", "transpose")),
                       ("all-reduce", ("all-reduce", "nccl"))):
        if any(k in low for k in keys):
            return kind
    if "fusion" in low or "loop" in low or "input" in low:
        return "elementwise fusion"
    return "other"


def device_time_profile(run, steps):
    """Traces `steps` calls of `run` and sums the device's op time by kind and name.

    Reads the trace with `jax.profiler.ProfileData` (no TensorBoard plugin
    needed): on a GPU, the "XLA Ops" line of each `/device:GPU:N` plane holds
    one event per executed HLO op; on a CPU, the host's XLA op events. Returns
    per-step milliseconds, the share of each kind, and the 25 costliest ops.
    """
    import tempfile

    import jax

    with tempfile.TemporaryDirectory() as log_dir:
        with jax.profiler.trace(log_dir):
            for i in range(steps):
                run(last=i == steps - 1)
        paths = [os.path.join(d, f) for d, _, files in os.walk(log_dir)
                 for f in files if f.endswith(".xplane.pb")]
        data = jax.profiler.ProfileData.from_file(paths[0])
    by_name, lines_seen = {}, set()
    device_planes = [p for p in data.planes if p.name.startswith("/device:")]
    for wanted in ("XLA Ops", None):   # None: every stream line, if no op line
        for plane in device_planes:
            for line in plane.lines:
                lines_seen.add(f"{plane.name}:{line.name}")
                if (line.name != wanted) if wanted else not line.name.startswith("Stream"):
                    continue
                for event in line.events:
                    by_name[event.name] = by_name.get(event.name, 0.0) + event.duration_ns
        if by_name:
            break
    total = sum(by_name.values())
    by_kind = {}
    for name, ns in by_name.items():
        by_kind[_op_kind(name)] = by_kind.get(_op_kind(name), 0.0) + ns
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:25]
    return {"steps": steps, "device_ms_per_step": total / steps / 1e6,
            "share_by_kind": {k: round(v / total, 4) for k, v in
                              sorted(by_kind.items(), key=lambda kv: -kv[1])} if total else {},
            "top_ops_ms_per_step": [[n, round(ns / steps / 1e6, 3)] for n, ns in top],
            "lines": sorted(lines_seen)[:20]}


def measured_peak(a):
    """Best FLOP/s of n x n @ n x n matmuls in our framework, threads and dtype."""
    n = a.matmul_n
    flops = 2 * n ** 3
    if a.backend == "jax":
        import jax
        import jax.numpy as jnp
        x = jnp.ones((n, n), a.matmul_dtype)
        f = jax.jit(lambda x: x @ x)
        run = lambda: f(x).block_until_ready()  # noqa: E731
    else:
        import tensorflow as tf
        if a.threads:
            tf.config.threading.set_intra_op_parallelism_threads(a.threads)
        x = tf.random.normal((n, n), dtype=a.matmul_dtype)
        f = tf.function(lambda x: tf.matmul(x, x))
        run = lambda: f(x).numpy()  # noqa: E731
    run()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return flops / best


def run_peer(shape, a):
    """The torch peer's JSON at `shape` and our run flags (`harness.peer_command`)."""
    command, env = harness.peer_command(
        shape, {name: getattr(a, name) for name, _ in RUN_FLAGS}, a.peer_python,
        a.peer_script, a.peer_device, a.peer_autocast, a.peer_compile)
    return harness.run_peer(command, env)


def main(argv=None):
    a = parse_args(argv)
    use_backend(a.backend)
    if a.peak_tflops:
        peak, peak_source = a.peak_tflops * 1e12, "datasheet (--peak_tflops)"
    else:
        peak, peak_source = measured_peak(a), f"measured {a.matmul_dtype} {a.matmul_n}^3 matmul"
    result = {"benchmark": "train_step", "backend": a.backend,
              "mixed_precision": a.mixed_precision, "hparams": a.hparams,
              "jax_prng": os.environ.get("JAX_DEFAULT_PRNG_IMPL", "threefry2x32"),
              "run": {name: getattr(a, name) for name, _ in RUN_FLAGS},
              "peak_tflops": round(peak / 1e12, 4), "peak": peak_source,
              "machine": harness.describe(), "shapes": {}}
    tokens = a.batch * a.tgt_len
    for name in a.shapes:
        shape = SHAPES[name]
        # The peer runs first, so its process has ended (and given back the
        # GPU's memory) before ours allocates.
        peer = None if a.skip_peer else run_peer(shape, a)
        if a.backend == "jax":
            ours = [time_ours_jax(shape, a)]
        else:
            modes = {"both": [True, False], "true": [True], "false": [False]}[a.jit_compile]
            ours = [time_ours_tensorflow(shape, a, mode) for mode in modes]
        flops = step_flops(shape, a.batch, a.src_len, a.tgt_len, ours[0]["enc"], ours[0]["dec"])
        for r in ours:
            r["tgt_tokens_per_s"] = tokens / r["step_s"]
            r["tflops_per_s"] = flops / r["step_s"] / 1e12
            r["flops_fraction"] = flops / r["step_s"] / peak
        entry = {"shape": shape, "flops_per_step": flops,
                 "ours": {("xla" if r["jit_compile"] else "no_xla"): r for r in ours}}
        best = max(ours, key=lambda r: r["tgt_tokens_per_s"])
        entry["ours_best"] = "xla" if best["jit_compile"] else "no_xla"
        if peer is not None:
            peer["flops_fraction"] = flops / peer["step_s"] / peak
            entry["peer"] = peer
            entry["ratio"] = best["tgt_tokens_per_s"] / peer["tgt_tokens_per_s"]
        result["shapes"][name] = entry
    harness.print_result(result)


if __name__ == "__main__":
    harness.run(main, PROG)
