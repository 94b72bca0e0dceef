"""The README's commands and code, run as written (slow).

Every fenced block of README.md is either run here, in order, from a fresh
folder beside `../shared` (as a newcomer runs them from a fresh clone), or
preceded by `<!-- not run by tests: why -->`. Three things are scaled down so
that CI can afford it, and nothing else is changed: training runs fewer
updates (`--train_steps` and the checkpoint step in paths), the trainer's dev
decoding at each evaluation takes its first few dev sentences
(`--eval_decode_sentences`, default 200; an untrained model's translations run
to the length limit), and after each datagen the test files are cut to their
first lines, so the decodes are short.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import ENV, ROOT, SHARED_DATA

README = ROOT / "README.md"
_FENCE = re.compile(r"(<!-- not run by tests:[^>]*-->\s*)?```(\w*)\n(.*?)```", re.S)
# The README's step counts and what the test trains instead.
_STEPS = {"2000": "100", "1000": "20"}
_TEST_LINES = 8
_EVAL_DECODE_SENTENCES = 8


def _blocks() -> list[tuple[str, str, bool]]:
    """(language, code, excluded) of every fenced block, in README order."""
    text = README.read_text(encoding="utf-8")
    return [(m.group(2), m.group(3), bool(m.group(1))) for m in _FENCE.finditer(text)]


def _commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments dropped."""
    code = code.replace("\\\n", " ")
    return [" ".join(line.split()) for line in code.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _scaled(command: str) -> str:
    for readme, test in _STEPS.items():
        command = command.replace(f"--train_steps={readme}", f"--train_steps={test}")
        command = command.replace(f"ckpt-{readme}", f"ckpt-{test}")
    if command.startswith("t2t-trainer ") and "--eval_decode_sentences" not in command:
        command += f" --eval_decode_sentences={_EVAL_DECODE_SENTENCES}"
    return command


def _cut_test_files(workdir: pathlib.Path) -> None:
    """Keep the first lines of each datagen test file (sources, references, gold trees)."""
    for path in (workdir / "t2t_data").glob("*-test.*"):
        if path.suffix in (".txt", ".trees"):
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            if len(lines) > _TEST_LINES:
                path.write_text("".join(lines[:_TEST_LINES]), encoding="utf-8")


def test_every_block_is_run_or_says_why_not():
    blocks = _blocks()
    assert len(blocks) >= 8
    for language, code, excluded in blocks:
        assert excluded or language in ("", "sh", "python"), (language, code[:80])


def test_no_placeholder_is_left_in_the_prose():
    """A figure left as a placeholder (QS_TIME, TODO) outside code is a broken
    promise on the front page; names in backticks or code blocks are code."""
    text = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    left = sorted(set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b(?:TODO|TBD|FIXME|XXX)\b",
                                 text)))
    assert not left, left


def test_the_main_job_is_the_workflow_s_training_command():
    """The quick start's main job and the workflow block train the same run."""
    text = README.read_text(encoding="utf-8")
    main_job = re.search(r"\| main job[^|]*\| `(t2t-trainer [^`]*)`", text).group(1)
    workflow = next(code for _, code, _ in _blocks() if "t2t-avg-checkpoints" in code)
    assert main_job in " ".join(_commands(workflow)), (main_job, workflow)


@pytest.mark.slow
def test_readme_commands_and_snippets_run_as_written(tmp_path):
    workdir = tmp_path / "clone"
    workdir.mkdir()
    # `../shared/data` from the working folder, as beside a fresh clone.
    (tmp_path / "shared").symlink_to(SHARED_DATA.parent, target_is_directory=True)
    bin_dir = os.path.dirname(sys.executable)
    env = dict(ENV, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    ran = []
    for language, code, excluded in _blocks():
        if excluded:
            continue
        if language == "python":
            out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env,
                                 capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, (code, out.stderr[-3000:])
            ran.append(code)
            continue
        for command in _commands(code):
            command = _scaled(command)
            out = subprocess.run(["bash", "-c", command], cwd=workdir, env=env,
                                 capture_output=True, text=True, timeout=1200)
            assert out.returncode == 0, (command, out.stdout[-2000:], out.stderr[-3000:])
            assert "Traceback" not in out.stderr, (command, out.stderr[-3000:])
            ran.append(command)
            _cut_test_files(workdir)
    # The workflow's outputs exist where the README says.
    assert (workdir / "t2t_train/tiny/averaged").is_dir()
    assert list((workdir / "t2t_train/tiny/export").glob("[0-9]*/saved_model.pb"))
    assert list((workdir / "t2t_train/tiny/export/ctranslate2").glob("[0-9]*/model.bin"))
    assert (workdir / "t2t_train/parsing_tiny").is_dir()
    assert any(c.startswith("t2t-bleu") for c in ran)
    assert any(c.startswith("t2t-parse-eval") for c in ran)
    assert any("CTranslate2Translator" in c for c in ran)
