"""benchmarks/train_step.py: its FLOP count (the formula, and the parameter
split it relies on: encoder + decoder + shared embedding = every weight), and
that the step it times is the trainer's own update."""

import json
import subprocess
import sys

import pytest

from benchmarks import train_step as bench
from conftest import ENV


def test_step_flops_by_hand_at_the_tiny_shape():
    shape = bench.SHAPES["tiny"]  # d 128, 2 layers, d_ff 512, vocab 8192
    d = 128
    # Forward multiply-adds per token = the weights it meets; x2 FLOPs, x3 with
    # backward. Batch 2, 3 source and 5 target tokens, 700 encoder and 1000
    # decoder weights, the 8192 x 128 softmax projection on target tokens only.
    flops = bench.step_flops(shape, batch=2, src_len=3, tgt_len=5,
                             enc_params=700, dec_params=1000)
    matmul = 6 * 2 * (700 * 3 + (1000 + d * 8192) * 5)
    # QK^T and AV: 2 x 2*Tq*Tk*d forward, x3 with backward, per layer (2).
    attention = 12 * 2 * 2 * d * (3 * 3 + 5 * 5 + 5 * 3)
    assert flops == matmul + attention


def test_parameter_split_covers_every_weight(tmp_path):
    args = bench.parse_args(["--shapes", "tiny", "--batch", "2", "--src_len", "4",
                             "--tgt_len", "4"])
    trainer, batch, counts = bench.build(bench.SHAPES["tiny"], args, str(tmp_path))
    model = trainer.model
    assert batch["inputs"].shape == (2, 4)
    assert (trainer.hparams.d_model, trainer.hparams.vocab_size) == (128, 8192)
    assert trainer.hparams.gradient_accumulation_steps == 1
    d, ff, vocab = 128, 512, 8192
    # Each encoder layer: self-attention (4 d^2, no biases), FFN (2 d ff + ff + d),
    # two layer norms (4 d); the decoder layer adds cross-attention and a norm.
    enc_layer = 4 * d * d + 2 * d * ff + ff + d + 4 * d
    assert counts["enc"] == 2 * enc_layer
    assert counts["dec"] == 2 * (enc_layer + 4 * d * d + 2 * d)
    assert counts["enc"] + counts["dec"] + vocab * d == counts["params"] == model.count_params()


def test_peer_precision_flags_need_a_peer_device(capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--peer_autocast", "bfloat16"])
    assert e.value.code == 2
    assert "--peer_autocast and --peer_compile need --peer_device" in capsys.readouterr().err
    args = bench.parse_args(["--peer_device", "cuda", "--peer_autocast", "bfloat16"])
    assert (args.peer_device, args.peer_autocast) == ("cuda", "bfloat16")


def test_the_timed_step_is_the_trainers_update(tmp_path, monkeypatch):
    """Every timed call goes through the trainer's own `update_step.run` (a
    spy in its place sees each one), and the loss reported is its last."""
    args = bench.parse_args(["--shapes", "tiny", "--batch", "4", "--src_len", "6",
                             "--tgt_len", "5", "--steps", "2", "--warmup", "1"])
    build, losses = bench.build, []

    def build_with_a_spy(*build_args, **kwargs):
        trainer, batch, counts = build(*build_args, **kwargs)
        update = trainer.update_step.run

        def spy(iterator):
            loss, tokens, grad_norm = update(iterator)
            losses.append(float(loss))
            return loss, tokens, grad_norm

        trainer.update_step.run = spy
        return trainer, batch, counts

    monkeypatch.setattr(bench, "build", build_with_a_spy)
    result = bench.time_ours_tensorflow(bench.SHAPES["tiny"], args, jit_compile=False)
    assert len(losses) == 3                                    # warm-up + timed, all of them
    assert result["loss"] == losses[-1]
    assert result["optimizer"] == "ReducedGradientsAdam"     # not a plain Adam
    assert result["updates"] == 3                              # warm-up + timed, all applied
    # The trainer's smoothed loss (entropy of the target subtracted) at a random
    # start: about ln(8192) - 1.2 = 7.8 (8.25 measured at batch 16), where a loss
    # without the entropy term is about ln(8192) + 0.4 = 9.4.
    assert 6.5 < result["loss"] < 9.0, result["loss"]
    assert result["step_s"] > 0 and result["params"] > 0


@pytest.mark.slow  # a fresh interpreter imports JAX and compiles the tiny step
def test_the_jax_step_uses_the_trainers_optimizer_without_tensorflow():
    """`--backend jax` (how GPU figures are taken, on an image without
    TensorFlow) times the trainer's model, loss and optimizer
    (`make_optimizer`'s ReducedGradientsAdam), each update applied."""
    run = ("import runpy, sys; sys.modules['tensorflow'] = None; "  # as on the GPU image
           "sys.argv = ['train_step'] + sys.argv[1:]; "
           "runpy.run_module('benchmarks.train_step', run_name='__main__')")
    # XLA's backend optimizations off: the step compiles in half the time
    # (its speed is not what is checked here; benchmarks/train_step.py times it).
    env = dict(ENV, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_backend_optimization_level=0")
    env.pop("KERAS_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-c", run, "--backend", "jax", "--shapes", "tiny", "--batch", "4",
         "--src_len", "6", "--tgt_len", "5", "--steps", "2", "--warmup", "1", "--skip_peer",
         "--matmul_n", "64"], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax"
    ours = result["shapes"]["tiny"]["ours"]["xla"]
    assert ours["optimizer"] == "ReducedGradientsAdam"       # make_optimizer's, not a copy
    assert ours["updates"] == 3                                # warm-up + timed, all applied
    assert 6.5 < ours["loss"] < 9.0, ours["loss"]             # the trainer's smoothed loss
    assert ours["params"] == 1971200                           # transformer_tiny at vocab 8192
