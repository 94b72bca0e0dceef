"""best/: a copy of the best checkpoint that outlives rotation, swapped in so
that a failure or a kill at any moment leaves a readable best/; the early
stopping rule; a checkpoint folder as --checkpoint_path."""

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time

import pytest

from best_checkpoints import assert_best_readable, best_record, write_checkpoint
from conftest import ENV
from t2t_revival.files import atomic_file
from t2t_revival.errors import UserError
from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.train.early_stopping import EarlyStopping


def test_best_is_a_copy_that_outlives_the_checkpoints_rotation(tmp_path):
    source = write_checkpoint(tmp_path / "run", 300)
    best = TrainingDirectory(tmp_path / "run").best
    assert best.record() is None and best.checkpoint_path() is None
    path = best.update(source, best_record(300, 21.5))
    assert path == str(tmp_path / "run" / "best" / "ckpt-300")
    for name in os.listdir(tmp_path / "run"):   # keep_checkpoint_max deletes the original
        if name.startswith("ckpt-300."):
            os.unlink(tmp_path / "run" / name)
    assert assert_best_readable(best) == 300
    assert json.loads((tmp_path / "run" / "best" / "best.json").read_text()) == {
        "step": 300, "metric": "bleu", "value": 21.5, "higher_is_better": True,
        "checkpoint": "ckpt-300", "sentences": 200}
    names = os.listdir(best.path)
    assert sorted(names) == sorted(["best.json", "checkpoint", "ckpt-300.index",
                                    "ckpt-300.data-00000-of-00001"]), names
    for name in names:   # readable by a serving container running as another user
        assert stat.S_IMODE(os.stat(os.path.join(best.path, name)).st_mode) == 0o644
    # A better one replaces it, and nothing is left beside it.
    best.update(write_checkpoint(tmp_path / "run", 400), best_record(400))
    assert assert_best_readable(best) == 400
    assert sorted(os.listdir(tmp_path / "run"))[:1] == ["best"]
    assert not [n for n in os.listdir(tmp_path / "run") if n.startswith(".")]
    assert not [n for n in os.listdir(best.path) if "300" in n]


def test_an_interrupted_best_update_is_cleaned_when_the_trainer_starts(tmp_path):
    """Issue 60 item 8: a kill during a best/ update left .best.incomplete (the
    size of a checkpoint) until the first evaluation; the trainer's start
    (`clean_leftovers`, on the chief) removes it and says so, best/ whole."""
    run = tmp_path / "run"
    best = TrainingDirectory(run).best
    best.update(write_checkpoint(run, 300), best_record(300))
    half = run / ".best.incomplete"   # a copy of ckpt-400 the kill cut short
    half.mkdir()
    (half / "ckpt-400.index").write_bytes(b"x" * 64)
    lines = []
    removed = TrainingDirectory(run).clean_leftovers(lines.append)
    assert removed == [str(half)] and not half.exists()
    assert lines == ["Removed 1 leftover(s) of an interrupted run: .best.incomplete."]
    assert assert_best_readable(best) == 300
    # A complete new folder whose swap was cut short (no best/ left) is put back.
    os.rename(best.path, half)
    assert TrainingDirectory(run).clean_leftovers(lines.append) == []
    assert assert_best_readable(best) == 300 and not half.exists()


def test_the_better_checkpoint_of_an_interrupted_update_reaches_best(tmp_path, monkeypatch):
    """Issue 60 item 8: a kill while best/ took a better checkpoint left best/
    at the older one for good (the resumed run does not evaluate that step
    again; the next evaluation only had to beat the older figure). The
    trainer's start finishes the copy from the training checkpoint, and says
    so; when that checkpoint is gone too, the leftover is removed."""
    import shutil

    run = tmp_path / "run"
    best = TrainingDirectory(run).best
    best.update(write_checkpoint(run, 300), best_record(300))
    new = write_checkpoint(run, 400)
    _fail_on_call(monkeypatch, shutil, "copyfile", 1)   # the kill: mid-copy
    with pytest.raises(KeyboardInterrupt):
        best.update(new, best_record(400))
    monkeypatch.undo()
    assert (run / ".best.incomplete").is_dir()
    lines = []
    assert TrainingDirectory(run).clean_leftovers(lines.append) == []
    assert lines == ["Finished the best/ update a kill interrupted: best/ holds dev bleu "
                     "400.00 at step 400."]
    assert assert_best_readable(best) == 400
    assert not [n for n in os.listdir(run) if n.startswith(".")]
    # A worse figure does not replace it; a better one does.
    assert not best_record(500, 399).supersedes(best.record())
    assert best_record(500, 401).supersedes(best.record())
    # The same kill, then keep_checkpoint_max rotates ckpt-500 away before the
    # next start: nothing to copy, so best/ stays at 400 and the leftover goes.
    _fail_on_call(monkeypatch, shutil, "copyfile", 1)
    with pytest.raises(KeyboardInterrupt):
        best.update(write_checkpoint(run, 500), best_record(500))
    monkeypatch.undo()
    for name in os.listdir(run):
        if name.startswith("ckpt-500."):
            os.unlink(run / name)
    lines = []
    assert TrainingDirectory(run).clean_leftovers(lines.append) == [str(run / ".best.incomplete")]
    assert lines == ["Removed 1 leftover(s) of an interrupted run: .best.incomplete."]
    assert assert_best_readable(best) == 400


def test_the_best_folder_is_a_checkpoint_path_for_the_decoder_and_exporters(tmp_path):
    best = BestCheckpoint(str(tmp_path))
    best.update(write_checkpoint(tmp_path, 7), best_record(7))
    folder = TrainingDirectory(tmp_path).checkpoints
    assert folder.find(best.path) == os.path.join(best.path, "ckpt-7")
    assert folder.find(best.path + "/") == os.path.join(best.path, "ckpt-7")
    assert folder.find(os.path.join(best.path, "ckpt-7")).endswith("best/ckpt-7")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no checkpoint in the folder .*empty"):
        folder.find(str(tmp_path / "empty"))


def _fail_on_call(monkeypatch, owner, name, call):
    """Make `owner.name` raise on its `call`-th call (1-based)."""
    original = getattr(owner, name)
    calls = [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            raise KeyboardInterrupt(f"killed in {name} call {call}")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


# Each step of an update where it can be interrupted: (what fails, which call,
# whether the system swaps folders in one step).
FAILURES = {
    "writing the pending record": ("atomic", "write_atomically", 1, True),
    "copying the data": ("shutil", "copyfile", 2, True),
    "writing the checkpoint index": ("atomic", "write_atomically", 2, True),
    "renaming the record best.json": ("os", "replace", 3, True),
    "swapping": ("atomic", "exchange_paths", 1, True),
    "removing the old folder": ("shutil", "rmtree", 2, True),
    # (os.replace calls 1 and 2 are the atomic writes of the pending record and
    # the index, 3 the record's rename to best.json.)
    "moving the old folder aside (no renameat2)": ("os", "replace", 4, False),
    "moving the new folder in (no renameat2)": ("os", "replace", 5, False),
    "removing the old folder (no renameat2)": ("shutil", "rmtree", 3, False),
}


@pytest.mark.parametrize("where", list(FAILURES))
def test_a_kill_at_each_step_of_an_update_leaves_a_readable_best(tmp_path, monkeypatch,
                                                                  where):
    import shutil

    from t2t_revival.run_dir import best_checkpoint

    best = BestCheckpoint(str(tmp_path))
    best.update(write_checkpoint(tmp_path, 1), best_record(1))
    new = write_checkpoint(tmp_path, 2)
    module, name, call, exchange = FAILURES[where]
    if not exchange:
        # A system without renameat2: the swap in one step is not available.
        monkeypatch.setattr(atomic_file, "exchange_paths", lambda a, b: False)
    owner = {"shutil": shutil, "os": os, "atomic": atomic_file}[module]
    if module == "atomic" and name == "write_atomically":
        owner = best_checkpoint
    _fail_on_call(monkeypatch, owner, name, call)
    with pytest.raises(KeyboardInterrupt):
        best.update(new, best_record(2))
    monkeypatch.undo()
    if exchange:   # best/ is never missing nor partial, even before recover()
        assert assert_best_readable(best) in (1, 2)
    best.recover()   # the trainer's next start
    # Issue 60 item 8: the better checkpoint the update was copying is not
    # lost (it used to be, in all but the last steps): recover finishes it.
    assert assert_best_readable(best) == (1 if where == "writing the pending record" else 2)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["best", "ckpt-1.index", "ckpt-1.data-00000-of-00001",
         "ckpt-2.index", "ckpt-2.data-00000-of-00001"])
    best.update(new, best_record(2))   # and the next update works
    assert assert_best_readable(best) == 2


_UPDATER = """
import sys
from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
from t2t_revival.run_dir.best_record import BestRecord
out, steps, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
best = BestCheckpoint(out)
print("ready", flush=True)
i = first
while True:
    step = i % steps + 1
    best.update(f"{out}/ckpt-{step}", BestRecord(step=step, metric="bleu", value=float(i),
                higher_is_better=True, checkpoint=f"ckpt-{step}"))
    print("updated", flush=True)
    i += 1
"""


def test_sigkill_during_best_updates_leaves_a_readable_best(tmp_path):
    steps = 3
    for step in range(1, steps + 1):
        write_checkpoint(tmp_path, step, size=1 << 20)   # 4 MB: a copy takes a while
    best = BestCheckpoint(str(tmp_path))
    rng = random.Random(0)
    held = set()
    for kill in range(6):
        # Each updater starts on another checkpoint (kill % steps + 1) and
        # finishes one update before the kill can come, so the kills land in
        # different updates however slow the disk is (CI's once took so long
        # to copy that all six landed in each updater's second update).
        proc = subprocess.Popen([sys.executable, "-c", _UPDATER, str(tmp_path), str(steps),
                                 str(kill)], env=ENV, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        assert proc.stdout.readline().strip() == "updated"
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if os.path.isdir(best.path):   # renameat2 swaps: readable even before recover
            held.add(assert_best_readable(best))
        best.recover()
        held.add(assert_best_readable(best))
        assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    assert len(held) > 1   # the kills landed in different updates


def test_early_stopping_counts_evaluations_without_a_strict_improvement():
    stopping = EarlyStopping(patience=2)
    assert stopping.update(best_record(100, 10.0))
    assert not stopping.update(best_record(200, 10.0))   # equal is no improvement
    assert not stopping.should_stop
    assert stopping.update(best_record(300, 12.0))       # the count starts again
    assert not stopping.update(best_record(400, 11.0))
    assert not stopping.update(best_record(500, float("nan")))
    assert stopping.should_stop and stopping.best.step == 300
    assert stopping.reason() == ("dev bleu did not improve for 2 evaluations "
                                 "(--eval_early_stopping_evals=2); the best is dev bleu "
                                 "12.00 at step 300")
    # Dev loss: lower is better. Patience 0 never stops.
    loss = EarlyStopping(patience=0, best=best_record(100, 3.0, "loss"))
    assert not loss.update(best_record(200, 3.5, "loss"))
    assert loss.update(best_record(300, 2.5, "loss"))
    for step in range(400, 1400, 100):
        loss.update(best_record(step, 9.0, "loss"))
    assert not loss.should_stop
    # A best ranked by another figure (a resumed run with decoding turned on)
    # is not compared: the first new figure replaces it.
    assert loss.update(best_record(1500, 0.5, "bleu"))
