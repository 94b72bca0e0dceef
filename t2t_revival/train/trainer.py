"""`Trainer`: a training run, put together from its parts.

    config = resolve_train_config(problem=..., output_dir=..., data_dir=..., ...)
    result = Trainer(config).train()      # a TrainingResult

The parts, each with one job:

    TrainingSetup     problem, strategy, seed and dtype policy, model, optimizer (built once)
    UpdateStep        the distributed, XLA-compiled update (no I/O)
    RunCheckpoints    save and restore through the run's CheckpointFolder
    TrainingFaults    out of memory, damaged data, divergence: one line, saved first
    Evaluator         dev loss and dev metric, best/, early stopping, --export_on_best
    TimeBudget        --max_train_minutes and the cooldown fitted to it
    TrainingLoop      the updates, with progress lines, saves and evaluations

The trainer holds output_dir's lock (`RunLock`) while it trains, prepares the
run (`run_preparation`: data, resume checks, warm start, run files) and
stops cleanly on a signal (SaveThenStop: save, then stop).
"""

from __future__ import annotations

import contextlib
import errno
import signal
import time
from typing import Callable

import tensorflow as tf

from t2t_revival.run_dir.run_lock import RunLock
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.process.save_then_stop import SaveThenStop
from t2t_revival.process.stopped_by_signal import StoppedBySignal
from t2t_revival.train import run_preparation
from t2t_revival.train.evaluator import Evaluator, OnNewBest
from t2t_revival.train.run_checkpoints import RunCheckpoints
from t2t_revival.train.time_budget import TimeBudget
from t2t_revival.settings.train_config import TrainConfig
from t2t_revival.train.training_faults import TrainingFaults
from t2t_revival.train.training_loop import TrainingLoop
from t2t_revival.train.training_result import TrainingResult
from t2t_revival.train.training_setup import TrainingSetup
from t2t_revival.train.update_step import UpdateStep


class Trainer:
    """Trains `config.model` on `config.problem`, resuming from `output_dir`.

    Args:
        config: the resolved run options (`TrainConfig`).
        strategy: a tf.distribute strategy (default: `make_strategy` from config).
        log: a print-like callable for progress lines.
        clock: training's clock (tests pass a fake).
        update_step: makes the update step from (model, optimizer, strategy,
            hparams, xla=...); default `UpdateStep` (tests of the loop's
            scheduling pass a fake that moves the step without computing).

    Attributes:
        setup: the built parts (problem, strategy, model, optimizer).
        update_step, checkpoints, faults, evaluator, budget: the parts above.
        signals: the stop-signal policy while training (`SaveThenStop`).
    """

    def __init__(self, config: TrainConfig, strategy: tf.distribute.Strategy | None = None,
                 log: Callable[[str], None] = print, clock: Callable[[], float] = time.time,
                 update_step: Callable[..., UpdateStep] | None = None):
        self.config = config
        self._print = log
        self._output_closed = False
        self.clock = clock
        self.signals = SaveThenStop()  # entered by train()
        self.directory = TrainingDirectory(config.output_dir, keep=config.keep_checkpoint_max)
        self.setup = TrainingSetup.build(config, self.directory, strategy, self.log)
        setup = self.setup
        worker = None if setup.chief else setup.strategy.cluster_resolver.task_id
        self.checkpoints = RunCheckpoints(self.directory, setup.model, setup.optimizer, worker)
        self.faults = TrainingFaults(config.hparams, setup.problem, config.data_dir,
                                     setup.model, self.checkpoints, lambda: self.step,
                                     lambda: self.signals.armed)
        self.checkpoints.before_save = self.faults.refuse_non_finite
        self.checkpoints.saving = self.signals.saving
        self.update_step = (update_step or UpdateStep)(
            setup.model, setup.optimizer, setup.strategy, config.hparams, xla=config.xla)
        self.evaluator = Evaluator(config, setup.problem, setup.model, setup.strategy,
                                   setup.chief, self.directory, self.checkpoints, self.faults,
                                   self.log)
        self.budget = TimeBudget(config, setup.cooldown_end, setup.strategy, self.log)

    # ------------------------------------------------------------- the parts
    # The built parts, read where a caller wants them (`TrainingSetup`).
    problem = property(lambda self: self.setup.problem)
    strategy = property(lambda self: self.setup.strategy)
    chief = property(lambda self: self.setup.chief)
    model = property(lambda self: self.setup.model)
    optimizer = property(lambda self: self.setup.optimizer)
    hparams = property(lambda self: self.config.hparams)

    @property
    def step(self) -> int:
        """The optimizer's update count: the step training has reached."""
        return int(self.optimizer.iterations.numpy())

    @property
    def on_new_best(self) -> OnNewBest | None:
        """None, or `(checkpoint_path, BestRecord)` the chief calls each time
        best/ holds a new best (the CLI's --export_on_best)."""
        return self.evaluator.on_new_best

    @on_new_best.setter
    def on_new_best(self, callback: OnNewBest | None) -> None:
        self.evaluator.on_new_best = callback

    def restore(self) -> str | None:
        """Restore the newest intact checkpoint of the run, if any (saying so);
        returns its prefix, None when there is none."""
        return self.checkpoints.restore(
            run_preparation.restore_mismatch(self.config, self.directory), self.log)

    def save(self) -> str:
        """Save `ckpt-<step>` now (finite weights only); returns its prefix."""
        return self.checkpoints.save(self.step)

    def train_dataset(self, step: int):
        """The distributed training dataset of a run (re)starting at `step`."""
        config = self.config
        seed = config.seed + step  # a resumed run does not replay the same order

        def dataset_fn(input_context):
            return self.problem.dataset("train", config.data_dir, config.hparams,
                                        input_context=input_context, seed=seed,
                                        skip_corrupt=config.skip_corrupt_records)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    # ------------------------------------------------------------- training
    def log(self, line: str) -> None:
        """Print one line of the run's progress (the `log` given, `print` by default).

        If its output cannot be written any more (the reader of a pipe went
        away: `t2t-trainer ... | tee log` whose tee died; a hung-up terminal),
        a run in training saves at its step and stops (`SaveThenStop.request`,
        as SIGPIPE would); the lines after it are dropped. Before training
        there is nothing to save, and the error goes on (the CLI ends quietly,
        status 141).
        """
        if self._output_closed:
            return
        try:
            self._print(line)
        except OSError as e:
            if e.errno not in (errno.EPIPE, errno.EIO) or not self.signals.armed:
                raise
            self._output_closed = True
            self.signals.request(signal.SIGPIPE)

    def train(self) -> TrainingResult:
        """Train to `config.train_steps`, saving and evaluating on the way.

        Holds output_dir's lock (`RunLock`) throughout; SIGTERM, SIGINT, SIGHUP
        or a closed output (`log`) save a checkpoint at the current step and
        raise StoppedBySignal (`SaveThenStop`).
        """
        lock = RunLock(self.directory.path) if self.chief else None
        with lock or contextlib.nullcontext(), self.signals:
            try:
                return self._train()
            except SaveThenStop.StopRequested as stop:
                saved = self.checkpoints.save_unless_saved(self.step)
                name = StoppedBySignal.default_message(stop.signum)
                raise StoppedBySignal(stop.signum, f"{name} at step {self.step}; checkpoint "
                                                   f"saved: {saved}; rerun the same command "
                                                   f"to resume") from None

    def _train(self) -> TrainingResult:
        config, directory, log = self.config, self.directory, self.log
        if self.chief:
            directory.clean_leftovers(log)
        run_preparation.prepare_data(config, self.problem, log)
        run_preparation.check_vocabulary(config, self.problem, directory)
        if self.chief:
            directory.best.record()   # a damaged best.json: say so now, not after training
        # Before any run file is written: a failed resume changes nothing.
        resumed = self.restore()
        warm_start_from = run_preparation.warm_start_source(
            config, directory, self.model, self.problem, resumed is not None, log)
        if self.chief:
            run_preparation.write_run_files(config, self.problem, directory, warm_start_from)
        self.signals.arm()
        step = self.step
        if step >= config.train_steps:
            log(f"Already at step {step} >= --train_steps={config.train_steps}.")
            return TrainingResult(step=step, chief=self.chief)
        loop = TrainingLoop(config, self.update_step, self.checkpoints, self.evaluator,
                            self.faults, self.budget, self.signals.check, log, self.clock)
        return loop.run(iter(self.train_dataset(step)))


def train(config: TrainConfig, strategy: tf.distribute.Strategy | None = None,
          log: Callable[[str], None] = print, on_new_best: OnNewBest | None = None
          ) -> TrainingResult:
    """Build a Trainer for `config` and train; returns the `TrainingResult`.

    `on_new_best`: see `Trainer.on_new_best`.
    """
    trainer = Trainer(config, strategy=strategy, log=log)
    trainer.on_new_best = on_new_best
    return trainer.train()
