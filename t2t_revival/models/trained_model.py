"""`TrainedModel`: a training directory's model, restored, with what describes it."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams
from t2t_revival.models.build_model import build_model
from t2t_revival.process.phase_times import phase
from t2t_revival.run_dir.checkpoint_folder import (CheckpointFolder, Log, restore_model_weights,
                                                   stderr_log)
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.training_directory import TrainingDirectory


@dataclasses.dataclass(frozen=True)
class TrainedModel:
    """Everything decoding or export needs (`TrainedModel.load`).

    Attributes:
        hparams: the resolved HParams of hparams.json (for inference:
            `HParams.for_inference`).
        run_record: run.json (problem and model names, the run's flags).
        vocab: the run's copy of the shared vocabulary.
        checkpoint_path: the checkpoint prefix the weights come from.
        model: the built model, its weights restored from `checkpoint_path`.
    """

    hparams: HParams
    run_record: RunRecord
    vocab: SubwordVocabulary | T2TSubwordVocabulary
    checkpoint_path: str
    model: Any

    @classmethod
    def load(cls, output_dir: str | TrainingDirectory, checkpoint_path: str | None = None,
             log: Log = stderr_log) -> "TrainedModel":
        """The run's model restored from `checkpoint_path` (default: the newest
        intact checkpoint; each one skipped is said through `log`). A folder of
        checkpoints (`output_dir/best`, `output_dir/averaged`) means its newest
        intact one.

        Reads, in this order, each a one-line UserError when missing or
        corrupt: hparams.json, run.json, the vocabulary, the checkpoint. The
        model computes in float32 whatever the run trained in
        (`HParams.for_inference`).
        """
        directory = output_dir if isinstance(output_dir, TrainingDirectory) \
            else TrainingDirectory(output_dir)
        hparams = directory.read_hparams().for_inference()
        record = directory.read_run_record()
        vocab = directory.vocabulary(record)
        named = checkpoint_path and not os.path.isdir(checkpoint_path)
        if named:
            directory.checkpoints.check_named(checkpoint_path)
        model = build_model(hparams, record.model)
        phase("built")
        if named:
            restore_model_weights(model, checkpoint_path)
        else:
            folder = CheckpointFolder(checkpoint_path) if checkpoint_path \
                else directory.checkpoints
            checkpoint_path = folder.restore_newest(
                lambda prefix: restore_model_weights(model, prefix), log)
            if checkpoint_path is None:
                raise UserError(f"no checkpoint in {folder.path}; train first, or pass "
                                f"--checkpoint_path. Received: output_dir={directory.path!r}"
                                + (f", checkpoint_path={folder.path!r}"
                                   if folder is not directory.checkpoints else ""))
        phase("restored")
        return cls(hparams=hparams, run_record=record, vocab=vocab,
                   checkpoint_path=checkpoint_path, model=model)
