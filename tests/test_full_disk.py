"""A disk that fills while the run writes (issue 20 item 7, issue 60 items 2
and 7): a checkpoint save, a decode's output, the lock's pid line on a disk
full to the last byte: one line saying what could not be written, the
files already there unchanged, a rerun continuing. (The atomic writer, the
export and best/: test_disk_failures.py.)
"""

import errno
import os
import subprocess

import pytest

from conftest import one_line_error, run_cli
from full_disk import NO_SPACE, write_decode_sources
from tiny_runs import run_files, trainer_args


def test_a_decode_the_disk_refuses_stops_at_once_and_a_rerun_continues(tiny_trained, tmp_path,
                                                                        monkeypatch):
    """Issue 60 item 7: the decoder writes each batch as it goes to
    <decode_to_file>.partial; the first write the disk refuses stops it in one
    line that says what it needs, the file already there unchanged and the
    lines decoded kept; the same command, rerun, decodes only the rest."""
    import builtins

    from full_disk import disk_full_after

    total = 40   # 10 batches: the disk fills in the middle of the file
    sources = write_decode_sources(tmp_path / "src.en", total, period=7)
    flags = [f"--output_dir={tiny_trained}", f"--decode_from_file={sources}",
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
    kept = int(line.split(f" of {total} lines")[0].rsplit(" ", 1)[1])
    assert 0 < kept < total, (line, len(reference.read_bytes()))
    monkeypatch.undo()
    assert out.read_text() == "an earlier decode\n"
    rerun = run_cli("decoder", *flags, f"--decode_to_file={out}")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{kept} of {total} lines decoded before" in rerun.stderr, rerun.stderr[-3000:]
    assert out.read_bytes() == reference.read_bytes()
    assert not (tmp_path / "hyp.de.partial").exists()


def test_a_compile_cache_whose_disk_fills_leaves_the_decode_going_without_xla(
        tiny_trained, tmp_path, monkeypatch):
    """Issue 77, part 3: TensorFlow fails a compile whose program it cannot
    write into the XLA compile cache (a ResourceExhaustedError naming the
    file); that stopped the decode although the output's disk had room. Now
    one line, and the rest is decoded without XLA: the output complete."""
    import tensorflow as tf

    from t2t_revival.decode.decoder import Decoder

    total = 24
    sources = write_decode_sources(tmp_path / "src.en", total, period=7)
    flags = [f"--output_dir={tiny_trained}", f"--decode_from_file={sources}"]
    settings = "--decode_hparams=batch_size=4,parallel_batches=1,beam_size=2"
    reference = tmp_path / "reference.de"
    done = run_cli("decoder", *flags, f"{settings},xla=false", f"--decode_to_file={reference}")
    assert done.returncode == 0, done.stderr[-3000:]
    searches = []

    def compiled_search(decoder, rows, guided=()):
        def search(inputs, guides=None):   # the XLA search, until the cache's disk fills
            searches.append(rows)
            if len(searches) > 2:
                raise tf.errors.ResourceExhaustedError(
                    None, None, "/c/.work-1-2/xla_compile_cache__1__2__XLA_CPU_JIT.pbvm-1.tmp; "
                                "No space left on device [Op:__inference__search_padded_6945]")
            return decoder.uncompiled_search(inputs)
        return search

    monkeypatch.setattr(Decoder, "compiled_search", compiled_search)
    out = tmp_path / "hyp.de"
    result = run_cli("decoder", *flags, f"{settings},xla=true", f"--decode_to_file={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(searches) == 3   # then no XLA search
    said = [l for l in result.stderr.splitlines() if "XLA compile cache" in l]
    assert said == [f"Warning: TensorFlow could not write a compiled program to the XLA "
                    f"compile cache ({NO_SPACE}): decoding on without XLA (slower, the output "
                    f"complete); free some space on that disk (the cache's), or set "
                    f"T2T_COMPILE_CACHE=DIR to another disk, or T2T_COMPILE_CACHE=off"], \
        result.stderr[-3000:]
    assert out.read_bytes() == reference.read_bytes()
    assert f"Wrote {total} translations" in result.stderr


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
        kind, trained_copy, monkeypatch):
    import tensorflow as tf

    from t2t_revival.errors import UserError
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    error = {"enospc_tf": tf.errors.ResourceExhaustedError(
                 None, None, "ckpt-4_temp/part...; No space left on device"),
             "enospc_os": OSError(errno.ENOSPC, "No space left on device"),
             "read_only": OSError(errno.EROFS, "Read-only file system")}[kind]
    before = run_files(trained_copy)
    monkeypatch.setattr(tf.train, "CheckpointManager", lambda checkpoint, directory, **kw:
                        _FailingManager(directory, str(trained_copy / "ckpt-3"), error))
    with pytest.raises(UserError) as raised:
        TrainingDirectory(trained_copy).checkpoints.save(tf.train.Checkpoint(), 4)
    message = str(raised.value)
    assert f"could not save the checkpoint at step 4 in {trained_copy}" in message
    assert f"the latest saved checkpoint {trained_copy / 'ckpt-3'} is intact" in message
    assert ("free some space" if kind != "read_only" else "make the folder writable") in message
    assert run_files(trained_copy) == before  # ckpt-4_temp/ and the half ckpt-4.index are gone


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
                                                                        tiny_data, fake_updates):
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
        roomy_tmpfs, tiny_data, fake_updates):
    """Issue 60, item 2: on a 100% full disk an empty file can still be made,
    so the writability check passes; the lock's pid line cannot be written.
    The trainer (fresh and resuming) and t2t-avg-checkpoints end in one line,
    the files already there byte-identical."""
    out = roomy_tmpfs / "run"
    done = run_cli("trainer", *trainer_args(tiny_data, out, 1))
    assert done.returncode == 0, done.stderr[-3000:]
    _fill(roomy_tmpfs)
    before = run_files(roomy_tmpfs)
    for cli, args in (("trainer", trainer_args(tiny_data, out, 2)),
                      ("trainer", trainer_args(tiny_data, roomy_tmpfs / "fresh", 1)),
                      ("avg_checkpoints", [f"--output_dir={out}"])):
        result = run_cli(cli, *args)
        one_line_error(result, f"t2t-{cli.replace('_', '-')}", "No space left on device",
                       "free some space on that disk")
        assert run_files(roomy_tmpfs) == before
