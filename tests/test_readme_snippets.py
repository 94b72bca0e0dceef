"""The commands and code of the README and the docs pages, run as written
(slow), and their prose.

`readme_workflow` runs the blocks (once per session, the `readme_run`
fixture) and says what is scaled down for CI.
"""

from __future__ import annotations

import json
import re

import pytest

from readme_workflow import (MAIN_JOB_OUTPUT_DIR, README, ROOT, STEPS, TINY_RUN_STEPS, blocks,
                             commands, pages, scaled)

# An absl log line: `I1128 00:40:23.874246 139654954986368 problem.py:275] ...`.
ABSL_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ", re.MULTILINE)


def _readme_blocks():
    return [(language, code) for page, language, code, _ in blocks() if page == README]


def _workflow() -> list[str]:
    """The commands of the README's workflow block (train, average, decode, score, export)."""
    return commands(next(code for _, code in _readme_blocks() if "t2t-avg-checkpoints" in code))


def _flag(command: str, name: str) -> str:
    return re.search(rf"--{name}=(\S+)", command).group(1)


def test_every_block_is_run_or_says_why_not():
    all_blocks = blocks()
    assert len(all_blocks) >= 20
    for page, language, code, excluded in all_blocks:
        assert excluded or language in ("", "sh", "python"), (page.name, language, code[:80])


def test_every_docs_page_is_in_the_site_and_in_the_snippet_tests():
    """A page of docs/ outside docs/conf.py's PAGES would be neither in the
    site's navigation nor run by `readme_workflow`."""
    on_disk = sorted((ROOT / "docs").glob("*.md"))
    assert on_disk and sorted(p for p in pages() if p != README) == on_disk
    assert pages()[0] == README


def test_the_readme_is_a_front_door_under_200_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 200


def test_no_placeholder_is_left_in_the_prose():
    """A figure left as a placeholder (QS_TIME, TODO) outside code is a broken
    promise; names in backticks or code blocks are code."""
    for page in pages():
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"`[^`]*`", "", text)
        left = sorted(set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b(?:TODO|TBD|FIXME|XXX)\b",
                                     text)))
        assert not left, (page.name, left)


# Where the pages' commands and blocks write, at the clone's root.
_WRITES = [r"--(?:decode_to_file|output_dir|data_dir|export_dir|event_dir|translations_dir)="
           r"([^\s'\"]+)", r"\s>\s*([A-Za-z_][^\s'\";)]*)", r"mkdir -p ([^\s;]+)",
           r'pathlib\.Path\("([^"]+)"\)']


def test_git_ignores_what_the_pages_commands_write():
    """A newcomer who runs the workflow in the clone must not see its outputs
    as changes to commit (`test.hyp.de` was not ignored)."""
    import subprocess

    written = {m.group(1).split("$")[0].rstrip("/") for _, _, code, excluded in blocks()
               if not excluded for pattern in _WRITES for m in re.finditer(pattern, code)}
    written = sorted(w for w in written if w and not w.startswith(("..", "/", "&")) and
                     re.fullmatch(r"[\w./-]+", w))
    assert "test.hyp.de" in written and "t2t_train/tiny" in written, written
    out = subprocess.run(["git", "check-ignore", "--no-index", "-v", *written], cwd=ROOT,
                         capture_output=True, text=True)
    ignored = {line.split("\t")[-1] for line in out.stdout.splitlines()}
    assert set(written) <= ignored, sorted(set(written) - ignored)


def test_the_main_job_is_the_workflow_s_training_command():
    """The README's main job (its own block) is the workflow block's first line."""
    main_job = [commands(code) for _, code in _readme_blocks()
                if [c.split()[0] for c in commands(code)] == ["t2t-trainer"]][0]
    assert main_job == _workflow()[:1], (main_job, _workflow())


def test_the_workflow_is_what_the_trainer_prints_next():
    """After the main job, the trainer prints the README's workflow, to the
    score (t2t-bleu on test.hyp.de) and the export."""
    from t2t_revival.cli.next_commands import next_commands

    train, *after = _workflow()
    expected = next_commands(_flag(train, "problem"), _flag(train, "output_dir"),
                             _flag(train, "data_dir"), int(_flag(train, "train_steps")))
    assert after == expected
    assert [c.split()[0] for c in after] == ["t2t-avg-checkpoints", "t2t-decoder", "t2t-bleu",
                                            "t2t-exporter"]
    assert "--decode_to_file=test.hyp.de" in after[1] and "--translation=test.hyp.de" in after[2]


def test_both_exports_are_of_the_checkpoint_the_workflow_decodes():
    """The SavedModel and the CTranslate2 export of the main job (README and
    docs/serving.md) are made from the checkpoint the workflow decodes and
    scores: the average of the last 5."""
    decoded = _flag(_workflow()[2], "checkpoint_path")
    assert decoded == f"{MAIN_JOB_OUTPUT_DIR}/averaged/ckpt-2000"
    exports = [c for _, _, code, _ in blocks() for c in commands(code)
               if c.startswith("t2t-exporter ") and f"--output_dir={MAIN_JOB_OUTPUT_DIR}" in c]
    assert any("--format=ctranslate2" in c for c in exports), exports
    assert any("--format" not in c for c in exports), exports
    assert all(_flag(c, "checkpoint_path") == decoded for c in exports), exports


@pytest.mark.slow
def test_readme_commands_and_snippets_run_as_written(readme_run):
    """Every block not excluded ran, exit 0 and no traceback (readme_run
    checks each as it goes), and the workflow's outputs are where the README
    and the docs say."""
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


@pytest.mark.slow
def test_the_main_job_prints_the_workflow_and_no_absl_line(readme_run):
    """The main job's log: no absl line (its datagen's lines come plain), and
    its last lines are the README workflow's next commands, scaled as run."""
    command, out = next((c, o) for c, o in readme_run.ran if c.startswith("t2t-trainer "))
    assert f"--output_dir={MAIN_JOB_OUTPUT_DIR} " in command
    assert not ABSL_LINE.search(out.stdout + out.stderr), (out.stdout + out.stderr)[-3000:]
    assert "translate_ende_multi30k train: 29000 pairs" in out.stderr, out.stderr[-3000:]
    printed = [line.strip() for line in out.stdout.splitlines()[-4:]]
    assert printed == [scaled(c) for c in _workflow()[1:]], out.stdout[-2000:]


@pytest.mark.slow
def test_the_export_runs_without_a_server_in_a_fresh_python(readme_run):
    """The README's snippet (run by `readme_run` in a fresh interpreter, with
    TensorFlow and tensorflow-text only) loads the workflow's SavedModel and
    translates; both exports come from the averaged checkpoint."""
    code, out = next((c, o) for c, o in readme_run.ran if "tf.saved_model.load" in c)
    assert "import tensorflow_text" in code
    assert f'"t2t_train/tiny/export/{TINY_RUN_STEPS}"' in code
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    assert "cuInit" not in out.stderr, out.stderr[-2000:]   # a newcomer took it for a fault
    for line in lines:
        score, translation = line.split("\t")
        assert float(score) < 0 and translation.strip(), line
    ct2 = readme_run.workdir / f"t2t_train/tiny/export/ctranslate2/{TINY_RUN_STEPS}"
    record = json.loads((ct2 / "t2t_export.json").read_text())
    averaged = f"t2t_train/tiny/averaged/ckpt-{STEPS['2000']}"
    assert record["checkpoint"].endswith(averaged), record
    saved_model_export = next(c for c, _ in readme_run.ran
                              if c.startswith("t2t-exporter ") and "--format" not in c)
    assert f"--checkpoint_path={averaged}" in saved_model_export
