"""benchmarks/torch_peer_step.py: the shared peer's model on a chosen device and
precision. Needs torch (not a project dependency: skipped where it is absent)."""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import ENV

TINY = ["--d_model", "32", "--layers", "1", "--heads", "2", "--ff", "64", "--vocab", "97",
        "--batch", "4", "--src_len", "6", "--tgt_len", "5", "--steps", "2", "--warmup", "1"]


def _run(command):
    env = dict(ENV, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("autocast", ["none", "bfloat16"])
def test_same_model_as_the_shared_peer_falls_back_to_cpu(shared_data, autocast):
    pytest.importorskip("torch")
    peer_script = shared_data.parent / "peers" / "torch_transformer_train.py"
    shared = _run([sys.executable, str(peer_script), *TINY])
    ours = _run([sys.executable, "-m", "benchmarks.torch_peer_step", "--peer_script",
                 str(peer_script), "--device", "cuda", "--autocast", autocast, *TINY])
    assert ours["device"] == "cpu"  # no GPU visible
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
