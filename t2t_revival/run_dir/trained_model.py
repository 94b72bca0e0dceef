"""`TrainedModel`: a training directory's model, restored, with what describes it."""

from __future__ import annotations

import dataclasses
from typing import Any

from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.hparams import HParams
from t2t_revival.run_dir.run_record import RunRecord


@dataclasses.dataclass(frozen=True)
class TrainedModel:
    """What `TrainingDirectory.load` returns: everything decoding or export needs.

    Attributes:
        hparams: the resolved HParams of hparams.json.
        run_record: run.json (problem and model names, the run's flags).
        vocab: the run's copy of the shared vocabulary.
        checkpoint_path: the checkpoint prefix the weights come from.
        model: the built model, its weights restored from `checkpoint_path`.
    """

    hparams: HParams
    run_record: RunRecord
    vocab: SubwordVocabulary
    checkpoint_path: str
    model: Any
