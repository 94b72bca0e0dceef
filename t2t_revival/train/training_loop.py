"""`TrainingLoop`: updates from a step to the end, with progress, saves and evaluations."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable

import tensorflow as tf

from t2t_revival.train.compile_notice import compile_notice
from t2t_revival.train.evaluator import Evaluator
from t2t_revival.train.run_checkpoints import RunCheckpoints
from t2t_revival.train.time_budget import TimeBudget
from t2t_revival.settings.train_config import TrainConfig
from t2t_revival.train.training_faults import TrainingFaults
from t2t_revival.train.training_result import TrainingResult
from t2t_revival.train.training_stats import TrainingStats
from t2t_revival.train.update_step import UpdateStep


def updates_in_next_call(step: int, end_step: int, config: TrainConfig) -> int:
    """How many updates the next call runs from `step`: at most
    --steps_per_execution, ending on the next progress, save, eval or final
    step (`end_step`), so those keep their own frequencies."""
    stop = end_step
    for every in (config.log_step_count_steps, config.save_checkpoints_steps,
                  config.local_eval_frequency):
        if every:
            stop = min(stop, (step // every + 1) * every)
    return max(1, min(config.steps_per_execution, stop - step))


class TrainingLoop:
    """Runs the updates of a run: the update step, then what falls on its step.

    After each call of the update step (one update, or up to
    --steps_per_execution): a stop signal saves and stops (`check_stop`), a
    diverged model stops the run, and on their steps a progress line
    (--log_step_count_steps), a checkpoint (--save_checkpoints_steps), an
    evaluation (--local_eval_frequency; early stopping may end the run) and
    the time budget's checks. At the end a checkpoint and an evaluation.

    Args:
        config: the run options.
        update_step: the compiled updates (`UpdateStep`).
        checkpoints: the run's checkpoints.
        evaluator: the evaluations, best/ and early stopping.
        faults: the run's fault mapping.
        budget: the time budget and the cooldown fitted to it.
        check_stop: called between updates; raises to stop the run (a signal).
        log: a print-like callable.
        clock: seconds (tests pass a fake).
    """

    def __init__(self, config: TrainConfig, update_step: UpdateStep, checkpoints: RunCheckpoints,
                 evaluator: Evaluator, faults: TrainingFaults, budget: TimeBudget,
                 check_stop: Callable[[], None], log: Callable[[str], None],
                 clock: Callable[[], float] = time.time):
        self.config, self.update_step, self.checkpoints = config, update_step, checkpoints
        self.evaluator, self.faults, self.budget = evaluator, faults, budget
        self.check_stop, self.log, self.clock = check_stop, log, clock

    @property
    def step(self) -> int:
        return int(self.update_step.optimizer.iterations.numpy())

    def _summary_writer(self):
        if not self.checkpoints.chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(
            os.path.join(self.checkpoints.directory.path, "train"))

    def run(self, iterator) -> TrainingResult:
        """Train from the optimizer's step to the end; `iterator` over the
        distributed training batches."""
        config, budget, optimizer = self.config, self.budget, self.update_step.optimizer
        step = self.step
        writer = self._summary_writer()
        stats = TrainingStats(step, budget.end_step, writer, clock=self.clock)
        compiled: set[bool] = set()   # which calls ran: one update, several (a program each)
        while step < budget.end_step:
            updates = updates_in_next_call(step, budget.end_step, config)
            first_call = contextlib.nullcontext() if (updates > 1) in compiled else \
                compile_notice(self.log, "the training step" if updates == 1 else
                               "the training step of several updates a call", config.xla,
                               "its first update" if updates == 1 else "its first updates")
            compiled.add(updates > 1)
            with first_call, self.faults.data_errors_named(), \
                    self.faults.out_of_memory_named(f"the update after step {step}"):
                if updates == 1:
                    loss, tokens, grad_norm = self.update_step.run(iterator)
                else:
                    loss, tokens, grad_norm = self.update_step.run_many(
                        iterator, tf.constant(updates))
            step = self.step
            self.check_stop()   # a stop signal during the update: save and stop
            stats.update(tokens)
            self.faults.check_diverged(step, loss, grad_norm)
            on_log_step = step % config.log_step_count_steps == 0 or step == budget.end_step
            if on_log_step:
                self.log(stats.report(
                    step, loss, float(optimizer.learning_rate), grad_norm,
                    loss_scale=optimizer.dynamic_scale if self.update_step.fp16 else None))
            if config.save_checkpoints_steps and step % config.save_checkpoints_steps == 0:
                self.checkpoints.save(step)
            if config.local_eval_frequency and step % config.local_eval_frequency == 0 \
                    and step != budget.end_step:
                self.evaluator.evaluate(step)
                if self.evaluator.stop_reason:
                    self.log(f"Stopping at step {step}: {self.evaluator.stop_reason}.")
                    break
            if on_log_step and config.max_train_minutes and step < budget.end_step \
                    and budget.is_up(stats.elapsed()):
                self.log(f"Stopping at step {step}: the --max_train_minutes="
                         f"{config.max_train_minutes:g} budget is spent.")
                budget.log_cut_cooldown(step)
                break
            if on_log_step and budget.fit and step < budget.end_step:
                budget.fit_cooldown(step, stats)
        if step < config.train_steps and step == budget.end_step:
            self.log(f"Stopped at step {step}, where the learning-rate cooldown fitted to "
                     f"--max_train_minutes={config.max_train_minutes:g} ends "
                     f"(--train_steps={config.train_steps} was out of its reach).")
        checkpoint = self.checkpoints.save_unless_saved(step)
        evaluation = self.evaluator.evaluate(step)
        best = self.evaluator.best if self.checkpoints.chief else None
        writer.flush()
        self.evaluator.writer().flush()
        return TrainingResult(
            step=step, evaluation=evaluation, checkpoint=checkpoint,
            stop_reason=self.evaluator.stop_reason, chief=self.checkpoints.chief, best=best,
            best_checkpoint=self.checkpoints.directory.best.checkpoint_path() if best else None)
