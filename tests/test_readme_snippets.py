"""The README's commands and code, run as written (slow), and its prose.

`readme_workflow` runs the blocks (once per session, the `readme_run`
fixture) and says what is scaled down for CI.
"""

from __future__ import annotations

import re

import pytest

from readme_workflow import README, blocks, commands


def test_every_block_is_run_or_says_why_not():
    all_blocks = blocks()
    assert len(all_blocks) >= 8
    for language, code, excluded in all_blocks:
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
    workflow = next(code for _, code, _ in blocks() if "t2t-avg-checkpoints" in code)
    assert main_job in " ".join(commands(workflow)), (main_job, workflow)


@pytest.mark.slow
def test_readme_commands_and_snippets_run_as_written(readme_run):
    """Every block not excluded ran, exit 0 and no traceback (readme_run
    checks each as it goes), and the workflow's outputs are where the README
    says."""
    workdir = readme_run.workdir
    ran = [command for command, _ in readme_run.ran]
    assert len(ran) >= 20, ran
    assert (workdir / "t2t_train/tiny/averaged").is_dir()
    assert list((workdir / "t2t_train/tiny/export").glob("[0-9]*/saved_model.pb"))
    assert list((workdir / "t2t_train/tiny/export/ctranslate2").glob("[0-9]*/model.bin"))
    assert (workdir / "t2t_train/parsing_tiny").is_dir()
    assert any(c.startswith("t2t-bleu") for c in ran)
    assert any(c.startswith("t2t-parse-eval") for c in ran)
    assert any("CTranslate2Translator" in c for c in ran)
