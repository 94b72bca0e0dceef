"""The training directory: the run record's file format (old directories
included), the files' modes, and the one atomic writer."""

import gzip
import json
import os
import stat

import pytest

from t2t_revival.errors import UserError
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.training_directory import TrainingDirectory

# A run.json as t2t-trainer has written it since the first release.
OLD_RUN_JSON = """{
  "data_dir": "/data/t2t_data",
  "hparams": "num_hidden_layers=2",
  "hparams_set": "transformer_tiny",
  "model": "transformer",
  "problem": "translate_ende_multi30k",
  "vocab_file": "vocab.model",
  "vocab_source": "/data/t2t_data/vocab.translate_ende_multi30k.model"
}
"""


def test_run_record_reads_old_directories_and_writes_the_same_format(tmp_path):
    (tmp_path / "run.json").write_text(OLD_RUN_JSON)
    record = TrainingDirectory(tmp_path).read_run_record()
    assert record == RunRecord(
        problem="translate_ende_multi30k", model="transformer",
        hparams_set="transformer_tiny", hparams="num_hidden_layers=2",
        data_dir="/data/t2t_data", vocab_file="vocab.model",
        vocab_source="/data/t2t_data/vocab.translate_ende_multi30k.model")
    assert record.to_json() == OLD_RUN_JSON  # byte for byte


def test_run_record_defaults_missing_keys_and_ignores_unknown_ones(tmp_path):
    (tmp_path / "run.json").write_text('{"problem": "p", "a_future_key": "x"}')
    record = TrainingDirectory(tmp_path).read_run_record()
    assert record == RunRecord(problem="p")
    assert (record.model, record.vocab_file, record.hparams_set) == (
        "transformer", "vocab.model", "")


@pytest.mark.parametrize("text, message", [
    ("{not json", "is corrupt"),
    ('["a list"]', "not a JSON object"),
    ('{"model": 3}', "not an object of strings"),
])
def test_a_corrupt_run_record_is_a_user_error(tmp_path, text, message):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(UserError, match=message):
        TrainingDirectory(tmp_path).read_run_record()


def test_a_missing_run_record_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="run.json is missing; --output_dir must be"):
        TrainingDirectory(tmp_path).read_run_record()


def _readable_by_others(path) -> bool:
    mode = os.stat(path).st_mode
    return bool(mode & stat.S_IRGRP) and bool(mode & stat.S_IROTH)


def test_every_file_of_a_run_directory_is_readable_by_other_users(shared_data, tmp_path):
    """hparams.json, run.json and vocab.model are 0644 whatever the umask (they
    were 0600 once); TensorFlow's checkpoint files follow the umask."""
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary
    from t2t_revival.train import run_preparation
    from t2t_revival.train.trainer import Trainer

    data_dir, out_dir = tmp_path / "data", tmp_path / "run"
    lines = []
    with gzip.open(shared_data / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as f:
        lines += [next(f).strip() for _ in range(300)]
    SubwordVocabulary.train(lines, str(data_dir / "vocab.translate_ende_multi30k.model"),
                            vocab_size=400)
    config = resolve_train_config(problem="translate_ende_multi30k", output_dir=str(out_dir),
                                  data_dir=str(data_dir), hparams_set="transformer_tiny")
    trainer = Trainer(config, log=lambda *a: None)
    umask = os.umask(0o077)
    try:
        run_preparation.write_run_files(config, trainer.problem, trainer.directory, "")
    finally:
        os.umask(umask)
    for name in ("hparams.json", "run.json", "vocab.model"):
        assert stat.S_IMODE(os.stat(out_dir / name).st_mode) == 0o644, name
    assert json.loads((out_dir / "run.json").read_text())["problem"] == \
        "translate_ende_multi30k"
    trainer.save()
    names = sorted(os.listdir(out_dir))
    assert "checkpoint" in names and any(n.endswith(".index") for n in names), names
    assert not [n for n in names if n.startswith(".")], names  # no temporary files left
    assert [n for n in names if not _readable_by_others(out_dir / n)] == []


def test_the_atomic_writer_leaves_the_old_file_on_error(tmp_path):
    from t2t_revival.files.atomic_file import atomic_output, write_atomically

    path = tmp_path / "sub" / "f.txt"
    write_atomically(str(path), "old\n")
    with pytest.raises(RuntimeError):
        with atomic_output(str(path)) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise RuntimeError("killed")
    assert path.read_text() == "old\n"
    assert os.listdir(path.parent) == ["f.txt"]
    write_atomically(str(path), b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_run_record_keeps_usr_dir_and_warm_start(tmp_path):
    record = RunRecord(problem="p", usr_dir="/u", warm_start_from="/r/ckpt-3")
    (tmp_path / "run.json").write_text(record.to_json())
    assert TrainingDirectory(tmp_path).read_run_record() == record
    assert '"usr_dir": "/u"' in record.to_json()
    assert "usr_dir" not in RunRecord(problem="p").to_json()


def test_which_run_holds_a_checkpoint_is_answered_once(tmp_path):
    """Issue 72: the decoder's other-run check, --warm_start_from's hparams and
    its vocabulary check all ask `TrainingDirectory.of_checkpoint`."""
    from t2t_revival.settings.config_resolution import warm_start_hparams
    from t2t_revival.settings.hparams import HParams

    run = tmp_path / "run"
    for folder in (run / "best", run / "averaged"):
        folder.mkdir(parents=True)
    HParams().save(str(run / "hparams.json"))
    (run / "run.json").write_text(RunRecord(problem="p").to_json())
    for source in (run, run / "ckpt-3", run / "best", run / "best" / "ckpt-3",
                   run / "averaged" / "ckpt-3"):
        assert TrainingDirectory.of_checkpoint(str(source)).path == str(run), source
        assert TrainingDirectory.holding(str(source), "x") == str(run)
        assert warm_start_hparams(str(source)) == HParams()
    bare = tmp_path / "bare" / "ckpt-1"
    bare.parent.mkdir()
    assert TrainingDirectory.of_checkpoint(str(bare)) is None
    assert TrainingDirectory.holding(str(bare), "default") == "default"
    other = tmp_path / "other"
    other.mkdir()
    (other / "run.json").write_text(RunRecord(problem="q").to_json())
    assert TrainingDirectory(run).is_other_run(str(other / "ckpt-1"))
    assert not TrainingDirectory(run).is_other_run(str(run / "best"))
    assert not TrainingDirectory(run).is_other_run(str(bare))   # no run of its own
    with pytest.raises(UserError, match="has no hparams.json beside it"):
        warm_start_hparams(str(bare))


def test_the_checkpoint_choice_reads_tensorflows_files_without_tensorflow(tmp_path):
    """`checkpoint_to_restore` in a fresh process: the `checkpoint` index and
    the integrity check read in pure Python (the LiteRT path's), TensorFlow
    never imported; a bare folder is the one-line 'no checkpoint'."""
    import subprocess
    import sys

    from conftest import ENV

    code = ("import sys\n"
            "from t2t_revival.errors import UserError\n"
            "from t2t_revival.run_dir.training_directory import TrainingDirectory\n"
            "try:\n"
            "    TrainingDirectory(sys.argv[1]).checkpoint_to_restore(None, print)\n"
            "except UserError as e:\n"
            "    print(e)\n"
            "print('tensorflow' in sys.modules)\n")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, env=ENV, check=True).stdout.splitlines()
    assert out[0].startswith(f"Skipping the checkpoint {tmp_path / 'ckpt-1'}: its .index file "
                             f"is missing"), out
    assert out[1].startswith(f"none of the 1 checkpoint(s) in {tmp_path} can be read"), out
    assert out[2] == "False"
