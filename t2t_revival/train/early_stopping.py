"""`EarlyStopping`: the best dev figure so far, and when to give up on a run.

tensor2tensor's `--eval_early_stopping_steps` stopped a run whose dev metric
had not improved for N steps; here the patience counts evaluations
(`--eval_early_stopping_evals`), which does not depend on how often one
evaluates.
"""

from __future__ import annotations

import math

from t2t_revival.run_dir.best_record import BestRecord


class EarlyStopping:
    """Follows one dev figure across evaluations.

    Args:
        patience: stop after this many evaluations in a row without a strict
            improvement (0: never stop).
        best: the best record so far (from best/best.json on a resumed run),
            or None. Evaluations without improvement are counted within this
            process: a resumed run counts from 0 again.
        min_delta: an evaluation resets the patience only when it beats the
            figure of the last one that did by more than this (Keras's
            `EarlyStopping(min_delta)`; tensor2tensor's
            `--eval_early_stopping_metric_delta`). best/ still takes every
            better figure.
    """

    def __init__(self, patience: int = 0, best: BestRecord | None = None,
                 min_delta: float = 0.0):
        self.patience = patience
        self.best = best
        self.min_delta = min_delta
        self.evals_without_improvement = 0
        # The figure the patience counts from: the last one that beat its own
        # by more than min_delta.
        self._reference = best

    def update(self, candidate: BestRecord) -> bool:
        """Record one evaluation's figure; True when it is a new best."""
        new_best = self.best is None or not self.best.ranks_like(candidate) \
            or self.best.is_better(candidate.value)
        reference = self._reference
        if reference is None or not reference.ranks_like(candidate) or (
                reference.is_better(candidate.value)
                and (math.isnan(reference.value)
                     or abs(candidate.value - reference.value) > self.min_delta)):
            self._reference = candidate
            self.evals_without_improvement = 0
        else:
            self.evals_without_improvement += 1
        if new_best:
            self.best = candidate
        return new_best

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.evals_without_improvement >= self.patience

    def reason(self) -> str:
        """Why the run stopped, for the final summary."""
        n = self.evals_without_improvement
        by = f" by more than {self.min_delta:g}" if self.min_delta else ""
        return (f"dev {self.best.metric} did not improve{by} for {n} "
                f"evaluation{'s' if n != 1 else ''} (--eval_early_stopping_evals="
                f"{self.patience}); the best is {self.best.describe()}")
