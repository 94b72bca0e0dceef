"""`Evaluation`: the dev figures of one evaluation during training."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What one evaluation measured on the dev split.

    Attributes:
        step: the training step evaluated.
        loss: the dev loss per target token (cross-entropy, no smoothing).
        accuracy: the share of dev target tokens predicted right (teacher forced).
        perplexity: exp(loss).
        metric: the dev metric on the decoded dev sentences ("bleu", "chrf",
            "f1"), "" when the trainer does not decode.
        score: that metric's figure (NaN without one), on all the dev
            sentences decoded.
        pairs: ((pair name, the metric's figure on its sentences), ...) of a
            problem of several target languages ("en-de", "en-fr"); () else.
    """

    step: int
    loss: float
    accuracy: float
    perplexity: float
    metric: str = ""
    score: float = math.nan
    pairs: tuple[tuple[str, float], ...] = ()

    def figure(self, name: str) -> float:
        """The figure that `name` ("loss", or `metric`) ranks by."""
        if name == "loss":
            return self.loss
        if name != self.metric:
            raise KeyError(f"no dev {name} at step {self.step} (dev metric: {self.metric!r})")
        return self.score

    def scalars(self) -> dict[str, float]:
        """{name: figure} for TensorBoard: loss, accuracy, perplexity and the
        metric, and the metric of each language pair (`bleu/en-de`)."""
        values = {"loss": self.loss, "accuracy": self.accuracy, "perplexity": self.perplexity}
        if self.metric:
            values[self.metric] = self.score
            values.update({f"{self.metric}/{pair}": score for pair, score in self.pairs})
        return values
