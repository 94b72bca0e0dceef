"""`EarlyStopping`: the best dev figure so far, and when to give up on a run.

tensor2tensor's `--eval_early_stopping_steps` stopped a run whose dev metric
had not improved for N steps; here the patience counts evaluations
(`--eval_early_stopping_evals`), which does not depend on how often one
evaluates.
"""

from __future__ import annotations

from t2t_revival.run_dir.best_record import BestRecord


class EarlyStopping:
    """Follows one dev figure across evaluations.

    Args:
        patience: stop after this many evaluations in a row without a strict
            improvement (0: never stop).
        best: the best record so far (from best/best.json on a resumed run),
            or None. Evaluations without improvement are counted within this
            process: a resumed run counts from 0 again.
    """

    def __init__(self, patience: int = 0, best: BestRecord | None = None):
        self.patience = patience
        self.best = best
        self.evals_without_improvement = 0

    def update(self, candidate: BestRecord) -> bool:
        """Record one evaluation's figure; True when it is a new best."""
        if self.best is None or not self.best.ranks_like(candidate) \
                or self.best.is_better(candidate.value):
            self.best = candidate
            self.evals_without_improvement = 0
            return True
        self.evals_without_improvement += 1
        return False

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.evals_without_improvement >= self.patience

    def reason(self) -> str:
        """Why the run stopped, for the final summary."""
        n = self.evals_without_improvement
        return (f"dev {self.best.metric} did not improve for {n} "
                f"evaluation{'s' if n != 1 else ''} (--eval_early_stopping_evals="
                f"{self.patience}); the best is {self.best.describe()}")
