"""What a run checks and prepares before its first update: the data, a resume's
agreement with the run it continues, and the run files.

Each check refuses in one line (a UserError) before anything is written, so
a failed start or resume changes nothing in the training directory.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
from typing import Callable

from t2t_revival.errors import UserError
from t2t_revival.run_dir.checkpoint_folder import quiet
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.settings.train_config import TrainConfig

Log = Callable[[str], None]


def check_resume_config(config: TrainConfig, directory: TrainingDirectory, log: Log) -> None:
    """A resume must train with the hparams its checkpoints were trained with.

    An output_dir whose earlier run saved no checkpoint (it failed or was
    stopped before its first save) has nothing to resume: the new hparams
    start the run anew there, and say so.
    """
    if not os.path.exists(directory.hparams_file):
        return
    saved, now = directory.read_hparams(), config.hparams
    if saved == now:
        return
    diff = [f"{k}: saved {v!r}, now {now.to_dict()[k]!r}"
            for k, v in saved.to_dict().items() if now.to_dict()[k] != v]
    if not directory.checkpoints.intact(log=quiet):
        log(f"{config.output_dir} holds the hparams of an earlier run that saved no "
            f"checkpoint: starting the run anew with these ({'; '.join(diff)}).")
        return
    raise UserError(
        f"{config.output_dir} holds a run with other hparams ({'; '.join(diff)}); rerun with "
        f"the same --hparams_set/--hparams to resume, or use a new --output_dir. "
        f"Received: output_dir={config.output_dir}")


def check_cooldown_fits(config: TrainConfig) -> None:
    """The learning-rate cooldown is the last updates before --train_steps."""
    cooldown = config.hparams.learning_rate_cooldown_steps
    if cooldown > config.train_steps:
        raise UserError(
            f"hparam learning_rate_cooldown_steps={cooldown} is more than --train_steps="
            f"{config.train_steps}: the cooldown is the last updates before --train_steps; "
            f"lower it or raise --train_steps.")


def prepare_data(config: TrainConfig, problem, log: Log) -> None:
    """Run the problem's datagen when data_dir lacks its data; with
    --skip_corrupt_records, say per split how many records are skipped."""
    if not problem.has_data(config.data_dir):
        log(f"No {config.problem} data in {config.data_dir}: running datagen first.")
        problem.generate_data(config.data_dir, config.tmp_dir)
    if not config.skip_corrupt_records:
        return
    for split in problem.num_shards:
        lost, damaged = problem.corrupt_records(split, config.data_dir)
        if damaged:
            first, reason = next(iter(damaged.items()))
            log(f"--skip_corrupt_records: skipping {lost} record(s) of the {split} "
                f"split of {config.problem}: {len(damaged)} shard(s) are read "
                f"up to their damage, first {first} ({reason}); rerun t2t-datagen "
                f"to repair them. Received: corrupt_shards="
                f"{[os.path.basename(p) for p in damaged]}")


def check_vocabulary(config: TrainConfig, problem, directory: TrainingDirectory) -> None:
    """data_dir's vocabulary fits the model, and a resume reads the vocabulary
    its checkpoints were trained with.

    A data_dir made while the problem had a larger vocab_size (an earlier
    version, or a user problem since changed) would feed ids past the last
    embedding row: garbage on a GPU, a crash mid-step on a CPU. A
    regenerated vocabulary keeps its name but not its pieces: the bytes of
    output_dir's copy are compared with data_dir's.
    """
    saved = directory.vocab_file
    if os.path.isfile(saved) and directory.checkpoints.intact(log=quiet):
        current = problem.vocab_file(config.data_dir)
        if os.path.isfile(current) and not filecmp.cmp(saved, current, shallow=False):
            _check_vocabulary_copy(saved, current)
            trained_on = ""
            with contextlib.suppress(UserError):
                trained_on = directory.read_run_record().data_dir
            raise UserError(
                f"the vocabulary {current} differs from {saved}, the one the checkpoints "
                f"in {config.output_dir} were trained with; resume with the "
                f"--data_dir they were trained on{f' ({trained_on})' if trained_on else ''}, "
                f"or train into a new --output_dir. Received: data_dir={config.data_dir}")
    vocab, hparams = problem.vocabulary(config.data_dir), config.hparams
    if vocab.vocab_size > hparams.vocab_size:
        raise UserError(
            f"the vocabulary {vocab.model_file} has {vocab.vocab_size} pieces, more than "
            f"the model's {hparams.vocab_size} embedding rows (problem {config.problem} "
            f"makes {problem.vocab_size}-piece vocabularies; that data_dir was made with "
            f"another vocab_size); run t2t-datagen into a new --data_dir, or pass "
            f"--hparams=vocab_size={vocab.vocab_size}. Received: data_dir={config.data_dir}")


def _check_vocabulary_copy(saved: str, current: str) -> None:
    """The run's copy of its vocabulary can be read; when it cannot, the
    data_dir given is not the wrong one: the copy is damaged."""
    from t2t_revival.data.vocabulary_file import load_vocabulary

    try:
        load_vocabulary(saved)
    except UserError:
        raise UserError(
            f"the run's copy of its vocabulary {saved} is damaged (it cannot be read as a "
            f"vocabulary); copy {current} over it if that data_dir is the one the run was "
            f"trained on and was not regenerated since, then rerun; else train into a new "
            f"--output_dir. Received: output_dir={os.path.dirname(saved)}") from None


def restore_mismatch(config: TrainConfig, directory: TrainingDirectory
                     ) -> Callable[[str, str], UserError]:
    """The error for a checkpoint `prefix` of the run that holds another model (`why`)."""
    def error(prefix: str, why: str) -> UserError:
        missing = "" if os.path.exists(directory.hparams_file) else \
            f" ({directory.hparams_file}, which records them, is missing)"
        return UserError(
            f"the checkpoint {prefix} holds a model of other hparams than "
            f"--hparams_set={config.hparams_set} --hparams={config.hparams_overrides!r}"
            f"{missing}: {why}; rerun with the hparams it was trained with, or use a "
            f"new --output_dir. Received: output_dir={config.output_dir}")
    return error


def warm_start_source(config: TrainConfig, directory: TrainingDirectory, model, problem,
                      resumed: bool, log: Log) -> str:
    """--warm_start_from on a new run (a resume continues the run itself);
    returns the checkpoint the run's weights started from, for run.json."""
    from t2t_revival.train.warm_start import warm_start

    recorded = directory.read_run_record().warm_start_from \
        if os.path.isfile(directory.run_file) else ""
    if resumed:
        if config.warm_start_from:
            log(f"{config.output_dir} already holds checkpoints: resuming this run; "
                f"--warm_start_from applies only to a new run and is ignored.")
        return recorded
    if not config.warm_start_from:
        return ""
    return warm_start(model, config.warm_start_from, problem.vocab_file(config.data_dir), log,
                      vocab=config.warm_start_vocab)


def write_run_files(config: TrainConfig, problem, directory: TrainingDirectory,
                    warm_start_from: str) -> None:
    """hparams.json, a copy of the vocabulary and run.json in output_dir."""
    vocab = problem.vocabulary(config.data_dir)
    record = RunRecord(problem=config.problem, model=config.model,
                       hparams_set=config.hparams_set, hparams=config.hparams_overrides,
                       data_dir=os.path.abspath(config.data_dir),
                       vocab_file=vocab.RUN_FILE_NAME,
                       vocab_source=os.path.abspath(vocab.model_file),
                       usr_dir=config.usr_dir, warm_start_from=warm_start_from)
    directory.write_run_files(config.hparams, record, vocab.model_file)
