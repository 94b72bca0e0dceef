"""`TrainedModel`: a training directory's model, restored, with what describes it."""

from __future__ import annotations

import dataclasses
from typing import Any

from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.settings.hparams import HParams
from t2t_revival.models.build_model import build_model
from t2t_revival.process.phase_times import phase
from t2t_revival.run_dir.checkpoint_folder import Log, restore_model_weights, stderr_log
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
        built = []

        def restore(prefix: str) -> None:   # the model built once a checkpoint is chosen
            if not built:
                built.append(build_model(hparams, record.model))
                phase("built")
            restore_model_weights(built[0], prefix)

        # The run directory chooses (as for the LiteRT path, which has no TensorFlow).
        checkpoint_path = directory.checkpoint_to_restore(checkpoint_path, log, restore)
        model = built[0]
        phase("restored")
        return cls(hparams=hparams, run_record=record, vocab=vocab,
                   checkpoint_path=checkpoint_path, model=model)
