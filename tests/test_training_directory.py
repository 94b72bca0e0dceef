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
