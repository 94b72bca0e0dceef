"""`BestRecord`: what `best/best.json` says about the best checkpoint of a run."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from t2t_revival.files.json_record import JsonRecord


@dataclasses.dataclass(frozen=True)
class BestRecord(JsonRecord):
    """The checkpoint with the best dev metric so far, and its figure.

    Attributes:
        step: the training step of the checkpoint.
        metric: what ranks the checkpoints: "bleu", "chrf", "f1" (the dev
            metric on the first `sentences` dev sentences) or "loss" (dev
            loss, when the trainer does not decode).
        value: the checkpoint's figure.
        higher_is_better: True for bleu, chrf and f1, False for loss.
        checkpoint: the checkpoint's prefix inside best/ (e.g. "ckpt-3000").
        sentences: how many dev sentences were decoded for `value` (0 for loss).
    """

    REPAIR: ClassVar[str] = ("delete the folder holding it (the trainer writes a new one at "
                             "its next evaluation)")

    step: int
    metric: str
    value: float
    higher_is_better: bool
    checkpoint: str
    sentences: int = 0

    def is_better(self, value: float) -> bool:
        """Whether `value` strictly improves on this record's (NaN never does)."""
        if math.isnan(value):
            return False
        if math.isnan(self.value):
            return True
        return value > self.value if self.higher_is_better else value < self.value

    def ranks_like(self, other: "BestRecord") -> bool:
        """Whether the two figures can be compared (same metric, same dev sentences)."""
        return (self.metric, self.sentences, self.higher_is_better) == \
            (other.metric, other.sentences, other.higher_is_better)

    def supersedes(self, current: "BestRecord | None") -> bool:
        """Whether this record replaces `current` in best/: it improves on its
        figure, or (figures that cannot be compared) it is of a later step."""
        if current is None:
            return True
        if not current.ranks_like(self):
            return self.step > current.step
        return current.is_better(self.value)

    def describe(self) -> str:
        """`dev bleu 12.34 at step 3000` (loss with 4 decimals)."""
        figure = f"{self.value:.4f}" if self.metric == "loss" else f"{self.value:.2f}"
        return f"dev {self.metric} {figure} at step {self.step}"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "BestRecord":
        record = cls(**values)
        if not isinstance(record.step, int) or not isinstance(record.checkpoint, str) \
                or not isinstance(record.value, (int, float)):
            raise TypeError("wrong field types")
        return record
