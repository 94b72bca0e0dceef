"""What a resume or a warm start checks before it writes (issue 20 item 4,
issue 60 items 4 and 8): the vocabulary, the hparams and the architecture
of the run it continues, best/ as a kill left it, exports done once, and
the run's lock against a second trainer.

Each refusal is one line and leaves the run's files byte-identical
(`tiny_runs.run_files`, the `.lock` file apart). The runs are copies of the
session's `tiny_trained` (ckpt-1 to ckpt-3).
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, one_line_error, run_cli
from tiny_runs import (LOCK, PROBLEM, TINY_HPARAMS, TinyMulti30k, cli_subprocess, digests,
                       run_files, trainer_args)


def test_resume_refuses_a_vocabulary_that_differs_by_content(trained_copy, tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    vocab = TinyMulti30k().vocab_file(str(data))
    with open(vocab, "ab") as f:
        f.write(b"\x00")  # same name, other bytes
    before = run_files(trained_copy)
    result = run_cli("trainer", *trainer_args(data, trained_copy, 5))
    one_line_error(result, "t2t-trainer", f"the vocabulary {vocab} differs from "
                                          f"{trained_copy / 'vocab.model'}",
                   f"resume with the --data_dir they were trained on ({tiny_data})")
    assert run_files(trained_copy) == before


def test_training_refuses_a_vocabulary_larger_than_the_model(tiny_data, tmp_path,
                                                             monkeypatch):
    """A data_dir made while the problem had a larger vocab_size (its vocabulary
    has 300 pieces; the problem now says 290) is refused before any step."""
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.errors import UserError
    from t2t_revival.problems.translate_multi30k import TranslateEndeMulti30k
    from t2t_revival.train.trainer import Trainer

    monkeypatch.setattr(TranslateEndeMulti30k, "vocab_size", 290)
    out = tmp_path / "run"
    config = resolve_train_config(problem=PROBLEM, hparams_set="transformer_tiny",
                                  hparams=TINY_HPARAMS, data_dir=str(tiny_data),
                                  output_dir=str(out), train_steps=1, xla=False)
    trainer = Trainer(config, log=lambda *a: None)
    assert trainer.hparams.vocab_size == 290
    vocab = TinyMulti30k().vocab_file(str(tiny_data))
    with pytest.raises(UserError, match=(
            f"the vocabulary {vocab} has 300 pieces, more than the model's 290 embedding "
            f"rows .*pass --hparams=vocab_size=300")):
        trainer.train()
    assert not glob.glob(str(out / "ckpt-*")) and not (out / "hparams.json").exists()


def test_a_resume_with_other_hparams_is_refused_and_rewrites_nothing(trained_copy, tiny_data):
    before = run_files(trained_copy)
    args = [a.replace("--hparams=", "--hparams=learning_rate=1.5,")
            for a in trainer_args(tiny_data, trained_copy, 5)]
    one_line_error(run_cli("trainer", *args), "t2t-trainer",
                   f"{trained_copy} holds a run with other hparams (learning_rate: saved 2.0, "
                   f"now 1.5); rerun with the same --hparams_set/--hparams to resume")
    assert run_files(trained_copy) == before


def test_a_failed_resume_rewrites_nothing(trained_copy, tiny_data):
    os.remove(trained_copy / "hparams.json")  # the resume cannot compare the hparams first
    before = run_files(trained_copy)
    other = TINY_HPARAMS.replace("d_model=16", "d_model=32")
    args = [a if not a.startswith("--hparams=") else f"--hparams={other}"
            for a in trainer_args(tiny_data, trained_copy, 5)]
    result = run_cli("trainer", *args)
    one_line_error(result, "t2t-trainer", f"the checkpoint {trained_copy / 'ckpt-3'} holds a "
                                          f"model of other hparams",
                   "hparams.json, which records them, is missing")
    assert run_files(trained_copy) == before
    assert not (trained_copy / "hparams.json").exists()


def test_warm_start_refuses_another_architecture_even_where_the_shapes_fit(tiny_trained, tiny_data,
                                                                           tmp_path):
    """Issue 60 item 4: 4 heads of d_model 16 fit a 2-head run's variables, but
    they are another model; the source run's hparams.json says so."""
    before = run_files(tiny_trained)
    other = TINY_HPARAMS.replace("num_heads=2", "num_heads=4")
    args = [a if not a.startswith("--hparams=") else f"--hparams={other}"
            for a in trainer_args(tiny_data, tmp_path / "warm", 1,
                                  f"--warm_start_from={tiny_trained}")]
    one_line_error(run_cli("trainer", *args), "t2t-trainer",
                   f"the --warm_start_from run {tiny_trained} has another architecture",
                   "num_heads 2 there and 4 here")
    assert run_files(tiny_trained) == before
    assert not (tmp_path / "warm" / "ckpt-1.index").exists()


def test_a_damaged_vocabulary_copy_says_to_copy_it_back_not_to_pass_the_same_data_dir(
        trained_copy, tiny_data):
    """Issue 60 item 8: the data_dir given is the run's own; its copy is what is damaged."""
    (trained_copy / "vocab.model").write_bytes(b"not a vocabulary")
    before = run_files(trained_copy)
    line = one_line_error(run_cli("trainer", *trainer_args(tiny_data, trained_copy, 5)),
                          "t2t-trainer", f"the run's copy of its vocabulary "
                                         f"{trained_copy / 'vocab.model'} is damaged",
                          f"copy {tiny_data}")
    assert "resume with the --data_dir" not in line, line
    assert run_files(trained_copy) == before


def test_a_resumed_run_finishes_an_interrupted_best_update(trained_copy, tiny_data, fake_updates,
                                                         monkeypatch):
    """Issue 60 item 8: a kill while best/ took the better ckpt-3 (over an
    older ckpt-2) left .best.incomplete until the first evaluation, and
    ckpt-3 never reached best/. The resumed run's start finishes the copy and
    says so; its evaluation then has to beat ckpt-3's figure to replace it."""
    import json
    import shutil as shutil_module

    from t2t_revival.run_dir.best_record import BestRecord
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    best = TrainingDirectory(trained_copy).best
    record3 = best.record()
    assert record3.step == 3 and record3.metric == "loss"
    best.update(str(trained_copy / "ckpt-2"), BestRecord(
        step=2, metric="loss", value=record3.value + 1.0, higher_is_better=False,
        checkpoint="ckpt-2"))
    copyfile = shutil_module.copyfile

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("the kill, mid-copy")
    monkeypatch.setattr(shutil_module, "copyfile", killed)
    with pytest.raises(KeyboardInterrupt):
        best.update(str(trained_copy / "ckpt-3"), record3)
    monkeypatch.setattr(shutil_module, "copyfile", copyfile)
    assert (trained_copy / ".best.incomplete").is_dir() and best.record().step == 2
    result = run_cli("trainer", *trainer_args(tiny_data, trained_copy, 5))
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert f"Finished the best/ update a kill interrupted: best/ holds " \
           f"{record3.describe()}." in output, output[-3000:]
    assert f"best/ holds {record3.describe()}." in output
    assert not (trained_copy / ".best.incomplete").exists()
    final = json.loads((trained_copy / "best" / "best.json").read_text())
    loss5 = float(re.search(r"eval at step 5: loss ([\d.]+)", result.stdout).group(1))
    assert final["step"] == (5 if loss5 < round(record3.value, 4) else 3), (final, loss5)


def test_export_on_best_does_not_export_a_version_again_at_the_end(trained_copy, tiny_data):
    """Issue 60 item 8: the end of a run said "Exported ... export/5" a second
    time for the version --export_on_best had just written; a rerun said it
    exported a version an earlier run wrote (which may hold another
    checkpoint of that step, an average). Each version is exported once, and
    the end says which it kept."""
    args = trainer_args(tiny_data, trained_copy, 5, "--export_ctranslate2", "--export_on_best")
    result = run_cli("trainer", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    best, version = trained_copy / "best" / "ckpt-5", trained_copy / "export" / "ctranslate2" / "5"
    assert f"New best: dev loss" in result.stdout and "at step 5" in result.stdout
    exported = f"Exported the CTranslate2 model to {version} (from {best})."
    assert result.stdout.count("Exported the") == 1 and exported in result.stdout, \
        result.stdout[-2000:]
    assert result.stdout.rstrip().endswith(
        f"The CTranslate2 model of {best} is {version}, exported when it was found "
        f"(--export_on_best)."), result.stdout[-2000:]
    before = digests(version)
    again = run_cli("trainer", *args)   # the same command: the run is done
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Exported the" not in again.stdout, again.stdout[-2000:]
    assert again.stdout.rstrip().endswith(
        f"Kept the CTranslate2 model {version}, exported before this run (t2t-exporter "
        f"--output_dir={trained_copy} --checkpoint_path={best} --format=ctranslate2 exports "
        f"it again)."), again.stdout[-2000:]
    assert digests(version) == before


def test_a_second_trainer_is_refused_while_the_first_lives(trained_copy, tiny_data):
    from t2t_revival.run_dir.run_lock import RunLock

    before = run_files(trained_copy)
    with RunLock(str(trained_copy)):
        result = cli_subprocess("trainer", *trainer_args(tiny_data, trained_copy, 5))
    one_line_error(result, "t2t-trainer", f"{trained_copy} is in use by another t2t-trainer "
                                          f"(pid {os.getpid()} on")
    assert run_files(trained_copy) == before


def test_a_killed_holder_leaves_no_stuck_lock(tmp_path):
    from t2t_revival.errors import UserError
    from t2t_revival.run_dir.run_lock import RunLock

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
         "from t2t_revival.run_dir.run_lock import RunLock; "
         "RunLock(sys.argv[2]).acquire(); print('held', flush=True); time.sleep(600)",
         str(ROOT), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(UserError, match=f"pid {holder.pid} on"):
        RunLock(str(tmp_path)).acquire()
    holder.kill()
    holder.wait()
    lock = RunLock(str(tmp_path)).acquire()  # the OS released it at the holder's death
    assert (tmp_path / LOCK).read_text().startswith(f"pid {os.getpid()} on ")
    lock.release()
