"""Shared test set-up: the `slow` marker, the path of the shared data, and the
helpers several test files use (the subprocess environment, the one-line
error check, the hparam sets the issues name)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("T2T_SHARED_DATA", ROOT.parent / "shared" / "data"))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The environment of a CLI run in a subprocess: this checkout's code.
ENV = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")

# The hparam sets the issues ask for by name.
ISSUE_HPARAMS_SETS = ("transformer_base", "transformer_big", "transformer_base_single_gpu",
                      "transformer_big_single_gpu", "transformer_parsing_base",
                      "transformer_parsing_big", "transformer_tiny", "transformer_small")


def one_line_error(out, prog, *needles, status=2):
    """`out` (a finished subprocess) failed with one `prog: error: ...` line
    holding every needle, exit `status` and no traceback."""
    assert out.returncode == status, (out.returncode, out.stderr[-2000:])
    lines = [l for l in out.stderr.splitlines() if l.startswith(f"{prog}: error: ")]
    assert len(lines) == 1, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def readme_block(needle: str) -> str:
    """The README's fenced code block that contains `needle`."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    return next(b for b in blocks if needle in b)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the slow end-to-end tests (CI does)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the shared data folder is missing: {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def multi30k_data_dir(shared_data, tmp_path_factory):
    """The full Multi30k datagen, run once per session (slow tests share it).

    Returns (data_dir, seconds the datagen took).
    """
    import time

    import problems  # noqa: F401  (registration)
    from t2t_revival.registry import problems as registered

    data_dir = tmp_path_factory.mktemp("multi30k_data")
    start = time.time()
    registered.get("translate_ende_multi30k")(download=False).generate_data(
        str(data_dir), str(shared_data / "multi30k"))
    return data_dir, time.time() - start
TINY_RUN_STEPS = 300


@pytest.fixture(scope="session")
def tiny_run(multi30k_data_dir, tmp_path_factory):
    """transformer_tiny trained briefly on Multi30k with the README's command.

    Shared by the slow trainer, decoder and export tests. Returns
    (output_dir, the trainer's stdout).
    """
    import subprocess
    import sys

    data_dir, _ = multi30k_data_dir
    out_dir = tmp_path_factory.mktemp("tiny_run") / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, str(ROOT / "t2t_trainer.py"), "--problem=translate_ende_multi30k",
         "--hparams_set=transformer_tiny", f"--data_dir={data_dir}",
         f"--output_dir={out_dir}", f"--train_steps={TINY_RUN_STEPS}",
         "--local_eval_frequency=0", "--log_step_count_steps=50",
         "--save_checkpoints_steps=100"],
        capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out_dir, out.stdout
