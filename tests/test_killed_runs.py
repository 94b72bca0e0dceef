"""Killed runs (issue 20 items 7 and 9): the leftovers of a kill are removed
at the next start and nothing else, and a series of SIGKILLs, some during a
save, resumes each time and ends with an intact, decodable run (--slow).
"""

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import checkpoint_step
from tiny_runs import cli_popen, cli_subprocess, run_files, trainer_args


def test_leftovers_of_killed_runs_are_removed_and_nothing_else(trained_copy):
    from t2t_revival.export.version_directory import write_version_directory
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    made = ["ckpt-9_temp/part-00000-of-00001.data-00000-of-00001", "checkpoint.tmp1a2b3c",
            ".hparams.json.k2j3h4.incomplete", ".run.json.abcd_12.incomplete",
            "averaged/ckpt-2_temp/part"]
    kept = ["notes_temp/a", "my.incomplete", ".test.decodes.x1.incomplete", "ckpt-9_tempx"]
    for name in made + kept:
        path = trained_copy / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    before = run_files(trained_copy)
    lines = []
    removed = TrainingDirectory(trained_copy).clean_leftovers(lines.append)
    assert sorted(os.path.relpath(p, trained_copy) for p in removed) == \
        sorted(["ckpt-9_temp", "checkpoint.tmp1a2b3c", ".hparams.json.k2j3h4.incomplete",
                ".run.json.abcd_12.incomplete"])
    assert lines[0].startswith("Removed 4 leftover(s) of an interrupted run: ")
    gone = {os.path.relpath(p, trained_copy) for p in removed}
    assert run_files(trained_copy) == {k: v for k, v in before.items() if k.split("/")[0] not in gone}
    TrainingDirectory(trained_copy).clean_leftovers(lines.append, averaged=True)
    assert not (trained_copy / "averaged" / "ckpt-2_temp").exists()
    # Exports: a dead process's leftovers go at the next export, a live one's stay.
    export = trained_copy / "export"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # A replaced version that a kill left at its old name comes back when the
    # version itself is missing (`.V.old` where no swap in one step exists,
    # `.V.old<pid>` of earlier releases), and goes when it is there.
    for name in (f".5.incomplete{dead.pid}", f".5.old{dead.pid}", f".6.incomplete{os.getpid()}",
                 ".8.old", "8", ".9.old"):
        (export / name).mkdir(parents=True)
        (export / name / "from").write_text(name)
    said = []
    write_version_directory(str(export), 7, lambda tmp: os.makedirs(tmp), log=said.append)
    assert sorted(p.name for p in export.iterdir()) == \
        [f".6.incomplete{os.getpid()}", "5", "7", "8", "9"]
    assert said == [   # (through the caller's log: the CLIs print it to stderr)
        f"Removed {export}/.5.incomplete{dead.pid}, left by an interrupted export.",
        f"Put back {export}/5 from {export}/.5.old{dead.pid}, where an interrupted export "
        f"left it.",
        f"Removed {export}/.8.old, left by an interrupted export.",
        f"Put back {export}/9 from {export}/.9.old, where an interrupted export left it."]
    assert [(export / v / "from").read_text() for v in ("5", "8", "9")] == \
        [f".5.old{dead.pid}", "8", ".9.old"]
    # Re-exporting a version swaps the new one in whole, leaving nothing beside it.
    def write(tmp):
        os.makedirs(tmp)
        (pathlib.Path(tmp) / "from").write_text("new")
    write_version_directory(str(export), 8, write)
    assert (export / "8" / "from").read_text() == "new"
    assert sorted(p.name for p in export.iterdir()) == \
        [f".6.incomplete{os.getpid()}", "5", "7", "8", "9"]


def _saved_step(out):
    """The step of the newest intact checkpoint (what a rerun resumes from), or 0."""
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    latest = TrainingDirectory(out).checkpoints.latest() if out.exists() else None
    return int(latest.rsplit("-", 1)[1]) if latest else 0


@pytest.mark.slow
def test_kill_series_resumes_each_time_and_ends_sane(tiny_data, tmp_path):
    """4 SIGKILLs (2 of them during a save, 2 at a random moment) and one SIGTERM."""
    import tensorflow as tf

    from t2t_revival.models.trained_model import TrainedModel
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    rng = random.Random(20)
    out = tmp_path / "run"
    final = 40  # more than 5 runs of a few steps each reach
    args = trainer_args(tiny_data, out, final, "--save_checkpoints_steps=2",
                        "--log_step_count_steps=1", "--keep_checkpoint_max=5")
    during_save = 0
    for kill in range(5):
        before = _saved_step(out)
        # A save killed by the last kill leaves its ckpt-N_temp/ behind until
        # this run's start removes it: that one is not this run's save.
        stale = set(out.glob("ckpt-*_temp"))
        proc = cli_popen("trainer", *args)
        # Kills 0 and 2 land in a save (ckpt-N_temp/ appears); 1 and 3 at a
        # random moment after the run's first new checkpoint; 4 is a SIGTERM.
        wait_for_save = kill in (0, 2)
        deadline = time.time() + 120
        landed_in_save = False
        while time.time() < deadline and proc.poll() is None:
            temps = set(out.glob("ckpt-*_temp"))
            stale &= temps  # gone once the run has cleaned up
            if wait_for_save and temps and not stale:
                landed_in_save = True
                break
            if not wait_for_save and _saved_step(out) > before:
                time.sleep(rng.uniform(0.0, 0.6))
                break
            time.sleep(0.005 if wait_for_save else 0.05)
        assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
        proc.send_signal(signal.SIGTERM if kill == 4 else signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
        if before:  # this run resumed at the last saved step
            assert f"Resumed from {out / f'ckpt-{before}'} at step {before}." \
                in stdout.decode(), stdout.decode()[-3000:]
        during_save += landed_in_save
        if kill == 4:
            assert proc.returncode == 143, stderr.decode()[-3000:]
            assert "t2t-trainer: stopped by SIGTERM at step" in stderr.decode()
        saved = _saved_step(out)
        assert saved >= before
        if not saved:
            continue  # killed during the first save: the rerun starts afresh
        # The rerun resumes at the last saved step: the step its optimizer holds.
        assert checkpoint_step(out / f"ckpt-{saved}") == saved
    assert during_save >= 1
    result = cli_subprocess("trainer", *args)
    stdout = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert f"Resumed from {out / f'ckpt-{saved}'} at step {saved}." in stdout
    assert f"step {final}/{final}" in stdout
    directory = TrainingDirectory(out)
    checkpoints = directory.checkpoints.intact()
    assert checkpoints[-1] == str(out / f"ckpt-{final}")
    assert all(directory.checkpoints.problem(p) is None for p in checkpoints)
    assert not list(out.glob("*_temp")) and not list(out.glob(".*.incomplete"))
    TrainedModel.load(str(out))  # the final state decodes
