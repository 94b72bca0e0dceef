"""`ScoredPredictions`: a problem's metric over a list of predictions."""

from __future__ import annotations

import dataclasses
from typing import Any

SCORE_NAMES = {"bleu": "bleu", "chrf": "chrf", "evalb": "f1"}
"""The name of each metric's headline figure (`ScoredPredictions.score`), as the
trainer prints it and writes it to TensorBoard (`eval/bleu`, `eval/chrf`,
`eval/f1`)."""


def score_name(metric: str) -> str:
    """The headline figure's name of the `eval_metric` `metric` ("evalb" -> "f1")."""
    return SCORE_NAMES.get(metric, metric)


@dataclasses.dataclass(frozen=True)
class ScoredPredictions:
    """What `Problem.score_predictions` returns, whatever the metric.

    Attributes:
        metric: the `eval_metric` scored with ("bleu", "chrf" or "evalb").
        score: the headline figure, higher is better: sacreBLEU, chrF2, or
            EVALB F1.
        text: the report t2t-decoder prints.
        json_text: the same report as one JSON object (t2t-decoder --json).
        details: the metric's own result: [sacreBLEU, tokenized BLEU]
            `BleuScore`s (and chrF2's `MetricScore`), or the `EvalbScore`.
        outputs: files to write beside the predictions, by suffix: one
            line each (e.g. {"trees": the predicted trees, bracketed}).
    """

    metric: str
    score: float
    text: str
    json_text: str
    details: Any = None
    outputs: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def score_name(self) -> str:
        """What `score` is: "bleu", "chrf" or "f1" (see `score_name`)."""
        return score_name(self.metric)

    def format(self, as_json: bool = False) -> str:
        return self.json_text if as_json else self.text
