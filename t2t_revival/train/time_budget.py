"""`TimeBudget`: --max_train_minutes, and the cooldown fitted to it."""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from t2t_revival.train.cooldown_fit import CooldownFit
from t2t_revival.settings.train_config import TrainConfig
from t2t_revival.train.training_stats import TrainingStats
from t2t_revival.train.worker_agreement import any_worker, chief_value


class TimeBudget:
    """When a run's time is up, and where its learning-rate cooldown ends.

    Without --max_train_minutes the run ends at --train_steps. With it, the
    run stops at the first progress line after the budget is spent; and with
    a cooldown (the hparam learning_rate_cooldown_steps) the cooldown is
    fitted to the budget (`CooldownFit`): `end_step` moves to where the
    budget runs out at the pace so far, and `cooldown_end` (the variable the
    schedule reads) with it. Every worker of a MultiWorker run takes the same
    decisions (`worker_agreement`).

    Args:
        config: the run options (train_steps, max_train_minutes, log_step_count_steps).
        cooldown_end: the schedule's end-of-cooldown variable (None without a fit).
        strategy: the run's strategy.
        log: a print-like callable.
    """

    def __init__(self, config: TrainConfig, cooldown_end: tf.Variable | None,
                 strategy: tf.distribute.Strategy, log: Callable[[str], None]):
        self.config, self.cooldown_end, self.strategy, self.log = \
            config, cooldown_end, strategy, log
        self.cooldown_steps = config.hparams.learning_rate_cooldown_steps
        self.fit = CooldownFit(config.train_steps, self.cooldown_steps,
                               60.0 * config.max_train_minutes, config.log_step_count_steps) \
            if self.fits(config) else None

    @staticmethod
    def fits(config: TrainConfig) -> bool:
        """Whether the run fits its cooldown to its budget (both are set)."""
        return bool(config.hparams.learning_rate_cooldown_steps and config.max_train_minutes)

    @property
    def end_step(self) -> int:
        """The step this run trains to: --train_steps, or before it where the
        time budget runs out (`CooldownFit`)."""
        return self.fit.end_step if self.fit else self.config.train_steps

    def is_up(self, elapsed: float) -> bool:
        """Whether the budget is spent after `elapsed` seconds (on any worker:
        the others would wait forever in the next all-reduce)."""
        return any_worker(self.strategy, elapsed >= 60.0 * self.config.max_train_minutes)

    def fit_cooldown(self, step: int, stats: TrainingStats) -> None:
        """Move the cooldown's end to where the budget runs out at the pace so
        far; every worker takes the chief's estimate."""
        elapsed = stats.elapsed()
        end = int(chief_value(self.strategy, self.fit.estimate(step, stats.start_step, elapsed)))
        if end == self.fit.end_step:
            return
        line = self.fit.move_to(end, step, stats.start_step, elapsed)
        self.cooldown_end.assign(end)
        stats.train_steps = end
        if line:
            self.log(line)

    def log_cut_cooldown(self, step: int) -> None:
        """Say where the time limit, stopping the run at `step`, left the
        learning-rate cooldown, and what would fit it in."""
        cooldown, end = self.cooldown_steps, self.end_step
        if not cooldown:
            return
        # A fitted end (CooldownFit) was within reach at the pace so far.
        fell = "the pace fell after the cooldown was fitted to the budget"
        if step > end - cooldown:
            why = fell if end < self.config.train_steps else \
                "a lower --train_steps ends it inside the budget"
            self.log(f"The learning-rate cooldown (learning_rate_cooldown_steps={cooldown}) "
                     f"stopped {end - step} updates short of 0; {why}.")
        else:
            why = fell if end < self.config.train_steps else \
                "a lower --train_steps fits it inside the budget"
            self.log(f"The learning-rate cooldown (learning_rate_cooldown_steps={cooldown}, "
                     f"from step {end - cooldown}) did not start; {why}.")
