"""benchmarks/torch_peer_step.py: the shared peer's model on a chosen device and
precision. Running it needs torch (not a project dependency: that test is
skipped where it is absent); what decides the model and the device does not."""

import ast
import json
import math
import os
import subprocess
import sys

import pytest

from benchmarks import harness, torch_peer_step, train_step
from conftest import ENV

TINY = ["--d_model", "32", "--layers", "1", "--heads", "2", "--ff", "64", "--vocab", "97",
        "--batch", "4", "--src_len", "6", "--tgt_len", "5", "--steps", "2", "--warmup", "1"]


def _run(command):
    env = dict(ENV, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _shared_peer_flags(peer_script) -> list[tuple[str, int]]:
    """The (flag, default) pairs the shared peer script's argument loop
    defines, read from its source (no torch needed)."""
    for node in ast.walk(ast.parse(peer_script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.List) and all(
                isinstance(e, ast.Tuple) for e in node.iter.elts):
            return [ast.literal_eval(e) for e in node.iter.elts]
    raise AssertionError(f"no flag list in {peer_script}")


def test_same_model_as_the_shared_peer_falls_back_to_cpu(shared_data):
    """The model is the shared peer's own Seq2Seq, built from the shared
    peer's flags: torch_peer_step takes exactly those flags with their
    defaults, and the training benchmarks hand it (and the shared script)
    every one of them. A CUDA device with no GPU visible runs on the CPU."""
    peer_script = shared_data.parent / "peers" / "torch_transformer_train.py"
    assert torch_peer_step.PEER_FLAGS == _shared_peer_flags(peer_script)
    args = train_step.parse_args(["--peer_device", "cuda", "--batch", "4"])
    for device in ("", "cuda"):
        command, _ = harness.peer_command(
            harness.SHAPES["tiny"], {name: getattr(args, name) for name, _ in
                                     harness.RUN_FLAGS}, "python", str(peer_script), device)
        given = [arg[2:] for arg in command if arg.startswith("--")]
        peer_flags = [name for name, _ in torch_peer_step.PEER_FLAGS]
        assert [name for name in given if name in peer_flags] == peer_flags
        assert command[command.index("--batch") + 1] == "4"
    parsed = torch_peer_step.parse_args(TINY)
    assert (parsed.d_model, parsed.ff, parsed.vocab, parsed.tgt_len) == (32, 64, 97, 5)

    assert torch_peer_step.device_for("cuda", cuda_available=False) == "cpu"
    assert torch_peer_step.device_for("cuda:1", cuda_available=False) == "cpu"
    assert torch_peer_step.device_for("cuda", cuda_available=True) == "cuda"
    assert torch_peer_step.device_for("cpu", cuda_available=True) == "cpu"


@pytest.mark.parametrize("autocast", ["none", "bfloat16"])
def test_the_step_runs_on_the_cpu_without_a_gpu(shared_data, autocast):
    pytest.importorskip("torch")
    peer_script = shared_data.parent / "peers" / "torch_transformer_train.py"
    shared = _run([sys.executable, str(peer_script), *TINY])
    ours = _run(harness.module_command(sys.executable, "torch_peer_step", "--peer_script",
                                       str(peer_script), "--device", "cuda", "--autocast",
                                       autocast, *TINY)[0])
    assert ours["device"] == "cpu" and ours["device_name"] == "cpu"  # no GPU visible
    assert ours["autocast"] == autocast
    assert ours["params"] == shared["params"]
    assert ours["step_s"] > 0 and ours["tgt_tokens_per_s"] == pytest.approx(
        4 * 5 * 2 / (ours["step_s"] * 2), rel=1e-6)
    assert math.isfinite(ours["loss"]) and ours["loss"] > 0


def test_missing_peer_script_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks.torch_peer_step",
                          "--peer_script", str(tmp_path / "nope.py"), *TINY],
                         capture_output=True, text=True, env=ENV, cwd=os.sep, timeout=300)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "torch_peer_step: error: there is no peer script there; pass --peer_script, or set "
        f"T2T_SHARED to the shared folder. Received: --peer_script={str(tmp_path / 'nope.py')!r}"]
