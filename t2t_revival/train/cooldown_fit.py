"""`CooldownFit`: the learning-rate cooldown ends where the time budget runs out."""

from __future__ import annotations


class CooldownFit:
    """Moves the end of the learning-rate cooldown to where --max_train_minutes
    runs out, when that comes before --train_steps.

    With a cooldown (the hparam learning_rate_cooldown_steps) and a time
    budget, a run on a machine slower than the one --train_steps was chosen
    for would be stopped by the budget part-way through the cooldown, or
    before it, with its learning rate still high (the Multi30k recipe lost
    BLEU so: benchmarks/RESULTS.md). So at each progress line, once a tenth
    of the budget has passed (the first calls' compilation then weighs
    little in the pace), `estimate` projects the step the budget ends at from
    the pace so far (updates per second of training, evaluations and
    checkpoints included), and the trainer moves the cooldown's end there:
    `end_step`, a multiple of --log_step_count_steps, at most --train_steps,
    never before the next progress line. Training then stops at `end_step`,
    the cooldown done. The estimate is renewed at every progress line, so the
    end follows the pace (a move of n updates changes the learning rate by n
    / cooldown_steps of equation 3).

    Each run starts from --train_steps: a resumed run has a fresh budget.

    Args:
        train_steps: --train_steps.
        cooldown_steps: the hparam learning_rate_cooldown_steps (> 0).
        budget_seconds: --max_train_minutes in seconds (> 0).
        log_every: --log_step_count_steps.
    """

    # The share of the budget spent before the first estimate.
    WARM_IN = 0.1

    def __init__(self, train_steps: int, cooldown_steps: int, budget_seconds: float,
                 log_every: int):
        if cooldown_steps <= 0 or budget_seconds <= 0:
            raise ValueError("CooldownFit needs a cooldown and a time budget. Received: "
                             f"cooldown_steps={cooldown_steps}, "
                             f"budget_seconds={budget_seconds}")
        self.train_steps = train_steps
        self.cooldown_steps = cooldown_steps
        self.budget_seconds = budget_seconds
        self.log_every = log_every
        self.end_step = train_steps
        self._logged_end = train_steps

    def estimate(self, step: int, start_step: int, elapsed: float) -> int:
        """The end step for the budget, at the pace from `start_step` (where this
        run started) to `step` in `elapsed` seconds; `end_step` unchanged
        before the warm-in and once the budget is spent (the trainer's time
        limit then stops the run)."""
        if (step <= start_step or elapsed < self.WARM_IN * self.budget_seconds
                or elapsed >= self.budget_seconds):
            return self.end_step
        pace = (step - start_step) / elapsed
        reach = int(step + pace * (self.budget_seconds - elapsed))
        next_progress = (step // self.log_every + 1) * self.log_every
        return min(self.train_steps, max(next_progress, reach // self.log_every * self.log_every))

    def move_to(self, end_step: int, step: int, start_step: int, elapsed: float) -> str | None:
        """Set `end_step`; returns a line to log when the end first leaves
        --train_steps, or moves by a tenth of the cooldown since the last line."""
        self.end_step = end_step
        if abs(end_step - self._logged_end) < max(1, self.cooldown_steps // 10):
            return None
        self._logged_end = end_step
        per_minute = 60.0 * (step - start_step) / max(elapsed, 1e-9)
        minutes = self.budget_seconds / 60.0
        if end_step >= self.train_steps:
            return (f"At {per_minute:,.0f} updates a minute the --max_train_minutes="
                    f"{minutes:g} budget reaches --train_steps={self.train_steps}: the "
                    f"learning-rate cooldown ends there again.")
        return (f"At {per_minute:,.0f} updates a minute the --max_train_minutes={minutes:g} "
                f"budget ends near step {end_step}, before --train_steps="
                f"{self.train_steps}: the learning-rate cooldown (learning_rate_cooldown_steps="
                f"{self.cooldown_steps}) now ends there, from step "
                f"{max(0, end_step - self.cooldown_steps)}, and training stops there.")
