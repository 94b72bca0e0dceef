"""Faults of the training directory (issue 20 items 4-9): the lock, signals,
damaged checkpoints, full disks, leftovers of killed runs, corrupt records
skipped, decode settings out of range, and the kill series (--slow).

Each case asserts one line, the exit status and, where files were written
before, that they are byte-identical afterwards (the `.lock` file, which
records the last holder's pid, apart). The CLIs run in this process
(`run_cli`) where their output is the subject, as subprocesses where the
process is (signals, kills, a closed pipe or terminal, a lock another
process holds).
"""

import errno
import glob
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import (ROOT, checkpoint_step, one_line_error, run_cli,
                      stop_signals_at_their_defaults)
from full_disk import NO_SPACE
from t2t_revival.hparams import HParams
from tiny_runs import PROBLEM, TINY_HPARAMS, TinyMulti30k, cli_subprocess, digests, trainer_args

LOCK = ".lock"


def _files(directory):
    """`digests` without the lock file."""
    return {k: v for k, v in digests(directory).items() if os.path.basename(k) != LOCK}


def _popen(module, *args, stdin=subprocess.DEVNULL, unbuffered=True):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    if unbuffered:   # a killed run's lines are not lost in a buffer
        env["PYTHONUNBUFFERED"] = "1"
    else:   # as a user's pipe: Python writes its stdout in blocks of 8 KiB
        env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen([sys.executable, "-m", f"t2t_revival.cli.{module}", *args],
                            stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


@pytest.fixture(scope="module")
def run3(tiny_data, tmp_path_factory):
    """A training directory with checkpoints at steps 1, 2 and 3."""
    out = tmp_path_factory.mktemp("run3") / "run"
    result = run_cli("trainer", *trainer_args(tiny_data, out, 3, "--save_checkpoints_steps=1"))
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture
def run_copy(run3, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run3, copy)
    return copy


def _data_file(prefix):
    return f"{prefix}.data-00000-of-00001"


def _truncate_data(run):
    os.truncate(_data_file(run / "ckpt-3"), 1000)
    return "its .data file is truncated (1000 of at least"


def _flip_data_byte(run):
    path = _data_file(run / "ckpt-3")
    with open(path, "r+b") as f:
        f.seek(50000)
        byte = f.read(1)
        f.seek(50000)
        f.write(bytes([byte[0] ^ 0xFF]))
    return "its files are damaged (DataLossError"


def _truncate_index_file(run):
    os.truncate(run / "ckpt-3.index", 100)
    return "its .index file is unreadable"


def _delete_latest(run):
    for suffix in (".index", ".data-00000-of-00001"):
        os.remove(f"{run / 'ckpt-3'}{suffix}")
    return "its .index file is missing"


def _garbage_index(run):
    (run / "checkpoint").write_bytes(b"\x00\x01 not an index {{{")
    _truncate_data(run)
    return "The checkpoint index"


def _empty_index(run):
    (run / "checkpoint").write_bytes(b"")
    _truncate_data(run)
    return "The checkpoint index"


DAMAGES = [_truncate_data, _flip_data_byte, _truncate_index_file, _delete_latest,
           _garbage_index, _empty_index]


# ---------------------------------------------------------------------------
# Resume from the newest intact checkpoint (item 6)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_readers_use_the_newest_intact_checkpoint_saying_what_they_skipped(damage, run_copy):
    from t2t_revival.models.trained_model import TrainedModel
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    reason = damage(run_copy)
    lines = []
    trained = TrainedModel.load(str(run_copy), log=lines.append)
    assert trained.checkpoint_path == str(run_copy / "ckpt-2")
    assert any(reason in line for line in lines), lines
    if damage not in (_garbage_index, _empty_index):
        assert lines == [f"Skipping the checkpoint {run_copy / 'ckpt-3'}: {lines[0].split(': ', 1)[1]}"]
    if damage is _flip_data_byte:
        return  # found only when read: test_averaging_skips_a_damaged_checkpoint
    # Averaging when no checkpoint is named: the intact ones only.
    lines.clear()
    assert TrainingDirectory(run_copy).checkpoints.intact(log=lines.append)[-1] == \
        str(run_copy / "ckpt-2")


@pytest.mark.parametrize("damage", [_truncate_data, _flip_data_byte], ids=lambda f: f.__name__)
def test_a_named_damaged_checkpoint_is_one_clear_error(damage, run_copy):
    reason = damage(run_copy)
    before = _files(run_copy)
    result = run_cli("decoder", f"--output_dir={run_copy}", "--decode_interactive",
                     f"--checkpoint_path={run_copy / 'ckpt-3'}", stdin="ein mann\n")
    one_line_error(result, "t2t-decoder", f"the checkpoint {run_copy / 'ckpt-3'}", reason,
                   "leave it out to use the newest intact checkpoint")
    assert _files(run_copy) == before


def test_decoder_without_a_checkpoint_named_falls_back_and_says_so(run_copy):
    _truncate_data(run_copy)
    result = run_cli("decoder", f"--output_dir={run_copy}", "--decode_interactive",
                     stdin="ein mann\n")
    stderr = result.stderr
    assert result.returncode == 0, stderr[-3000:]
    skipped = [l for l in stderr.splitlines() if l.startswith("Skipping the checkpoint")]
    assert len(skipped) == 1 and "ckpt-3: its .data file is truncated" in skipped[0]
    assert f"Decoding with {run_copy / 'ckpt-2'}" in stderr
    assert len(result.stdout.splitlines()) == 1


def test_averaging_skips_a_damaged_checkpoint(run_copy):
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    _flip_data_byte(run_copy)  # found only when read: a checksum error
    lines = []
    with pytest.raises(Exception) as error:
        TrainingDirectory(run_copy).average_last(build_model, 3, log=lines.append)
    assert "ckpt-3 cannot be restored: its files are damaged (DataLossError" in str(error.value)
    _truncate_data(run_copy)  # found before reading: skipped
    lines.clear()
    path = TrainingDirectory(run_copy).average_last(build_model, 3, log=lines.append)
    assert path == str(run_copy / "averaged" / "ckpt-2")
    assert lines[0].startswith(f"Skipping the checkpoint {run_copy / 'ckpt-3'}: its .data")
    assert f"read {run_copy / 'ckpt-1'}" in lines and f"read {run_copy / 'ckpt-2'}" in lines


def test_trainer_resumes_from_the_newest_intact_checkpoint_and_repairs_the_index(
        run_copy, tiny_data):
    import tensorflow as tf

    _garbage_index(run_copy)  # and ckpt-3's data truncated
    result = run_cli("trainer", *trainer_args(tiny_data, run_copy, 4,
                                              "--save_checkpoints_steps=1"))
    stdout = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"The checkpoint index {run_copy / 'checkpoint'} is unreadable" in stdout
    assert f"Skipping the checkpoint {run_copy / 'ckpt-3'}: its .data file is truncated" \
        in stdout
    assert f"Resumed from {run_copy / 'ckpt-2'} at step 2." in stdout
    state = tf.train.get_checkpoint_state(str(run_copy))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == \
        ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]
    assert checkpoint_step(run_copy / "ckpt-3") == 3  # rewritten, intact


# ---------------------------------------------------------------------------
# The run directory is protected (item 4)
# ---------------------------------------------------------------------------

def test_resume_refuses_a_vocabulary_that_differs_by_content(run_copy, tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    vocab = TinyMulti30k().vocab_file(str(data))
    with open(vocab, "ab") as f:
        f.write(b"\x00")  # same name, other bytes
    before = _files(run_copy)
    result = run_cli("trainer", *trainer_args(data, run_copy, 5))
    one_line_error(result, "t2t-trainer", f"the vocabulary {vocab} differs from "
                                          f"{run_copy / 'vocab.model'}",
                   f"resume with the --data_dir they were trained on ({tiny_data})")
    assert _files(run_copy) == before


def test_training_refuses_a_vocabulary_larger_than_the_model(tiny_data, tmp_path,
                                                             monkeypatch):
    """A data_dir made while the problem had a larger vocab_size (its vocabulary
    has 300 pieces; the problem now says 290) is refused before any step."""
    from t2t_revival.config_resolution import resolve_train_config
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


def test_a_resume_with_other_hparams_is_refused_and_rewrites_nothing(run_copy, tiny_data):
    before = _files(run_copy)
    args = [a.replace("--hparams=", "--hparams=learning_rate=1.5,")
            for a in trainer_args(tiny_data, run_copy, 5)]
    one_line_error(run_cli("trainer", *args), "t2t-trainer",
                   f"{run_copy} holds a run with other hparams (learning_rate: saved 2.0, "
                   f"now 1.5); rerun with the same --hparams_set/--hparams to resume")
    assert _files(run_copy) == before


def test_a_failed_resume_rewrites_nothing(run_copy, tiny_data):
    os.remove(run_copy / "hparams.json")  # the resume cannot compare the hparams first
    before = _files(run_copy)
    other = TINY_HPARAMS.replace("d_model=16", "d_model=32")
    args = [a if not a.startswith("--hparams=") else f"--hparams={other}"
            for a in trainer_args(tiny_data, run_copy, 5)]
    result = run_cli("trainer", *args)
    one_line_error(result, "t2t-trainer", f"the checkpoint {run_copy / 'ckpt-3'} holds a "
                                          f"model of other hparams",
                   "hparams.json, which records them, is missing")
    assert _files(run_copy) == before
    assert not (run_copy / "hparams.json").exists()


def test_warm_start_refuses_another_architecture_even_where_the_shapes_fit(run3, tiny_data,
                                                                           tmp_path):
    """Issue 60 item 4: 4 heads of d_model 16 fit a 2-head run's variables, but
    they are another model; the source run's hparams.json says so."""
    before = _files(run3)
    other = TINY_HPARAMS.replace("num_heads=2", "num_heads=4")
    args = [a if not a.startswith("--hparams=") else f"--hparams={other}"
            for a in trainer_args(tiny_data, tmp_path / "warm", 1,
                                  f"--warm_start_from={run3}")]
    one_line_error(run_cli("trainer", *args), "t2t-trainer",
                   f"the --warm_start_from run {run3} has another architecture",
                   "num_heads 2 there and 4 here")
    assert _files(run3) == before
    assert not (tmp_path / "warm" / "ckpt-1.index").exists()


def test_a_decode_the_disk_refuses_stops_at_once_and_a_rerun_continues(run3, tmp_path,
                                                                        monkeypatch):
    """Issue 60 item 7: the decoder writes each batch as it goes to
    <decode_to_file>.partial; the first write the disk refuses stops it in one
    line that says what it needs, the file already there unchanged and the
    lines decoded kept; the same command, rerun, decodes only the rest."""
    import builtins

    from full_disk import disk_full_after

    sources = tmp_path / "src.en"
    sources.write_text("".join(f"{' '.join(['ein', 'mann', 'hund'][:1 + i % 3])} "
                               f"{'rot ' * (i % 7)}\n" for i in range(200)))
    flags = [f"--output_dir={run3}", f"--decode_from_file={sources}",
             "--decode_hparams=batch_size=4,parallel_batches=1,return_beams=true,beam_size=4"]
    reference = tmp_path / "reference.de"
    assert run_cli("decoder", *flags, f"--decode_to_file={reference}").returncode == 0
    out = tmp_path / "hyp.de"
    out.write_text("an earlier decode\n")
    disk_full_after(monkeypatch, builtins, room=len(reference.read_bytes()) // 2,
                    suffix=(".partial", ".incomplete"))
    line = one_line_error(run_cli("decoder", *flags, f"--decode_to_file={out}"),
                          "t2t-decoder", f"could not write {out}.partial ({NO_SPACE})",
                          "rerun the same command")
    kept = int(line.split(" of 200 lines")[0].rsplit(" ", 1)[1])
    assert 0 < kept < 200, (line, len(reference.read_bytes()))
    monkeypatch.undo()
    assert out.read_text() == "an earlier decode\n"
    rerun = run_cli("decoder", *flags, f"--decode_to_file={out}")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{kept} of 200 lines decoded before" in rerun.stderr, rerun.stderr[-3000:]
    assert out.read_bytes() == reference.read_bytes()
    assert not (tmp_path / "hyp.de.partial").exists()


def test_sampling_draws_its_samples_in_chunks_of_bounded_rows(run3, tmp_path, monkeypatch):
    """Issue 60 item 6: samples_per_input rows are not one search call: the samples
    are drawn in chunks that fit `SEARCH_BYTES`, every one kept, best first."""
    from t2t_revival.decode import decoder as decoder_module
    from t2t_revival.decode import search_memory

    hparams = HParams.load(str(run3 / "hparams.json"))
    length = 64   # more than any of these lines decodes
    monkeypatch.setattr(search_memory, "SEARCH_BYTES",
                        3 * 7 * search_memory.row_bytes(hparams, length))
    drawn = []
    real = decoder_module.sample_search

    def counted(*args, **kwargs):
        drawn.append(kwargs["samples_per_input"])
        return real(*args, **kwargs)

    monkeypatch.setattr(decoder_module, "sample_search", counted)
    sources = tmp_path / "src.en"
    sources.write_text("ein mann\nder hund\nrot\n")
    out = tmp_path / "samples.de"
    result = run_cli("decoder", f"--output_dir={run3}", f"--decode_from_file={sources}",
                     f"--decode_to_file={out}",
                     "--decode_hparams=sampling=true,samples_per_input=50,return_beams=true,"
                     "extra_length=8,temperature=3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert drawn and max(drawn) <= 7, drawn
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]   # (a sample may spell \x85)
    assert len(lines) == 3 and all(len(line.split("\t")) == 50 for line in lines), lines


def test_a_sampling_setting_that_cannot_fit_is_refused_before_the_model_loads(run3, tmp_path):
    sources = tmp_path / "src.en"
    sources.write_text("ein mann\nder hund\nrot\n")
    result = run_cli("decoder", f"--output_dir={run3}", f"--decode_from_file={sources}",
                     "--decode_hparams=sampling=true,samples_per_input=1000000000,return_beams=true")
    one_line_error(result, "t2t-decoder", "decoding would need about",
                   "return_beams keeps all 1000000000 samples of each of the 3 lines",
                   "Received: samples_per_input=1000000000, return_beams=true")
    assert "Decoding with" not in result.stderr
    assert not list(tmp_path.glob("src.en.*"))


def test_a_damaged_vocabulary_copy_says_to_copy_it_back_not_to_pass_the_same_data_dir(
        run_copy, tiny_data):
    """Issue 60 item 8: the data_dir given is the run's own; its copy is what is damaged."""
    (run_copy / "vocab.model").write_bytes(b"not a vocabulary")
    before = _files(run_copy)
    line = one_line_error(run_cli("trainer", *trainer_args(tiny_data, run_copy, 5)),
                          "t2t-trainer", f"the run's copy of its vocabulary "
                                         f"{run_copy / 'vocab.model'} is damaged",
                          f"copy {tiny_data}")
    assert "resume with the --data_dir" not in line, line
    assert _files(run_copy) == before


def test_a_damaged_warm_start_checkpoint_names_warm_start_from(run_copy, tiny_data, tmp_path):
    """Issue 60 item 8: not --checkpoint_path, which the trainer does not have."""
    _truncate_data(run_copy)
    line = one_line_error(
        run_cli("trainer", *trainer_args(tiny_data, tmp_path / "warm", 1,
                                         f"--warm_start_from={run_copy / 'ckpt-3'}")),
        "t2t-trainer", f"the --warm_start_from checkpoint {run_copy / 'ckpt-3'} cannot be "
                       f"read", "Received: warm_start_from=")
    assert "checkpoint_path" not in line, line


def test_no_intact_checkpoint_but_an_intact_best_says_so(run_copy, tiny_data):
    """Issue 60 item 8: "train again" is wrong advice while best/ holds an intact one."""
    for step in (1, 2, 3):
        os.truncate(_data_file(run_copy / f"ckpt-{step}"), 100)
    before = _files(run_copy)
    one_line_error(run_cli("trainer", *trainer_args(tiny_data, run_copy, 5)), "t2t-trainer",
                   "none of the 3 checkpoint(s)",
                   f"{run_copy / 'best'} holds an intact one, {run_copy / 'best' / 'ckpt-3'}",
                   f"--warm_start_from={run_copy / 'best' / 'ckpt-3'}")
    assert _files(run_copy) == before


def test_a_resumed_run_finishes_an_interrupted_best_update(run_copy, tiny_data, monkeypatch):
    """Issue 60 item 8: a kill while best/ took the better ckpt-3 (over an
    older ckpt-2) left .best.incomplete until the first evaluation, and
    ckpt-3 never reached best/. The resumed run's start finishes the copy and
    says so; its evaluation then has to beat ckpt-3's figure to replace it."""
    import json
    import shutil as shutil_module

    from t2t_revival.run_dir.best_record import BestRecord
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    best = TrainingDirectory(run_copy).best
    record3 = best.record()
    assert record3.step == 3 and record3.metric == "loss"
    best.update(str(run_copy / "ckpt-2"), BestRecord(
        step=2, metric="loss", value=record3.value + 1.0, higher_is_better=False,
        checkpoint="ckpt-2"))
    copyfile = shutil_module.copyfile

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("the kill, mid-copy")
    monkeypatch.setattr(shutil_module, "copyfile", killed)
    with pytest.raises(KeyboardInterrupt):
        best.update(str(run_copy / "ckpt-3"), record3)
    monkeypatch.setattr(shutil_module, "copyfile", copyfile)
    assert (run_copy / ".best.incomplete").is_dir() and best.record().step == 2
    result = run_cli("trainer", *trainer_args(tiny_data, run_copy, 5))
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert f"Finished the best/ update a kill interrupted: best/ holds " \
           f"{record3.describe()}." in output, output[-3000:]
    assert f"best/ holds {record3.describe()}." in output
    assert not (run_copy / ".best.incomplete").exists()
    final = json.loads((run_copy / "best" / "best.json").read_text())
    loss5 = float(re.search(r"eval at step 5: loss ([\d.]+)", result.stdout).group(1))
    assert final["step"] == (5 if loss5 < round(record3.value, 4) else 3), (final, loss5)


def test_export_on_best_does_not_export_a_version_again_at_the_end(run_copy, tiny_data):
    """Issue 60 item 8: the end of a run said "Exported ... export/5" a second
    time for the version --export_on_best had just written; a rerun said it
    exported a version an earlier run wrote (which may hold another
    checkpoint of that step, an average). Each version is exported once, and
    the end says which it kept."""
    args = trainer_args(tiny_data, run_copy, 5, "--export_ctranslate2", "--export_on_best")
    result = run_cli("trainer", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    best, version = run_copy / "best" / "ckpt-5", run_copy / "export" / "ctranslate2" / "5"
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
        f"--output_dir={run_copy} --checkpoint_path={best} --format=ctranslate2 exports "
        f"it again)."), again.stdout[-2000:]
    assert digests(version) == before


def test_a_second_trainer_is_refused_while_the_first_lives(run_copy, tiny_data):
    from t2t_revival.run_dir.run_lock import RunLock

    before = _files(run_copy)
    with RunLock(str(run_copy)):
        result = cli_subprocess("trainer", *trainer_args(tiny_data, run_copy, 5))
    one_line_error(result, "t2t-trainer", f"{run_copy} is in use by another t2t-trainer "
                                          f"(pid {os.getpid()} on")
    assert _files(run_copy) == before


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


# ---------------------------------------------------------------------------
# Signals save (item 5)
# ---------------------------------------------------------------------------

def _wait_for_line(proc, needle, timeout=240):
    """Read proc's stdout until a line holds `needle`; returns what was read."""
    seen = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    proc.kill()
    pytest.fail(f"no {needle!r} in the output: {''.join(seen)[-3000:]}")


def _with_closed(redirect, module, *args, timeout=240):
    """`python -m t2t_revival.cli.<module> ARGS` started with a standard stream
    closed (`redirect`: ">&-" stdout, "2>&-" stderr), as a cron job or a
    daemon may be; bytes out."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-m",
                           f"t2t_revival.cli.{module}", *args],
                          capture_output=True, env=env, timeout=timeout)


@pytest.mark.parametrize("redirect", [">&-", "2>&-", "<&- >&- 2>&-"])
def test_a_closed_standard_stream_is_reopened_on_dev_null_before_any_file(redirect,
                                                                          tmp_path):
    """Issue 60, item 5: importing the CLIs gives a closed stream /dev/null,
    so sys.stdout/stderr are streams and no file opened later takes the
    descriptor that TensorFlow's C++ logging writes to. t2t-bleu with stdout
    closed did its work, then ended in an AttributeError, exit 1."""
    probe = ("import sys, t2t_revival.cli\n"
             "f = open(sys.argv[1], 'w')\n"
             "assert f.fileno() > 2, f.fileno()\n"
             "print('out'); print('err', file=sys.stderr); sys.stdin.read()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-c",
                          probe, str(tmp_path / "file")], capture_output=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    text = tmp_path / "text.txt"
    text.write_text("a man runs\nthe red dog\n")
    out = _with_closed(redirect, "bleu", f"--translation={text}", f"--reference={text}")
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert b"Traceback" not in out.stderr + out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("redirect", [">&-", "2>&-"])
def test_closed_standard_streams_do_the_work_and_exit_with_its_status(redirect, run3,
                                                                       tmp_path):
    """Issue 60, item 5: with stdout closed the decoder and --registry_help
    did their work, then ended in an AttributeError (exit 1); with stderr
    closed every CLI that loads TensorFlow died while importing it, the
    decoder writing nothing. (About 40 s: three fresh processes a case.)"""
    source = tmp_path / "in.txt"
    source.write_text("a man runs\nthe red dog\nein haus\n")
    hyp = tmp_path / "hyp.txt"
    runs = [("decoder", [f"--output_dir={run3}", f"--decode_from_file={source}",
                         f"--decode_to_file={hyp}"]),
            ("trainer", ["--registry_help"])]
    for module, args in runs:
        out = _with_closed(redirect, module, *args)
        assert out.returncode == 0, (module, out.returncode, out.stderr.decode()[-3000:])
        assert b"Traceback" not in out.stderr + out.stdout, (module, out.stderr[-3000:])
    assert len(hyp.read_text().splitlines()) == 3


@pytest.mark.parametrize("signum, status, twice", [
    (signal.SIGTERM, 143, False), (signal.SIGINT, 130, True),
    (signal.SIGHUP, 129, False)])   # the terminal closed (a dropped ssh session)
def test_a_signal_saves_at_the_current_step_then_stops(signum, status, twice, tiny_data,
                                                       tmp_path):
    import tensorflow as tf

    out = tmp_path / "run"
    with stop_signals_at_their_defaults():   # as from a terminal
        proc = _popen("trainer", *trainer_args(tiny_data, out, 100000,
                                               "--save_checkpoints_steps=1000",
                                               "--log_step_count_steps=1"))
    _wait_for_line(proc, "step 3/100000")
    proc.send_signal(signum)
    if twice:  # a second Ctrl-C, while it saves
        time.sleep(0.05)
        proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    name = signal.Signals(signum).name
    stderr = stderr.decode()
    assert proc.returncode == status, stderr[-3000:]
    assert "Traceback" not in stderr
    lines = [l for l in stderr.splitlines() if l.startswith("t2t-trainer:")]
    assert len(lines) == 1, stderr[-3000:]
    line = lines[0]
    assert line.startswith(f"t2t-trainer: stopped by {name} at step "), line
    step = int(line.split(" at step ", 1)[1].split(";", 1)[0])
    assert step >= 3
    assert line.endswith(f"; checkpoint saved: {out / f'ckpt-{step}'}; rerun the same "
                         f"command to resume")
    assert tf.train.latest_checkpoint(str(out)) == str(out / f"ckpt-{step}")
    assert checkpoint_step(out / f"ckpt-{step}") == step
    assert not list(out.glob("*_temp"))


def test_a_closed_output_saves_at_the_current_step_then_stops(tiny_data, tmp_path):
    """`t2t-trainer ... | tee log` whose tee died: the next progress line
    cannot be written. The run saves at its step and stops, exit 141 (128 +
    SIGPIPE, as a shell tool whose reader went away), with one line on stderr.

    Each progress line reaches the pipe as it is printed (`| tee` shows it at
    once), so the reader's going away is noticed at the next one, not once a
    buffer of about 90 progress lines fills."""
    import tensorflow as tf

    out = tmp_path / "run"
    proc = _popen("trainer", *trainer_args(tiny_data, out, 100000,
                                           "--save_checkpoints_steps=1000",
                                           "--log_step_count_steps=1"), unbuffered=False)
    _wait_for_line(proc, "step 3/100000")
    proc.stdout.close()   # the reader goes away
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 141, stderr[-3000:]
    assert "Traceback" not in stderr
    lines = [l for l in stderr.splitlines() if l.startswith("t2t-trainer:")]
    assert len(lines) == 1, stderr[-3000:]
    line = lines[0]
    assert line.startswith("t2t-trainer: stopped: its output was closed (broken pipe) "
                           "at step "), line
    step = int(line.split(" at step ", 1)[1].split(";", 1)[0])
    assert 3 < step < 40   # (in blocks, step 3 came to the reader near step 90)
    assert line.endswith(f"; checkpoint saved: {out / f'ckpt-{step}'}; rerun the same "
                         f"command to resume")
    assert tf.train.latest_checkpoint(str(out)) == str(out / f"ckpt-{step}")
    assert not list(out.glob("*_temp"))


# Runs argv[2:] with the terminal argv[1] as its controlling terminal and its
# standard streams, as a login shell runs a command (the process is a session
# leader: the caller starts it in a new session).
_ON_TERMINAL = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)   # a session leader's first terminal becomes its own
for std in (0, 1, 2):
    os.dup2(fd, std)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def test_a_closed_terminal_saves_at_the_current_step_then_stops(tiny_data, tmp_path):
    """A dropped ssh session: the terminal hangs up (SIGHUP, and every later
    write to it fails with EIO). The run saves at its step and stops, 129."""
    import pty
    import select

    import tensorflow as tf

    out = tmp_path / "run"
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    with stop_signals_at_their_defaults():   # (not the nohup of a test run in the background)
        proc = subprocess.Popen(
            [sys.executable, "-c", _ON_TERMINAL, os.ttyname(slave), "-m",
             "t2t_revival.cli.trainer",
             *trainer_args(tiny_data, out, 100000, "--save_checkpoints_steps=1000",
                           "--log_step_count_steps=1")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=env)
    seen, deadline = b"", time.time() + 240
    try:
        # (The slave stays open here until the hang-up: reading a terminal
        # whose slave side nobody holds fails with EIO, before the run opens it.)
        while b"step 3/100000" not in seen and time.time() < deadline \
                and proc.poll() is None:
            if select.select([master], [], [], 1.0)[0]:
                seen += os.read(master, 65536)
        assert b"step 3/100000" in seen, seen.decode(errors="replace")[-3000:]
    finally:
        os.close(master)   # the hang-up
        os.close(slave)
    proc.wait(timeout=120)
    assert proc.returncode == 129
    latest = tf.train.latest_checkpoint(str(out))
    step = int(latest.rsplit("-", 1)[1])
    assert step >= 3
    assert checkpoint_step(latest) == step
    assert not list(out.glob("*_temp"))


def test_a_stop_signal_started_ignored_stays_ignored():
    """SIGHUP under `nohup`, SIGINT of a background job: neither the CLIs'
    handlers nor the trainer's install themselves over the ignore."""
    from t2t_revival.save_then_stop import SaveThenStop
    from t2t_revival.stop_controller import StopController
    from t2t_revival.stopped_by_signal import STOP_SIGNALS

    previous = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}
    try:
        StopController.process().install("t2t-test")
        with SaveThenStop():
            assert all(signal.getsignal(s) is signal.SIG_IGN for s in STOP_SIGNALS)
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in STOP_SIGNALS)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        StopController.process().install("t2t-test")   # a handler where it was not ignored
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_IGN, signal.SIG_DFL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_cli_stops_promptly_on_sigterm_during_start_up(run3):
    for delay in (0.5, 2.0):
        # Standard input stays open: the decoder waits at its prompt, where a
        # fast machine would get there in 2 s, instead of ending at its EOF.
        proc = _popen("decoder", f"--output_dir={run3}", "--decode_interactive",
                      stdin=subprocess.PIPE)
        time.sleep(delay)
        start = time.time()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert time.time() - start < 10
        assert proc.returncode == 143, stderr.decode()[-3000:]
        assert stderr.decode().strip().splitlines()[-1] == "t2t-decoder: stopped by SIGTERM"
        assert "Traceback" not in stderr.decode()


# A CLI whose main catches the stop signal's exception, prints its traceback
# and writes to file descriptor 2 (as importlib's module lock and C++
# libraries do when TensorFlow loads), then goes on: it returns 0 at once,
# or it works on ("wait", its first argument).
_CATCHES_AND_PRINTS = r"""
import os, signal, sys, time, traceback
from t2t_revival.cli import entry_point

def main(argv):
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)                        # the handler raises here
    except BaseException:
        traceback.print_exc()
        os.write(2, b"a C++ library's log line\n")
    if THEN == "wait":
        time.sleep(30)                        # the watchdog ends it
    return 0

THEN = sys.argv.pop(1)
entry_point.run(main, prog="t2t-test")
"""


@pytest.mark.parametrize("then", ["return", "wait"])
def test_a_stop_prints_its_line_only_even_where_the_signal_is_caught_and_printed(then):
    out = subprocess.run([sys.executable, "-c", _CATCHES_AND_PRINTS, then], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 143, out.stderr
    assert out.stderr == "t2t-test: stopped by SIGTERM\n"


# A CLI that is stopped while it imports a module, as t2t-decoder is while
# TensorFlow (and the jaxlib it imports) loads: the stop must not be raised
# into the module being imported (a C extension's init crashed with SIGSEGV
# or SIGABRT there), nor into the rest of main.
_STOPPED_IN_AN_IMPORT = r"""
import sys
from t2t_revival.cli import entry_point

sys.path.insert(0, sys.argv.pop(1))

def main(argv):
    import sends_itself_sigterm
    print("main went on after the import")
    return 0

entry_point.run(main, prog="t2t-test")
"""
_SENDS_ITSELF_SIGTERM = r"""
import os, signal, time
try:
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.time() + 10
    while time.time() < deadline:             # bytecodes: the handler runs here
        pass
except BaseException as e:
    print(f"the import saw {type(e).__name__}")
"""


def test_a_stop_inside_an_import_ends_the_process_there(tmp_path):
    (tmp_path / "sends_itself_sigterm.py").write_text(_SENDS_ITSELF_SIGTERM)
    out = subprocess.run([sys.executable, "-c", _STOPPED_IN_AN_IMPORT, str(tmp_path)],
                         capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 143, out.stderr
    assert out.stderr == "t2t-test: stopped by SIGTERM\n"
    assert out.stdout == ""


# A CLI stopped by the watchdog while it writes a file (`atomic_open`): its
# main thread never unwinds, so the stop itself removes the temporary file.
_STOPPED_WHILE_WRITING = r"""
import sys, time
from t2t_revival.atomic_file import atomic_open
from t2t_revival.cli import entry_point

PATH = sys.argv.pop(1)

def main(argv):
    with atomic_open(PATH) as f:
        f.write("half a file")
        f.flush()
        try:
            print("writing", flush=True)      # the signal comes after this line
            time.sleep(30)
        except BaseException:
            time.sleep(30)                    # stuck: the watchdog ends it
    return 0

entry_point.run(main, prog="t2t-test")
"""


@pytest.mark.parametrize("signum, stderr_closed", [
    (signal.SIGTERM, False),
    (signal.SIGHUP, False),    # the terminal closed
    (signal.SIGTERM, True)])   # and nobody reads stderr: the stop line cannot be written
def test_a_stop_that_cannot_unwind_removes_the_temporary_files_of_its_writes(
        signum, stderr_closed, tmp_path):
    target = tmp_path / "translations.txt"
    with stop_signals_at_their_defaults():
        proc = subprocess.Popen([sys.executable, "-c", _STOPPED_WHILE_WRITING, str(target)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
    stderr = None
    try:
        assert proc.stdout.readline() == "writing\n"
        assert len(list(tmp_path.iterdir())) == 1   # the temporary file
        if stderr_closed:
            proc.stderr.close()
        proc.send_signal(signum)
        if stderr_closed:
            proc.wait(timeout=30)
        else:
            _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, stderr
    if not stderr_closed:
        assert stderr == f"t2t-test: stopped by {signal.Signals(signum).name}\n"
    assert list(tmp_path.iterdir()) == []


# A CLI whose main thread is inside one long TensorFlow call (as t2t-decoder
# is inside a compiled search): Python cannot run the signal handler there.
_STUCK_IN_NATIVE_CODE = r"""
from t2t_revival.cli import entry_point

def main(argv):
    import tensorflow as tf

    @tf.function
    def spin(n):
        return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0, tf.int64)])

    print("spinning", flush=True)
    spin(tf.constant(10**13, tf.int64))       # hours
    return 0

entry_point.run(main, prog="t2t-test")
"""


def test_sigterm_stops_a_cli_inside_a_long_native_call():
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_IN_NATIVE_CODE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        assert proc.stdout.readline() == "spinning\n"
        time.sleep(1.0)   # inside the call
        start = time.time()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)   # it hung here before
    finally:
        proc.kill()
    assert time.time() - start < 10
    assert proc.returncode == 143, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "t2t-test: stopped by SIGTERM"
    assert stderr.count("stopped by SIGTERM") == 1 and "Traceback" not in stderr


# ---------------------------------------------------------------------------
# Full disk, read-only folder, leftovers of killed runs (item 7)
# ---------------------------------------------------------------------------

class _FailingManager:
    """A CheckpointManager whose save writes part of a checkpoint, then finds the disk full."""

    def __init__(self, directory, latest, error):
        self.directory, self.latest_checkpoint, self.error = str(directory), latest, error

    def save(self, checkpoint_number):
        temp = os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp")
        os.makedirs(temp)
        with open(os.path.join(temp, "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
            f.write(b"x" * 1000)
        with open(os.path.join(self.directory, f"ckpt-{checkpoint_number}.index"), "wb") as f:
            f.write(b"half")
        raise self.error


@pytest.mark.parametrize("kind", ["enospc_tf", "enospc_os", "read_only"])
def test_a_failed_save_keeps_the_previous_checkpoints_and_removes_its_own_files(
        kind, run_copy, monkeypatch):
    import tensorflow as tf

    from t2t_revival.errors import UserError
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    error = {"enospc_tf": tf.errors.ResourceExhaustedError(
                 None, None, "ckpt-4_temp/part...; No space left on device"),
             "enospc_os": OSError(errno.ENOSPC, "No space left on device"),
             "read_only": OSError(errno.EROFS, "Read-only file system")}[kind]
    before = _files(run_copy)
    monkeypatch.setattr(tf.train, "CheckpointManager", lambda checkpoint, directory, **kw:
                        _FailingManager(directory, str(run_copy / "ckpt-3"), error))
    with pytest.raises(UserError) as raised:
        TrainingDirectory(run_copy).checkpoints.save(tf.train.Checkpoint(), 4)
    message = str(raised.value)
    assert f"could not save the checkpoint at step 4 in {run_copy}" in message
    assert f"the latest saved checkpoint {run_copy / 'ckpt-3'} is intact" in message
    assert ("free some space" if kind != "read_only" else "make the folder writable") in message
    assert _files(run_copy) == before  # ckpt-4_temp/ and the half ckpt-4.index are gone


def _tmpfs(tmp_path, size):
    """A tmpfs of `size` ("3m") mounted in tmp_path for the test (skipped where
    mounting is not allowed)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); the "
                    f"monkeypatched cases above cover the save")
    yield mount
    # Lazy (-l): a plain umount failed here as busy after both tests (something
    # still held the mount) and left the tmpfs mounted after the run.
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 3 MB tmpfs: room for the run files and one checkpoint of the tiny model."""
    yield from _tmpfs(tmp_path, "3m")


@pytest.fixture
def roomy_tmpfs(tmp_path):
    """A 16 MB tmpfs: room for a tiny run with its best/ copy, before it is filled."""
    yield from _tmpfs(tmp_path, "16m")


def test_a_full_disk_during_training_ends_in_one_line_and_loses_nothing(small_tmpfs,
                                                                        tiny_data):
    import tensorflow as tf

    out = small_tmpfs / "run"
    result = run_cli("trainer", *trainer_args(tiny_data, out, 5, "--save_checkpoints_steps=1"))
    one_line_error(result, "t2t-trainer", "could not save the checkpoint at step 2",
                   "No space left on device", f"the latest saved checkpoint {out / 'ckpt-1'} "
                                              f"is intact", "free some space")
    assert tf.train.latest_checkpoint(str(out)) == str(out / "ckpt-1")
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("ckpt")) == \
        ["ckpt-1.data-00000-of-00001", "ckpt-1.index"]



def _fill(folder):
    """Fill the disk of `folder` to the last byte (a file `filler`)."""
    with open(folder / "filler", "wb", buffering=0) as f:
        for size in (1 << 16, 1 << 10, 1):
            with pytest.raises(OSError) as full:
                while True:
                    f.write(b"x" * size)
            assert full.value.errno == errno.ENOSPC


def test_a_disk_full_to_the_last_byte_is_one_line_for_the_trainer_and_the_averager(
        roomy_tmpfs, tiny_data):
    """Issue 60, item 2: on a 100% full disk an empty file can still be made,
    so the writability check passes; the lock's pid line cannot be written.
    The trainer (fresh and resuming) and t2t-avg-checkpoints end in one line,
    the files already there byte-identical."""
    out = roomy_tmpfs / "run"
    done = run_cli("trainer", *trainer_args(tiny_data, out, 1))
    assert done.returncode == 0, done.stderr[-3000:]
    _fill(roomy_tmpfs)
    before = _files(roomy_tmpfs)
    for cli, args in (("trainer", trainer_args(tiny_data, out, 2)),
                      ("trainer", trainer_args(tiny_data, roomy_tmpfs / "fresh", 1)),
                      ("avg_checkpoints", [f"--output_dir={out}"])):
        result = run_cli(cli, *args)
        one_line_error(result, f"t2t-{cli.replace('_', '-')}", "No space left on device",
                       "free some space on that disk")
        assert _files(roomy_tmpfs) == before

def test_leftovers_of_killed_runs_are_removed_and_nothing_else(run_copy):
    from t2t_revival.export.version_directory import write_version_directory
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    made = ["ckpt-9_temp/part-00000-of-00001.data-00000-of-00001", "checkpoint.tmp1a2b3c",
            ".hparams.json.k2j3h4.incomplete", ".run.json.abcd_12.incomplete",
            "averaged/ckpt-2_temp/part"]
    kept = ["notes_temp/a", "my.incomplete", ".test.decodes.x1.incomplete", "ckpt-9_tempx"]
    for name in made + kept:
        path = run_copy / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    before = _files(run_copy)
    lines = []
    removed = TrainingDirectory(run_copy).clean_leftovers(lines.append)
    assert sorted(os.path.relpath(p, run_copy) for p in removed) == \
        sorted(["ckpt-9_temp", "checkpoint.tmp1a2b3c", ".hparams.json.k2j3h4.incomplete",
                ".run.json.abcd_12.incomplete"])
    assert lines[0].startswith("Removed 4 leftover(s) of an interrupted run: ")
    gone = {os.path.relpath(p, run_copy) for p in removed}
    assert _files(run_copy) == {k: v for k, v in before.items() if k.split("/")[0] not in gone}
    TrainingDirectory(run_copy).clean_leftovers(lines.append, averaged=True)
    assert not (run_copy / "averaged" / "ckpt-2_temp").exists()
    # Exports: a dead process's leftovers go at the next export, a live one's stay.
    export = run_copy / "export"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # A replaced version that a kill left at its old name comes back when the
    # version itself is missing (`.V.old` where no swap in one step exists,
    # `.V.old<pid>` of earlier releases), and goes when it is there.
    for name in (f".5.incomplete{dead.pid}", f".5.old{dead.pid}", f".6.incomplete{os.getpid()}",
                 ".8.old", "8", ".9.old"):
        (export / name).mkdir(parents=True)
        (export / name / "from").write_text(name)
    write_version_directory(str(export), 7, lambda tmp: os.makedirs(tmp))
    assert sorted(p.name for p in export.iterdir()) == \
        [f".6.incomplete{os.getpid()}", "5", "7", "8", "9"]
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


# ---------------------------------------------------------------------------
# Corrupt records skipped and counted (item 8)
# ---------------------------------------------------------------------------

def test_skip_corrupt_records_counts_and_names_the_shards(tiny_data, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(tiny_data, copy)
    shards = TinyMulti30k().data_files("train", str(copy))
    os.truncate(shards[3], os.path.getsize(shards[3]) - 7)
    before = digests(copy)
    out = tmp_path / "run"
    result = run_cli("trainer", *trainer_args(copy, out, 2), "--skip_corrupt_records")
    stdout = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [l for l in stdout.splitlines() if l.startswith("--skip_corrupt_records:")]
    assert len(lines) == 1, stdout
    assert lines[0].startswith("--skip_corrupt_records: skipping 1 record(s) of the train "
                               "split of translate_ende_multi30k: 1 shard(s)")
    assert f"first {shards[3]} (truncated record at" in lines[0]
    assert (out / "ckpt-2.index").is_file()
    assert digests(copy) == before


# ---------------------------------------------------------------------------
# --decode_hparams ranges
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("beam_size=0", "'beam_size' must be in [1, inf) (the beam width; 1 is greedy search). "
                    "Received: beam_size=0"),
    ("alpha=-0.5", "'alpha' must be in [0, inf)"),
    ("alpha=nan", "'alpha' must be a finite number in [0, inf)"),
    ("alpha=inf", "'alpha' must be a finite number in [0, inf)"),
    ("extra_length=-1", "'extra_length' must be in [0, 1024]"),
    # Unbounded, its cache of input + extra_length positions per row was an
    # out-of-memory kill (14 GB at 100000), not a longer translation.
    ("extra_length=100000", "'extra_length' must be in [0, 1024] (output tokens allowed "
                            "beyond the input's length, a cache held for every row; the "
                            "paper uses 50, parsing 300). Received: extra_length=100000"),
    ("batch_size=0", "'batch_size' must be in [1, inf)"),
])
def test_decode_hparams_out_of_range_are_refused_with_the_range(text, message):
    from t2t_revival.decode_hparams import DecodeHParamsError, parse_decode_hparams

    with pytest.raises(DecodeHParamsError) as error:
        parse_decode_hparams(text)
    assert message in str(error.value)


def test_decoder_refuses_decode_hparams_out_of_range_before_loading(run3):
    result = run_cli("decoder", f"--output_dir={run3}", "--decode_interactive",
                     "--decode_hparams=alpha=nan", stdin="ein mann\n")
    one_line_error(result, "t2t-decoder", "'alpha' must be a finite number in [0, inf)")
    assert "Decoding with" not in result.stderr


# ---------------------------------------------------------------------------
# The kill series (item 9)
# ---------------------------------------------------------------------------

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
        proc = _popen("trainer", *args)
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
