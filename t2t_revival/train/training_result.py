"""`TrainingResult`: what a training run returns."""

from __future__ import annotations

import dataclasses

from t2t_revival.run_dir.best_record import BestRecord
from t2t_revival.train.evaluation import Evaluation


@dataclasses.dataclass(frozen=True)
class TrainingResult:
    """The end of a run (`Trainer.train`).

    Attributes:
        step: the step training reached.
        evaluation: the final evaluation (None when the run was already at
            --train_steps and did not train).
        checkpoint: the latest checkpoint, of `step` (None without training).
        stop_reason: why training stopped before --train_steps ("" if not).
        chief: whether this worker is the chief (the one that writes).
        best: best/'s record (the chief's, once it evaluated), or None.
        best_checkpoint: the prefix of the checkpoint in best/, or None.
    """

    step: int
    evaluation: Evaluation | None = None
    checkpoint: str | None = None
    stop_reason: str = ""
    chief: bool = True
    best: BestRecord | None = None
    best_checkpoint: str | None = None
