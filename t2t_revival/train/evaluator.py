"""`Evaluator`: the trainer's evaluations: dev loss, dev metric, best/, early stopping."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from typing import Callable

import tensorflow as tf

from t2t_revival.errors import UserError
from t2t_revival.models.trained_model import TrainedModel
from t2t_revival.run_dir.best_record import BestRecord
from t2t_revival.run_dir.file_names import CHECKPOINT_PREFIX
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.train.compile_notice import compile_notice
from t2t_revival.train.dev_metric_evaluator import DevMetricEvaluator, dev_decoding_devices
from t2t_revival.train.early_stopping import EarlyStopping
from t2t_revival.train.evaluation import Evaluation
from t2t_revival.train.losses import token_metrics_sums
from t2t_revival.train.run_checkpoints import RunCheckpoints
from t2t_revival.train.strategy import local_devices
from t2t_revival.settings.train_config import TrainConfig
from t2t_revival.train.training_faults import TrainingFaults
from t2t_revival.train.worker_agreement import chief_decides

OnNewBest = Callable[[str, BestRecord], None]


class Evaluator:
    """Evaluates the model in memory on the dev split, at the trainer's request.

    Each `evaluate(step)`: the dev loss, accuracy and perplexity (teacher
    forced, `dev_loss`); on the chief with --eval_decode_sentences, the
    problem's own metric on that many dev sentences decoded with beam search
    (`DevMetricEvaluator`); one line and TensorBoard's eval/ scalars; then
    best/ follows the ranking figure (the metric, else the dev loss), and
    early stopping counts evaluations without a better one (`stop_reason`).
    Under MultiWorker the chief decides, the other workers follow.

    Args:
        config: the run options (and its hparams).
        problem: the run's problem (dev data, metric).
        model: the model in memory.
        strategy: the run's strategy; chief: whether this worker writes.
        directory: the training directory (best/, eval/ summaries).
        checkpoints: the run's checkpoints (a new best is saved first).
        faults: the run's fault mapping (out of memory, data errors).
        log: a print-like callable.

    Attributes:
        loss_sums: the compiled dev computation of one batch, (batch) ->
            (cross-entropy sum, correct tokens, target tokens).
        on_new_best: None, or `(checkpoint_path, BestRecord)` called on the
            chief each time best/ holds a new best (--export_on_best).
        stop_reason: why training should stop early ("" while it should not).
        dev_metric: the chief's dev decoding (`start` makes it), or None.
    """

    def __init__(self, config: TrainConfig, problem, model, strategy: tf.distribute.Strategy,
                 chief: bool, directory: TrainingDirectory, checkpoints: RunCheckpoints,
                 faults: TrainingFaults, log: Callable[[str], None]):
        self.config, self.problem, self.model = config, problem, model
        self.strategy, self.chief, self.directory = strategy, chief, directory
        self.checkpoints, self.faults, self.log = checkpoints, faults, log
        # Uncompiled, with or without --xla: the dev batches come in as many
        # shapes as length buckets, and XLA compiles a program per shape
        # (seconds each: the first evaluation took minutes, issue 61) for a
        # forward pass that runs uncompiled in seconds. Traced once for any
        # shape (reduce_retracing generalizes after the second).
        self.loss_sums = tf.function(self._loss_sums, reduce_retracing=True, autograph=False)
        self.on_new_best: OnNewBest | None = None
        self.stop_reason = ""
        self.dev_metric: DevMetricEvaluator | None = None
        self.early_stopping: EarlyStopping | None = None
        self._writer = None
        self._last: Evaluation | None = None
        self._compiled = False   # whether an evaluation ran (and traced the dev loss)

    # ------------------------------------------------------------ dev loss
    def _loss_sums(self, batch):
        logits = self.model(batch, training=False)
        return token_metrics_sums(logits, batch["targets"])

    def dev_loss(self, step: int) -> Evaluation:
        """Loss, per-token accuracy and perplexity on the dev split (its first
        --eval_steps batches)."""
        config = self.config
        dataset = self.problem.dataset("eval", config.data_dir, config.hparams,
                                       skip_corrupt=config.skip_corrupt_records)
        xent = correct = tokens = 0.0
        with self.faults.data_errors_named():
            for i, batch in enumerate(dataset):
                if config.eval_steps and i >= config.eval_steps:
                    break
                x, c, t = self.loss_sums(batch)
                xent, correct, tokens = xent + float(x), correct + float(c), tokens + float(t)
        if not tokens:
            raise UserError(f"the dev split of {config.problem} in {config.data_dir} is "
                            f"empty; rerun t2t-datagen. Received: data_dir={config.data_dir}")
        loss = xent / tokens
        return Evaluation(step=step, loss=loss, accuracy=correct / tokens,
                          perplexity=math.exp(min(loss, 50.0)))

    # ---------------------------------------------------------- the start
    def start(self) -> None:
        """At the first evaluation (or before, idempotent): best/ as a killed
        update left it, the early-stopping state, and the chief's dev decoding."""
        if self.early_stopping is not None:
            return
        config, best = self.config, None
        if self.chief:
            self.directory.best.recover()   # what a kill mid-update left
            best = self.directory.best.record()
            if best is not None:
                self.log(f"best/ holds {best.describe()}.")
            if config.eval_decode_sentences:
                trained = TrainedModel(
                    hparams=config.hparams, vocab=self.problem.vocabulary(config.data_dir),
                    checkpoint_path="", model=self.model,
                    run_record=RunRecord(problem=config.problem, model=config.model,
                                         hparams_set=config.hparams_set,
                                         hparams=config.hparams_overrides))
                self.dev_metric = DevMetricEvaluator(
                    self.problem, config.data_dir, trained, config.eval_decode_sentences,
                    config.dev_decoding, config.eval_metric,
                    dev_decoding_devices(local_devices(self.strategy)))
                if self.dev_metric.skipped:
                    self.log(f"Dev decoding leaves out {self.dev_metric.skipped} of the first "
                             f"{config.eval_decode_sentences} dev sentences: longer than "
                             f"max_length={config.hparams.max_length} tokens.")
            if best is not None:
                self._say_if_ranked_otherwise(best)
        self.early_stopping = EarlyStopping(config.eval_early_stopping_evals, best,
                                            config.eval_early_stopping_delta)

    @property
    def ranked_by(self) -> tuple[str, int]:
        """What ranks best/ in this run: (the dev metric, dev sentences decoded
        for it); ("loss", 0) when the trainer does not decode."""
        return (self.dev_metric.metric, len(self.dev_metric)) if self.dev_metric else ("loss", 0)

    def _say_if_ranked_otherwise(self, best: BestRecord) -> None:
        """Warn when best/ was ranked by another metric (or on another number of
        dev sentences) than this run's: the figures cannot be compared, so this
        run's first evaluation replaces it (`EarlyStopping.update`)."""
        metric, sentences = self.ranked_by
        if (best.metric, best.sentences) == (metric, sentences):
            return

        def ranking(name, n):
            return f"dev {name}" + (f" on {n} sentences" if n else "")
        self.log(f"best/ was ranked by {ranking(best.metric, best.sentences)}; this run ranks "
                 f"by {ranking(metric, sentences)}, so its first evaluation replaces best/ "
                 f"(rerun with the earlier --eval_decode_sentences to keep the ranking).")

    # ------------------------------------------------------------ evaluate
    def evaluate(self, step: int) -> Evaluation:
        """Evaluate at `step` (once: a second call at the same step returns the
        first's figures), say it in one line, write the scalars, keep best/."""
        if self._last is not None and self._last.step == step:
            return self._last   # stopped early right after evaluating
        self.start()
        # The first evaluation traces the dev loss, and the dev decoding
        # compiles its search once it pays off (xla=auto); each says so, as
        # t2t-decoder does.
        loss_notice = contextlib.nullcontext() if self._compiled else \
            compile_notice(self.log, "the dev loss", False, "its first evaluation")
        self._compiled = True
        with self.faults.out_of_memory_named(f"the dev loss at step {step}"):
            with loss_notice:
                evaluation = self.dev_loss(step)
            if self.dev_metric is not None:   # the chief decodes; the other workers wait
                scored = self.dev_metric.evaluate(compiling=self._compiling_dev_search)
                evaluation = dataclasses.replace(
                    evaluation, metric=scored.score_name, score=scored.score,
                    pairs=tuple(self.dev_metric.pair_scores.items()))
        line = (f"eval at step {step}: loss {evaluation.loss:.4f}  "
                f"accuracy {evaluation.accuracy:.4f}  "
                f"perplexity {evaluation.perplexity:.2f}")
        if self.dev_metric is not None:
            line += (f"  {evaluation.metric} {evaluation.score:.2f} ({len(self.dev_metric)} dev "
                     f"sentences, {self.dev_metric.seconds:.0f} s)")
            line += "".join(f"  {evaluation.metric} {pair} {score:.2f}"
                            for pair, score in evaluation.pairs)
        self.log(line)
        with self.writer().as_default(step=step):
            for name, value in evaluation.scalars().items():
                tf.summary.scalar(name, value)
        self._keep_best(evaluation)
        self._last = evaluation
        return evaluation

    def _compiling_dev_search(self, programs: int) -> None:
        """`Decoder.translate`'s `compiling` callback for the dev decoding."""
        self.log(f"compiling the dev decoding's search for XLA: {programs} program"
                 f"{'s' if programs > 1 else ''} (once; the next evaluations reuse them; "
                 f"the eval line gives the time)...")

    def writer(self):
        """TensorBoard's `output_dir/eval` writer on the chief, a no-op elsewhere."""
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(
                os.path.join(self.directory.path, "eval")) if self.chief \
                else tf.summary.create_noop_writer()
        return self._writer

    @property
    def best(self) -> BestRecord | None:
        """The best record so far (after the first evaluation), or None."""
        return self.early_stopping.best if self.early_stopping else None

    def _keep_best(self, evaluation: Evaluation) -> None:
        """Copy this step's checkpoint into best/ when the ranking figure
        improved; set `stop_reason` when it has not for
        --eval_early_stopping_evals evaluations."""
        step, improved, stop = evaluation.step, False, False
        if self.chief:
            name, sentences = self.ranked_by
            candidate = BestRecord(step=step, metric=name, value=float(evaluation.figure(name)),
                                   higher_is_better=name != "loss",
                                   checkpoint=f"{CHECKPOINT_PREFIX}-{step}",
                                   sentences=sentences)
            improved = self.early_stopping.update(candidate)
            stop = self.early_stopping.should_stop
        improved, stop = chief_decides(self.strategy, self.chief, improved, stop)
        if improved:
            checkpoint = self.checkpoints.save_unless_saved(step)
            if self.chief:
                path = self.directory.best.update(checkpoint, self.early_stopping.best)
                self.log(f"New best: {self.early_stopping.best.describe()}, copied to {path}.")
                if self.on_new_best is not None:
                    self.on_new_best(path, self.early_stopping.best)
        if stop:
            self.stop_reason = self.early_stopping.reason() if self.chief else \
                "the chief's dev metric stopped improving"
