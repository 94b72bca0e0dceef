"""A write the disk refuses (full, over quota, read-only) is one line naming
what could not be written, and leaves nothing half-written: the atomic file
writer, the export folders, best/ (the datagen's shards: test_parallel_datagen).
Damaged run files read back (hparams.json, run.json, best.json) are one line
naming the file, and a training directory named by a relative path finds its
checkpoints once."""

import errno
import os

import numpy as np
import pytest

from full_disk import NO_SPACE, disk_full_after
from t2t_revival.files import atomic_file
from t2t_revival.files.atomic_file import atomic_open, disk_failure, write_atomically
from t2t_revival.errors import UserError

READ_ONLY = os.strerror(errno.EROFS)


def test_a_full_disk_is_one_line_naming_the_file_and_leaves_it_as_it_was(tmp_path,
                                                                         monkeypatch):
    path = tmp_path / "out" / "translations.txt"
    disk_full_after(monkeypatch, atomic_file, room=10)
    with pytest.raises(UserError) as e:
        write_atomically(str(path), "x" * 100)
    assert str(e.value) == (
        f"could not write {path} ({NO_SPACE}); no partial file is left; free some space "
        f"on that disk, then rerun. Received: path={str(path)!r}")
    assert os.listdir(path.parent) == []   # no temporary file either
    assert disk_failure(e.value) == NO_SPACE   # an outer writer (best/) still knows why
    # A file already there is kept whole.
    monkeypatch.undo()
    write_atomically(str(path), "before\n")
    disk_full_after(monkeypatch, atomic_file, room=10)
    with pytest.raises(UserError, match="the file already there is unchanged"):
        with atomic_open(str(path)) as f:
            f.write("after\n" * 50)
    assert path.read_text() == "before\n"
    assert os.listdir(path.parent) == ["translations.txt"]


def test_a_read_only_folder_says_so_and_other_errors_keep_their_traceback(tmp_path,
                                                                          monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, READ_ONLY)

    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", read_only)
    with pytest.raises(UserError, match=rf"\({READ_ONLY}\); no partial file is left; "
                                        r"write to a writable folder instead"):
        write_atomically(str(tmp_path / "hparams.json"), "{}")
    monkeypatch.undo()
    # Not the disk's fault: the error itself, not a UserError.
    with pytest.raises(ZeroDivisionError):
        with atomic_open(str(tmp_path / "x.txt")) as f:
            f.write("partial")
            1 / 0
    assert os.listdir(tmp_path) == []


def test_disk_failure_reads_tensorflows_errors_by_the_systems_reason():
    import tensorflow as tf

    save = tf.errors.ResourceExhaustedError(
        None, None, f"/run/ckpt-10_temp/part-0.data-00000-of-00001.tempstate1; {NO_SPACE}")
    assert disk_failure(save) == NO_SPACE
    assert disk_failure(tf.errors.PermissionDeniedError(None, None, f"x; {READ_ONLY}")) \
        == READ_ONLY
    assert disk_failure(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))) == \
        os.strerror(errno.EDQUOT)
    assert disk_failure(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating")) \
        is None
    assert disk_failure(FileNotFoundError(errno.ENOENT, "No such file")) is None
    assert disk_failure(ValueError(NO_SPACE)) is None


def test_an_export_the_disk_refuses_keeps_the_existing_version(tmp_path):
    import tensorflow as tf

    from t2t_revival.export.version_directory import write_version_directory

    export_dir = tmp_path / "export"

    def good(folder):
        os.makedirs(folder)
        (tmp_path / "export").joinpath(os.path.basename(folder), "model").write_text("v1")

    write_version_directory(str(export_dir), 300, good)

    def full(folder):
        os.makedirs(folder)
        (tmp_path / "export").joinpath(os.path.basename(folder), "model").write_text("v2")
        raise tf.errors.ResourceExhaustedError(None, None, f"SaveV2 failed; {NO_SPACE}")

    with pytest.raises(UserError) as e:
        write_version_directory(str(export_dir), 300, full)
    assert str(e.value) == (
        f"could not write the export {export_dir / '300'} ({NO_SPACE}); version 300 there "
        f"is unchanged; free some space on that disk, then export again. "
        f"Received: export_dir={str(export_dir)!r}")
    assert os.listdir(export_dir) == ["300"]
    assert (export_dir / "300" / "model").read_text() == "v1"
    with pytest.raises(UserError, match="no partial export is left"):
        write_version_directory(str(export_dir), 400, full)
    assert os.listdir(export_dir) == ["300"]


def test_a_best_checkpoint_the_disk_refuses_keeps_the_previous_best(tmp_path, monkeypatch):
    import shutil

    from best_checkpoints import assert_best_readable, best_record, write_checkpoint
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    run = tmp_path / "run"
    best = TrainingDirectory(run).best
    best.update(write_checkpoint(run, 100), best_record(100))
    real_copyfile = shutil.copyfile

    def copyfile(source, target, *args, **kwargs):
        if source.endswith(".index"):
            raise OSError(errno.ENOSPC, NO_SPACE, target)
        return real_copyfile(source, target, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    with pytest.raises(UserError) as e:
        best.update(write_checkpoint(run, 200), best_record(200))
    assert str(e.value).startswith(
        f"could not copy the new best checkpoint {run / 'ckpt-200'} into {run / 'best'} "
        f"({NO_SPACE}); best/ still holds the previous best, and the checkpoint itself is "
        f"saved; free some space on that disk, then rerun the same command to resume.")
    assert assert_best_readable(best) == 100
    assert not os.path.exists(best.incomplete)


def test_damaged_run_files_are_one_line_naming_the_file(tmp_path):
    from t2t_revival.settings.hparams import HParams, HParamsError
    from t2t_revival.run_dir.run_record import RunRecord

    path = tmp_path / "hparams.json"
    for content, why in ((b"\xff\xfe garbage", "'utf-8' codec can't decode byte 0xff"),
                         (b'{"d_model": ', "malformed JSON: Expecting value"),
                         (b'{"d_mdoel": 128}', "Unknown hparam 'd_mdoel'. Did you mean "
                                               "'d_model'?")):
        path.write_bytes(content)
        with pytest.raises(HParamsError) as e:
            HParams.load(str(path))
        message = str(e.value)
        assert message.startswith(f"{path} is corrupt ({why}"), message
        assert message.endswith(
            "); delete it and rerun t2t-trainer in that directory with the run's "
            "--hparams_set and --hparams, which writes it again. "
            f"Received: path={str(path)!r}"), message
        assert message.count("Received:") == 1
    run_file = tmp_path / "run.json"
    run_file.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(UserError, match=rf"^{run_file} is corrupt \('utf-8' codec can't "
                                        r"decode byte 0xff .*\); delete it and rerun "
                                        r"t2t-trainer in that directory with the run's "
                                        r"flags, which writes it again\."):
        RunRecord.load(str(run_file))
    from t2t_revival.run_dir.best_checkpoint import BestCheckpoint

    best = BestCheckpoint(str(tmp_path))
    os.makedirs(best.path)
    with open(best.record_file, "wb") as f:
        f.write(b"\xff\xfe garbage")
    with pytest.raises(UserError, match=rf"^{best.record_file} is corrupt \('utf-8' codec "
                                        r"can't decode byte 0xff .*\); delete the folder"):
        best.record()


def _two_checkpoints(folder):
    import tensorflow as tf

    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(np.ones(4)),
                                                             step=step),
                                         str(folder), max_to_keep=5, checkpoint_name="ckpt")
    manager.save(checkpoint_number=100)
    manager.save(checkpoint_number=200)


def test_a_relative_training_directory_finds_its_checkpoints_once(tmp_path, monkeypatch):
    """The index names checkpoints relative to its folder and TensorFlow joins
    them onto the folder it was given: a relative --output_dir must not have it
    joined twice (a 'Skipping the checkpoint run/run/ckpt-200' line, a count of
    4 checkpoints, a rewritten index on every resume)."""
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    monkeypatch.chdir(tmp_path)
    _two_checkpoints("run")
    said = []
    folder = TrainingDirectory("run").checkpoints
    assert folder.restore_newest(log=said.append) == os.path.join("run", "ckpt-200")
    assert folder.intact(said.append) == [os.path.join("run", "ckpt-100"),
                                          os.path.join("run", "ckpt-200")]
    index = (tmp_path / "run" / "checkpoint").read_text()
    folder.repair_index(os.path.join("run", "ckpt-200"), said.append)
    assert said == []
    assert (tmp_path / "run" / "checkpoint").read_text() == index   # sound: left as it was


def test_averaging_a_folder_of_damaged_checkpoints_says_they_are_damaged(tmp_path):
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    _two_checkpoints(tmp_path / "run")
    for data in (tmp_path / "run").glob("ckpt-*.data-*"):
        os.truncate(data, 10)
    said = []
    with pytest.raises(UserError) as e:
        TrainingDirectory(tmp_path / "run").average_last(build_model, 5, log=said.append)
    assert str(e.value).startswith(f"none of the 2 checkpoint(s) in {tmp_path / 'run'} can "
                                   f"be read (each is named above)")
    assert len(said) == 2 and all("its .data file is truncated" in s for s in said), said
