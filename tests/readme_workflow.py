"""The fenced blocks of the README and of the docs pages, and running them as
written (slow tests).

Every fenced block of README.md and of each page of docs/ is either run, in
order (the README's, then each page's in the order of the site,
`docs/conf.py`'s PAGES), from a fresh folder beside `../shared` (as a
newcomer runs them from a fresh clone), or preceded by `<!-- not run by
tests: why -->`. Three things are scaled down so that CI can afford it, and
nothing else is changed: training runs fewer updates (`--train_steps`, and
the step in checkpoint and export paths: `ckpt-2000`, `export/2000`), the
trainer's dev decoding at each evaluation takes its first few dev sentences
(`--eval_decode_sentences`, default 200; an untrained model's translations
run to the length limit), and after each datagen the test files are cut to
their first lines, so the decodes are short. Each is the least that still
runs every step of the block (a batch of more than one sentence, an update
after the compiling one); what the run proves is the plumbing, not quality
(the quality of the README's run is benchmarks/RESULTS.md's).

The README's main job, scaled to TINY_RUN_STEPS updates, is also the
`tiny_run` the slow trainer, decoder, export and warm-start tests share
(conftest): the session trains it once. Those tests decode the first
TINY_RUN_TEST_LINES sentences of the Multi30k test set with it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import runpy
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_FENCE = re.compile(r"(<!-- not run by tests:[^>]*-->\s*)?```(\w*)\n(.*?)```", re.S)
# The main job's steps in the tests: the fewest for a dev loss below 0.6 x
# chance (4.93 at 200 updates, 5.38 at 150, 5.87 at 100; chance ln 8192 =
# 9.01) and input-dependent translations that end (at 200: 39 different ones
# of 40 dev sentences, 12 words long on average; at 100: 11 of 40; at 50
# every one empty), which the decoder, export, CTranslate2 and warm-start
# tests use. (At 300 updates, before issue 71, the translations were longer:
# the decodes took longer.)
TINY_RUN_STEPS = 200
# The README's step counts and what the tests train instead: the docs' other
# trainers (your own data, parsing) prove their plumbing in 2 updates.
STEPS = {"2000": str(TINY_RUN_STEPS), "1000": "2"}
TEST_LINES = 2
EVAL_DECODE_SENTENCES = 2
# The Multi30k test sentences the tests decode with the main job's model (of
# 1,000; tiny_run_test_decodes, and CTranslate2 beside it): a few batches of
# the default 32, the progress bar to its end.
TINY_RUN_TEST_LINES = 100
# Where the main job writes, relative to the working folder (as in the README).
MAIN_JOB_OUTPUT_DIR = "t2t_train/tiny"


def pages() -> list[pathlib.Path]:
    """README.md, then the pages of docs/ in the site's order (docs/conf.py)."""
    site = runpy.run_path(str(ROOT / "docs" / "conf.py"))["PAGES"]
    return [README] + [ROOT / f"{page}.md" for page in site if page.startswith("docs/")]


def blocks() -> list[tuple[pathlib.Path, str, str, bool]]:
    """(page, language, code, excluded) of every fenced block, in run order."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        found += [(page, m.group(2), m.group(3), bool(m.group(1)))
                  for m in _FENCE.finditer(text)]
    return found


def commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments dropped."""
    code = code.replace("\\\n", " ")
    return [" ".join(line.split()) for line in code.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def scaled(command: str) -> str:
    """A command (or a Python block) with the README's step counts scaled down."""
    for readme, test in STEPS.items():
        command = command.replace(f"--train_steps={readme}", f"--train_steps={test}")
        command = command.replace(f"ckpt-{readme}", f"ckpt-{test}")
        command = command.replace(f"export/{readme}", f"export/{test}")
    if command.startswith("t2t-trainer ") and "--eval_decode_sentences" not in command:
        command += f" --eval_decode_sentences={EVAL_DECODE_SENTENCES}"
    return command


def _cut_test_files(workdir: pathlib.Path) -> None:
    """Keep the first lines of each datagen test file (sources, references, gold trees)."""
    for path in (workdir / "t2t_data").glob("*-test.*"):
        if path.suffix in (".txt", ".trees"):
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            if len(lines) > TEST_LINES:
                path.write_text("".join(lines[:TEST_LINES]), encoding="utf-8")


@dataclasses.dataclass
class ReadmeRun:
    workdir: pathlib.Path
    # (the command or Python snippet as run, its finished process), in run order.
    ran: list[tuple[str, subprocess.CompletedProcess]]

    def main_job(self) -> tuple[pathlib.Path, str]:
        """(absolute output_dir, stdout) of the README's main job, the first trainer."""
        command, out = next((c, o) for c, o in self.ran if c.startswith("t2t-trainer "))
        assert f"--output_dir={MAIN_JOB_OUTPUT_DIR} " in command, command
        assert f"--train_steps={TINY_RUN_STEPS} " in command, command
        return self.workdir / MAIN_JOB_OUTPUT_DIR, out.stdout

    def data_dir(self) -> pathlib.Path:
        """The main job's --data_dir (absolute): translate_ende_multi30k's whole
        datagen, which tests that train on Multi30k read (its test files are cut,
        and the parsing page's datagen shares the folder)."""
        command = next(c for c, _ in self.ran if c.startswith("t2t-trainer "))
        return self.workdir / re.search(r"--data_dir=(\S+)", command).group(1)


def run_readme(tmp_path: pathlib.Path, env: dict, shared_data: pathlib.Path) -> ReadmeRun:
    """Run every block not excluded (README, then docs/) in `tmp_path/clone`,
    `../shared` linked to `shared_data`'s parent. Each must exit 0 with no
    traceback.

    The decoders run with `env`'s compile cache, the suite's off (conftest),
    so each decodes on the TensorFlow path. A newcomer's cache is on, and then
    t2t-decoder decodes a small job of one checkpoint on LiteRT programs
    (litert=auto): measured with a cache of this run's own (issue 71, 2-core
    machine, loaded), the README's decode converted (11.6 s of CPU, 10.4 on
    the TensorFlow path) and decoding.md's next one of the same checkpoint
    took 2.6 s (10.2), but the parsing page's decode (beam 21, 300 extra
    positions, a sentence at a time) took 41 s (14.8): 20 s more in all.
    """
    workdir = tmp_path / "clone"
    workdir.mkdir()
    (tmp_path / "shared").symlink_to(shared_data.parent, target_is_directory=True)
    bin_dir = os.path.dirname(sys.executable)
    env = dict(env, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    ran = []
    for page, language, code, excluded in blocks():
        if excluded:
            continue
        if language == "python":
            code = scaled(code)
            # As a newcomer's Python runs it: TensorFlow's log level unset.
            plain = {k: v for k, v in env.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
            out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=plain,
                                 capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, (page.name, code, out.stderr[-3000:])
            ran.append((code, out))
            continue
        for command in commands(code):
            command = scaled(command)
            out = subprocess.run(["bash", "-c", command], cwd=workdir, env=env,
                                 capture_output=True, text=True, timeout=1200)
            assert out.returncode == 0, (page.name, command, out.stdout[-2000:],
                                         out.stderr[-3000:])
            assert "Traceback" not in out.stderr, (page.name, command, out.stderr[-3000:])
            ran.append((command, out))
            _cut_test_files(workdir)
    return ReadmeRun(workdir, ran)
