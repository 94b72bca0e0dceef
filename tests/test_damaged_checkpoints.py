"""Damaged checkpoints (issue 20 item 6, issue 60 item 8): a truncated,
flipped, missing or unindexed checkpoint is skipped by every reader (the
decoder, the averager, the trainer's resume) with a line saying which and
why, the newest intact one used; one named explicitly is one clear error.

Each case asserts one line, the exit status and, where files were written
before, that they are byte-identical afterwards (`tiny_runs.run_files`).
The runs are copies of the session's `tiny_trained` (ckpt-1 to ckpt-3).
"""

import os

import pytest

from conftest import checkpoint_step, one_line_error, run_cli
from tiny_runs import run_files, trainer_args


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


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_readers_use_the_newest_intact_checkpoint_saying_what_they_skipped(damage, trained_copy):
    from t2t_revival.models.trained_model import TrainedModel
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    reason = damage(trained_copy)
    lines = []
    trained = TrainedModel.load(str(trained_copy), log=lines.append)
    assert trained.checkpoint_path == str(trained_copy / "ckpt-2")
    assert any(reason in line for line in lines), lines
    if damage not in (_garbage_index, _empty_index):
        assert lines == [f"Skipping the checkpoint {trained_copy / 'ckpt-3'}: {lines[0].split(': ', 1)[1]}"]
    if damage is _flip_data_byte:
        return  # found only when read: test_averaging_skips_a_damaged_checkpoint
    # Averaging when no checkpoint is named: the intact ones only.
    lines.clear()
    assert TrainingDirectory(trained_copy).checkpoints.intact(log=lines.append)[-1] == \
        str(trained_copy / "ckpt-2")


@pytest.mark.parametrize("damage", [_truncate_data, _flip_data_byte], ids=lambda f: f.__name__)
def test_a_named_damaged_checkpoint_is_one_clear_error(damage, trained_copy):
    reason = damage(trained_copy)
    before = run_files(trained_copy)
    result = run_cli("decoder", f"--output_dir={trained_copy}", "--decode_interactive",
                     f"--checkpoint_path={trained_copy / 'ckpt-3'}", stdin="ein mann\n")
    one_line_error(result, "t2t-decoder", f"the checkpoint {trained_copy / 'ckpt-3'}", reason,
                   "leave it out to use the newest intact checkpoint")
    assert run_files(trained_copy) == before


def test_decoder_without_a_checkpoint_named_falls_back_and_says_so(trained_copy):
    _truncate_data(trained_copy)
    result = run_cli("decoder", f"--output_dir={trained_copy}", "--decode_interactive",
                     stdin="ein mann\n")
    stderr = result.stderr
    assert result.returncode == 0, stderr[-3000:]
    skipped = [l for l in stderr.splitlines() if l.startswith("Skipping the checkpoint")]
    assert len(skipped) == 1 and "ckpt-3: its .data file is truncated" in skipped[0]
    assert f"Decoding with {trained_copy / 'ckpt-2'}" in stderr
    assert len(result.stdout.splitlines()) == 1


def test_averaging_skips_a_damaged_checkpoint(trained_copy):
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    _flip_data_byte(trained_copy)  # found only when read: a checksum error
    lines = []
    with pytest.raises(Exception) as error:
        TrainingDirectory(trained_copy).average_last(build_model, 3, log=lines.append)
    assert "ckpt-3 cannot be restored: its files are damaged (DataLossError" in str(error.value)
    _truncate_data(trained_copy)  # found before reading: skipped
    lines.clear()
    path = TrainingDirectory(trained_copy).average_last(build_model, 3, log=lines.append)
    assert path == str(trained_copy / "averaged" / "ckpt-2")
    assert lines[0].startswith(f"Skipping the checkpoint {trained_copy / 'ckpt-3'}: its .data")
    assert f"read {trained_copy / 'ckpt-1'}" in lines and f"read {trained_copy / 'ckpt-2'}" in lines


def test_trainer_resumes_from_the_newest_intact_checkpoint_and_repairs_the_index(
        trained_copy, tiny_data, fake_updates):
    import tensorflow as tf

    _garbage_index(trained_copy)  # and ckpt-3's data truncated
    result = run_cli("trainer", *trainer_args(tiny_data, trained_copy, 4,
                                              "--save_checkpoints_steps=1"))
    stdout = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"The checkpoint index {trained_copy / 'checkpoint'} is unreadable" in stdout
    assert f"Skipping the checkpoint {trained_copy / 'ckpt-3'}: its .data file is truncated" \
        in stdout
    assert f"Resumed from {trained_copy / 'ckpt-2'} at step 2." in stdout
    state = tf.train.get_checkpoint_state(str(trained_copy))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == \
        ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]
    assert checkpoint_step(trained_copy / "ckpt-3") == 3  # rewritten, intact


def test_a_damaged_warm_start_checkpoint_names_warm_start_from(trained_copy, tiny_data, tmp_path):
    """Issue 60 item 8: not --checkpoint_path, which the trainer does not have."""
    _truncate_data(trained_copy)
    line = one_line_error(
        run_cli("trainer", *trainer_args(tiny_data, tmp_path / "warm", 1,
                                         f"--warm_start_from={trained_copy / 'ckpt-3'}")),
        "t2t-trainer", f"the --warm_start_from checkpoint {trained_copy / 'ckpt-3'} cannot be "
                       f"read", "Received: warm_start_from=")
    assert "checkpoint_path" not in line, line


def test_no_intact_checkpoint_but_an_intact_best_says_so(trained_copy, tiny_data):
    """Issue 60 item 8: "train again" is wrong advice while best/ holds an intact one."""
    for step in (1, 2, 3):
        os.truncate(_data_file(trained_copy / f"ckpt-{step}"), 100)
    before = run_files(trained_copy)
    one_line_error(run_cli("trainer", *trainer_args(tiny_data, trained_copy, 5)), "t2t-trainer",
                   "none of the 3 checkpoint(s)",
                   f"{trained_copy / 'best'} holds an intact one, {trained_copy / 'best' / 'ckpt-3'}",
                   f"--warm_start_from={trained_copy / 'best' / 'ckpt-3'}")
    assert run_files(trained_copy) == before


def _garbage_index_only(run):
    (run / "checkpoint").write_bytes(b"\x00\x01 not an index {{{")
    return "The checkpoint index"


def _checkpoint_lines(text):
    """What a reader says about the checkpoints it skipped or worked around."""
    return [line for line in text.splitlines()
            if line.startswith(("Skipping the checkpoint", "The checkpoint index"))]


@pytest.mark.parametrize("damage, chosen", [(_garbage_index_only, "ckpt-3"),
                                            (_truncate_data, "ckpt-2")],
                         ids=["garbage_index", "truncated_newest"])
def test_the_litert_and_tensorflow_paths_choose_and_say_the_same(damage, chosen, trained_copy):
    """Issue 72: the run directory is the one chooser of a checkpoint. The
    LiteRT path (no TensorFlow: `checkpoint_prefix`) and the TensorFlow path
    (`TrainedModel.load`) choose the same checkpoint and say the same lines,
    called as t2t-decoder calls them and through t2t-decoder itself."""
    from t2t_revival.decode.litert_program_cache import checkpoint_prefix
    from t2t_revival.models.trained_model import TrainedModel

    reason = damage(trained_copy)
    tensorflow, litert = [], []
    trained = TrainedModel.load(str(trained_copy), log=tensorflow.append)
    prefix = checkpoint_prefix(str(trained_copy), None, litert.append)
    assert trained.checkpoint_path == prefix == str(trained_copy / chosen)
    assert litert == tensorflow and len(tensorflow) == 1 and reason in tensorflow[0], tensorflow
    said = {}
    for engine in ("true", "false"):
        result = run_cli("decoder", f"--output_dir={trained_copy}", "--decode_interactive",
                         f"--decode_hparams=litert={engine}", stdin="ein mann\n")
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"Decoding with {trained_copy / chosen}" in result.stderr, result.stderr[-3000:]
        assert "could not convert" not in result.stderr, result.stderr[-3000:]
        assert ("on its LiteRT programs" in result.stderr) == (engine == "true")
        assert len(result.stdout.splitlines()) == 1
        said[engine] = _checkpoint_lines(result.stderr)
    assert said["true"] == said["false"] == tensorflow, said
