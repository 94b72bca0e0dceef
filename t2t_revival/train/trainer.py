"""The training loop: tf.distribute, a per-replica XLA step, checkpoints, eval.

One update (optimizer step) is:

    for each of `gradient_accumulation_steps` micro-batches, on every replica:
        grads_r += d(loss_sum_r / batch_size) / d(weights)   # XLA-compiled
        tokens_r += non-pad target tokens
    T = all_reduce(SUM, tokens_r)                      # global target tokens
    g = all_reduce(SUM, grads_r * batch_size / T)      # the global token mean
    clip g by global norm (if clip_grad_norm), then Adam applies g once

so the loss is normalized by the global number of target tokens of the update,
across replicas and micro-batches, never a mean of per-replica means.

Keras turns XLA off under tf.distribute, and compiling the whole cross-replica
step fails on logical CPU devices, so only each replica's forward and backward
pass is a `tf.function(jit_compile=True)`, called on that replica's device
inside `strategy.run`; the all-reduce and the optimizer update stay outside it.
With one CPU replica (the trainer's strategy on a machine without GPUs), no
gradient accumulation and no loss scaling, the whole update is fused instead: forward, backward, the (trivial)
all-reduce, clipping and Adam in ONE XLA call (`Trainer.fused`), which saves
the graph ops Adam runs per variable (benchmarks/train_loop.py measures it).

Several updates per call (`--steps_per_execution=N`, Keras's idea): one
`tf.function` call runs up to N updates in a `tf.while_loop`, summing the
target token counts on the device, so the host reads the step, the token
count, the loss and the gradient norm back once per call instead of once per
update. A call is shortened to end exactly on the next progress, save, eval
or final step, so those keep their own frequencies.
"""

from __future__ import annotations

import contextlib
import errno
import filecmp
import math
import os
import shutil
import signal
import tempfile
import time
from typing import Any

import keras
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.data.data_error import DataError
from t2t_revival.device_memory import OutOfMemoryError, out_of_memory_error
from t2t_revival.errors import UserError
from t2t_revival.hparams import resolve
from t2t_revival.run_dir.best_record import BestRecord
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.file_names import CHECKPOINT_PREFIX
from t2t_revival.run_dir.run_lock import RunLock
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.trained_model import TrainedModel
from t2t_revival.run_dir.training_directory import CORRUPT_RESTORE_ERRORS, TrainingDirectory
from t2t_revival.save_then_stop import SaveThenStop
from t2t_revival.stopped_by_signal import StoppedBySignal
from t2t_revival.train.cooldown_fit import CooldownFit
from t2t_revival.train.dev_metric_evaluator import DevMetricEvaluator
from t2t_revival.train.early_stopping import EarlyStopping
from t2t_revival.train.losses import smoothed_cross_entropy_sum, token_metrics_sums
from t2t_revival.train.noam_schedule import NoamSchedule
from t2t_revival.train.reduced_gradients_adam import ReducedGradientsAdam
from t2t_revival.train.strategy import is_chief, make_strategy
from t2t_revival.train.train_config import TrainConfig
from t2t_revival.train.training_stats import TrainingStats

DEFAULT_TMP_DIR = os.path.join(tempfile.gettempdir(), "t2t_datagen")  # tensor2tensor's


def _ranked_by(evaluator: "DevMetricEvaluator | None") -> tuple[str, int]:
    """What ranks best/ in this run: (the dev metric, dev sentences decoded for
    it); ("loss", 0) when the trainer does not decode."""
    return (evaluator.metric, len(evaluator)) if evaluator is not None else ("loss", 0)


class Trainer:
    """Trains `config.model` on `config.problem`, resuming from `output_dir`.

    Args:
        config: the run options.
        strategy: a tf.distribute strategy (default: `make_strategy` from config).
        log: a print-like callable for progress lines.

    Attributes:
        on_new_best: None, or a callable `(checkpoint_path, BestRecord)` the
            chief calls each time best/ holds a new best checkpoint (the
            CLI's --export_on_best).
        stop_reason: why training stopped before --train_steps ("" if not).
    """

    on_new_best = None
    stop_reason = ""
    clock = staticmethod(time.time)  # training's clock (tests pass a fake)
    _dev = None            # (EarlyStopping, DevMetricEvaluator | None), at the first eval
    _last_eval = None      # (step, metrics) of the latest evaluation

    def __init__(self, config: TrainConfig, strategy: tf.distribute.Strategy | None = None,
                 log=print):
        self.config = config
        self._print = log
        self._output_closed = False
        self.signals = SaveThenStop()  # entered by train()
        self.directory = TrainingDirectory(config.output_dir)
        # User errors first, before TensorFlow sets up its devices.
        registry.load_all()
        self.problem = registry.problems.get(config.problem)()
        self.problem.locate_data(config.data_dir, config.tmp_dir or DEFAULT_TMP_DIR)
        registry.models.get(config.model)  # an unknown name is a UserError here
        self.hparams = resolve(config.hparams_set, config.hparams, self.problem)
        self._check_resume_config()
        if self.hparams.learning_rate_cooldown_steps > config.train_steps:
            raise UserError(
                f"hparam learning_rate_cooldown_steps="
                f"{self.hparams.learning_rate_cooldown_steps} is more than --train_steps="
                f"{config.train_steps}: the cooldown is the last updates before "
                f"--train_steps; lower it or raise --train_steps.")
        self.strategy = strategy or make_strategy(config.num_cpu_devices, config.worker_gpu)
        self.chief = is_chief(self.strategy)
        keras.utils.set_random_seed(config.seed)
        keras.mixed_precision.set_global_policy(self.hparams.mixed_precision)
        self.fp16 = self.hparams.mixed_precision == "mixed_float16"
        cooldown = self.hparams.learning_rate_cooldown_steps
        # With a cooldown and a time budget, the cooldown ends where the budget
        # runs out, if that comes before --train_steps (`CooldownFit`).
        self.cooldown_fit = CooldownFit(config.train_steps, cooldown,
                                        60.0 * config.max_train_minutes, config.log_every) \
            if cooldown and config.max_train_minutes else None
        with self.strategy.scope():
            self.model = self.directory.build_model(self.hparams, config.model)
            # Where the cooldown ends, read by the schedule at every update.
            self._cooldown_end = tf.Variable(config.train_steps, dtype=tf.int64,
                                             trainable=False, name="cooldown_end") \
                if self.cooldown_fit else None
            optimizer = ReducedGradientsAdam(
                learning_rate=NoamSchedule(self.hparams.d_model,
                                           self.hparams.learning_rate_warmup_steps,
                                           self.hparams.learning_rate,
                                           cooldown, config.train_steps,
                                           end_step=self._cooldown_end),
                beta_1=self.hparams.adam_beta1, beta_2=self.hparams.adam_beta2,
                epsilon=self.hparams.adam_epsilon,
                # The optimizer sees the all-reduced gradient, so this clips
                # by the global norm of the whole update.
                global_clipnorm=self.hparams.clip_grad_norm or None)
            if self.fp16:
                # Dynamic loss scaling; skips updates whose gradients overflow.
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
        self.checkpoint = make_checkpoint(self.model, self.optimizer)
        self._manager = None  # made after the restore: it reads the `checkpoint` index
        # autograph=False throughout: no Python control flow on tensors here,
        # and autograph's conversion cache can go stale in long processes.
        self.grad_fn = tf.function(self._replica_grads, jit_compile=config.xla,
                                   reduce_retracing=True, autograph=False)
        self.eval_fn = tf.function(self._eval_sums, jit_compile=config.xla,
                                   reduce_retracing=True, autograph=False)
        # One CPU replica, no accumulation, no loss scaling: the whole update
        # (forward, backward, the one-replica "all-reduce", clipping and Adam) is
        # ONE XLA call, not an XLA call then graph ops per variable. The
        # compiled function goes to strategy.run itself, which then compiles
        # the replica's whole step (tf.distribute re-enters a tf.function
        # given to run on non-GPU devices). Several replicas cannot: the
        # all-reduce's merge_call inside a compiled function is a RuntimeError
        # under MirroredStrategy; on GPUs run() calls the function nested,
        # which fails the same way.
        self.fused = (config.xla and self.strategy.num_replicas_in_sync == 1
                      and self.hparams.gradient_accumulation_steps == 1 and not self.fp16
                      and _on_cpu_only(self.strategy)
                      and not isinstance(self.strategy,
                                         tf.distribute.MultiWorkerMirroredStrategy))
        self.update_fn = tf.function(self._update, jit_compile=True, reduce_retracing=True,
                                     autograph=False)
        self.train_step = tf.function(self._train_step, autograph=False)
        self.train_steps = tf.function(self._train_steps, autograph=False)

    # ------------------------------------------------------------------ setup
    @property
    def manager(self) -> tf.train.CheckpointManager:
        """Saves `ckpt-<step>` and keeps the last keep_checkpoint_max; made on first
        use, after `restore` has repaired an unreadable `checkpoint` index."""
        if self._manager is None:
            self._manager = self.directory.checkpoint_manager(
                self.checkpoint, self.config.keep_checkpoint_max,
                directory=self._checkpoint_dir())
        return self._manager

    def _check_vocabulary_fits(self) -> None:
        """data_dir's vocabulary has no more pieces than the model has embedding rows.

        A data_dir made while the problem had a larger vocab_size (an earlier
        version, or a user problem since changed) would feed ids past the last
        row: garbage on a GPU, a crash mid-step on a CPU.
        """
        config = self.config
        vocab = self.problem.vocabulary(config.data_dir)
        if vocab.vocab_size > self.hparams.vocab_size:
            raise UserError(
                f"the vocabulary {vocab.model_file} has {vocab.vocab_size} pieces, more than "
                f"the model's {self.hparams.vocab_size} embedding rows (problem "
                f"{config.problem} makes {self.problem.vocab_size}-piece vocabularies; that "
                f"data_dir was made with another vocab_size); run t2t-datagen into a new "
                f"--data_dir, or pass --hparams=vocab_size={vocab.vocab_size}. "
                f"Received: data_dir={config.data_dir}")

    def _check_resume_vocabulary(self) -> None:
        """A resume must read the vocabulary its checkpoints were trained with.

        Compares the bytes of output_dir's copy with data_dir's vocabulary (a
        regenerated vocabulary keeps its name but not its pieces).
        """
        saved = self.directory.vocab_file
        if not os.path.isfile(saved) or not self.directory.checkpoints(log=lambda _: None):
            return
        current = self.problem.vocab_file(self.config.data_dir)
        if os.path.isfile(current) and not filecmp.cmp(saved, current, shallow=False):
            trained_on = ""
            with contextlib.suppress(UserError):
                trained_on = self.directory.read_run_record().data_dir
            raise UserError(
                f"the vocabulary {current} differs from {saved}, the one the checkpoints "
                f"in {self.config.output_dir} were trained with; resume with the "
                f"--data_dir they were trained on{f' ({trained_on})' if trained_on else ''}, "
                f"or train into a new --output_dir. Received: data_dir={self.config.data_dir}")

    def _checkpoint_dir(self) -> str:
        if self.chief:
            return self.directory.path
        # Non-chief MultiWorker replicas must save too (collectives), elsewhere.
        return self.directory.worker_dir(self.strategy.cluster_resolver.task_id)

    def _check_resume_config(self) -> None:
        """A resume must train with the hparams its checkpoints were trained
        with. An output_dir whose earlier run saved no checkpoint (it failed
        or was stopped before its first save) has nothing to resume: the new
        hparams start the run anew there, and say so."""
        if not os.path.exists(self.directory.hparams_file):
            return
        saved = self.directory.read_hparams()
        if saved != self.hparams:
            diff = [f"{k}: saved {v!r}, now {self.hparams.to_dict()[k]!r}"
                    for k, v in saved.to_dict().items() if self.hparams.to_dict()[k] != v]
            if not self.directory.checkpoints(log=lambda _: None):
                self.log(f"{self.config.output_dir} holds the hparams of an earlier run that "
                         f"saved no checkpoint: starting the run anew with these "
                         f"({'; '.join(diff)}).")
                return
            raise UserError(
                f"{self.config.output_dir} holds a run with other hparams ({'; '.join(diff)}); "
                f"rerun with the same --hparams_set/--hparams to resume, or use a new "
                f"--output_dir. Received: output_dir={self.config.output_dir}")

    def _write_run_files(self, warm_start_from: str = "") -> None:
        """hparams.json, a copy of the vocabulary and run.json in output_dir."""
        config = self.config
        vocab = self.problem.vocabulary(config.data_dir)
        record = RunRecord(problem=config.problem, model=config.model,
                           hparams_set=config.hparams_set, hparams=config.hparams,
                           data_dir=os.path.abspath(config.data_dir),
                           vocab_source=os.path.abspath(vocab.model_file),
                           usr_dir=config.usr_dir, warm_start_from=warm_start_from)
        self.directory.write_run_files(self.hparams, record, vocab.model_file)

    # ------------------------------------------------------- the replica step
    def _replica_grads(self, batch: dict[str, tf.Tensor]):
        """One replica's loss and gradients; XLA-compiled when config.xla.

        Returns grads of loss_sum / batch_size (a constant, to keep float16
        gradients in range), the smoothed loss sum and the target token count.
        """
        with tf.GradientTape() as tape:
            logits = self.model(batch, training=True)                  # (B, T, V) f32
            loss_sum, tokens = smoothed_cross_entropy_sum(
                logits, batch["targets"], self.hparams.label_smoothing)
            scaled = loss_sum / float(self.hparams.batch_size)
            if self.fp16:
                scaled = self.optimizer.scale_loss(scaled)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        grads = [tf.convert_to_tensor(g) for g in grads]
        return grads, loss_sum, tokens

    def _on_replica_device(self, fn, *args):
        # Pin the compiled call to this replica's device: otherwise every
        # replica's XLA cluster is placed on the first device and cannot reach
        # the other replicas' variables.
        with tf.device(self.model.trainable_variables[0].value.device):
            return fn(*args)

    def _first_micro(self, batch):
        return self._on_replica_device(self.grad_fn, batch)

    def _next_micro(self, batch, grads, loss_sum, tokens):
        g, l, t = self._on_replica_device(self.grad_fn, batch)
        return [a + b for a, b in zip(grads, g)], loss_sum + l, tokens + t

    def _reduce(self, grads, loss_sum, tokens):
        """Replica context: the global token-mean gradient, loss and its norm."""
        ctx = tf.distribute.get_replica_context()
        total_tokens = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tokens)
        total_loss = ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss_sum)
        factor = float(self.hparams.batch_size) / tf.maximum(total_tokens, 1.0)
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [g * factor for g in grads])
        grad_norm = tf.linalg.global_norm(grads)
        if self.fp16:  # report the norm of the unscaled gradient
            grad_norm = grad_norm / tf.cast(self.optimizer.dynamic_scale, grad_norm.dtype)
        return grads, total_loss / tf.maximum(total_tokens, 1.0), total_tokens, grad_norm

    def _finish(self, grads, loss_sum, tokens):
        grads, loss, total_tokens, grad_norm = self._reduce(grads, loss_sum, tokens)
        self.optimizer.apply(grads, self.model.trainable_variables)
        return loss, total_tokens, grad_norm

    def _update(self, batch):
        """The whole update of one replica and one micro-batch (`self.fused`)."""
        return self._finish(*self._replica_grads(batch))

    def _train_step(self, iterator):
        """One optimizer update over `gradient_accumulation_steps` micro-batches."""
        run = self.strategy.run
        first = self.strategy.experimental_local_results
        if self.fused:
            loss, tokens, grad_norm = run(self.update_fn, (next(iterator),))
            return first(loss)[0], first(tokens)[0], first(grad_norm)[0]
        state = run(self._first_micro, (next(iterator),))
        for _ in range(self.hparams.gradient_accumulation_steps - 1):
            state = run(self._next_micro, (next(iterator), *state))
        loss, tokens, grad_norm = run(self._finish, state)
        return first(loss)[0], first(tokens)[0], first(grad_norm)[0]

    def _train_steps(self, iterator, n):
        """`n` updates (a scalar int32 tensor, >= 1) in one call, on the device.

        Returns the last update's loss and gradient norm (what the progress
        line of the step the call ends on reports) and the target tokens of
        all `n` updates, summed on the device.
        """
        def body(i, loss, tokens, grad_norm):
            step_loss, step_tokens, step_norm = self._train_step(iterator)
            return (i + 1, tf.cast(step_loss, tf.float32),
                    tokens + tf.cast(step_tokens, tf.float32), tf.cast(step_norm, tf.float32))

        zero = tf.constant(0.0)
        _, loss, tokens, grad_norm = tf.while_loop(
            lambda i, *_: i < n, body, (tf.constant(0), zero, zero, zero))
        return loss, tokens, grad_norm

    def _updates_in_next_call(self, step: int) -> int:
        """How many updates the next call runs from `step`: at most
        --steps_per_execution, ending on the next progress, save, eval or final step."""
        config = self.config
        stop = self.end_step
        for every in (config.log_every, config.save_every, config.eval_every):
            if every:
                stop = min(stop, (step // every + 1) * every)
        return max(1, min(config.steps_per_execution, stop - step))

    # ------------------------------------------------------------- evaluation
    def _eval_sums(self, batch):
        logits = self.model(batch, training=False)
        return token_metrics_sums(logits, batch["targets"])

    def evaluate(self) -> dict[str, float]:
        """Loss, per-token accuracy and perplexity on the dev split."""
        dataset = self.problem.dataset("eval", self.config.data_dir, self.hparams,
                                       skip_corrupt=self.config.skip_corrupt_records)
        xent = correct = tokens = 0.0
        with self._data_errors_named():
            for i, batch in enumerate(dataset):
                if self.config.eval_steps and i >= self.config.eval_steps:
                    break
                x, c, t = self.eval_fn(batch)
                xent, correct, tokens = xent + float(x), correct + float(c), tokens + float(t)
        if not tokens:
            raise UserError(f"the dev split of {self.config.problem} in "
                            f"{self.config.data_dir} is empty; rerun t2t-datagen. "
                            f"Received: data_dir={self.config.data_dir}")
        loss = xent / tokens
        return {"loss": loss, "accuracy": correct / tokens,
                "perplexity": math.exp(min(loss, 50.0))}

    # ---------------------------------------------------------------- the loop
    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def restore(self) -> int:
        """Restore the newest intact checkpoint, if any; returns the step reached.

        Damaged checkpoints (and an unreadable `checkpoint` index) are skipped
        with one line each; once the restore has worked, the index is made to
        name the intact checkpoints.
        """
        latest = self.directory.restore_newest_intact(self._restore_from, self.log)
        self._resumed_from = latest or None
        if latest:
            self.log(f"Resumed from {latest} at step {self.step}.")
        if self.chief:
            self.directory.repair_checkpoint_index(latest, self.log)
        return self.step

    def _restore_from(self, prefix: str) -> None:
        try:
            self.checkpoint.restore(prefix).assert_existing_objects_matched()
        except CORRUPT_RESTORE_ERRORS as e:
            raise CorruptCheckpointError.on_restore(prefix, e) from None
        except (AssertionError, ValueError) as e:
            first = str(e).strip().split("\n", 1)[0][:200]
            missing = "" if os.path.exists(self.directory.hparams_file) else \
                f" ({self.directory.hparams_file}, which records them, is missing)"
            raise UserError(
                f"the checkpoint {prefix} holds a model of other hparams than "
                f"--hparams_set={self.config.hparams_set} --hparams={self.config.hparams!r}"
                f"{missing}: {first}; rerun with the hparams it was trained with, or use a "
                f"new --output_dir. Received: output_dir={self.config.output_dir}") from None

    def _warm_start(self, resumed: bool) -> str:
        """--warm_start_from on a new run (a resume continues the run itself);
        returns the checkpoint the run's weights started from, for run.json.
        Runs after `restore`: `resumed` says whether a checkpoint was restored."""
        from t2t_revival.train.warm_start import warm_start

        recorded = (self.directory.read_run_record().warm_start_from
                    if os.path.isfile(self.directory.run_file) else "")
        if resumed:
            if self.config.warm_start_from:
                self.log(f"{self.config.output_dir} already holds checkpoints: resuming this "
                         f"run; --warm_start_from applies only to a new run and is ignored.")
            return recorded
        if not self.config.warm_start_from:
            return ""
        return warm_start(self.model, self.config.warm_start_from,
                          self.problem.vocab_file(self.config.data_dir), self.log)

    def save(self) -> str:
        """Save `ckpt-<step>`; a model whose weights are no longer finite is
        never saved (a UserError instead, `_check_diverged`)."""
        if not self._weights_are_finite():
            raise self._diverged(self.step, "")
        with self.signals.saving():
            path = self.directory.save_checkpoint(self.manager, self.step)
            if not self.chief:
                shutil.rmtree(self._checkpoint_dir(), ignore_errors=True)
        return path

    def train_dataset(self, step: int):
        """The distributed training dataset of a run (re)starting at `step`."""
        seed = self.config.seed + step  # a resumed run does not replay the same order

        def dataset_fn(input_context):
            return self.problem.dataset("train", self.config.data_dir, self.hparams,
                                        input_context=input_context, seed=seed,
                                        skip_corrupt=self.config.skip_corrupt_records)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def _prepare_data(self) -> None:
        """Run the problem's datagen when data_dir lacks its data."""
        config = self.config
        if not self.problem.has_data(config.data_dir):
            self.log(f"No {config.problem} data in {config.data_dir}: running datagen first.")
            self.problem.generate_data(config.data_dir, config.tmp_dir or DEFAULT_TMP_DIR)

    def _report_corrupt_records(self) -> None:
        """With --skip_corrupt_records: one line per split with damaged shards,
        saying how many records are skipped and which shards."""
        if not self.config.skip_corrupt_records:
            return
        for split in self.problem.num_shards:
            lost, damaged = self.problem.corrupt_records(split, self.config.data_dir)
            if damaged:
                first, reason = next(iter(damaged.items()))
                self.log(f"--skip_corrupt_records: skipping {lost} record(s) of the {split} "
                         f"split of {self.config.problem}: {len(damaged)} shard(s) are read "
                         f"up to their damage, first {first} ({reason}); rerun t2t-datagen "
                         f"to repair them. Received: corrupt_shards="
                         f"{[os.path.basename(p) for p in damaged]}")

    def _summary_writer(self, name: str):
        """A TensorBoard writer into output_dir/<name> on the chief, a no-op elsewhere."""
        if not self.chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(os.path.join(self.directory.path, name))

    def train(self) -> dict[str, Any]:
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
                raise self._stop(stop.signum) from None

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

    def _save_unless_saved(self) -> str:
        """The checkpoint of the current step: saved now unless it is already."""
        latest = self.manager.latest_checkpoint
        if latest is None or not latest.endswith(f"-{self.step}"):
            latest = self.save()
        return latest

    def _stop(self, signum: int) -> StoppedBySignal:
        """Save at the current step (unless saved already) and say so in one line."""
        latest = self._save_unless_saved()
        name = StoppedBySignal.default_message(signum)
        return StoppedBySignal(signum, f"{name} at step {self.step}; checkpoint saved: "
                                       f"{latest}; rerun the same command to resume")

    def _train(self) -> dict[str, Any]:
        config = self.config
        if self.chief:
            self.directory.clean_stale_temporaries(self.log)
        self._prepare_data()
        self._report_corrupt_records()
        self._check_resume_vocabulary()
        self._check_vocabulary_fits()
        if self.chief:
            self.directory.best.record()   # a damaged best.json: say so now, not after training
        step = self.restore()  # before any run file is written: a failed resume changes nothing
        warm_start_from = self._warm_start(resumed=self._resumed_from is not None)
        if self.chief:
            self._write_run_files(warm_start_from)
        self.signals.arm()
        if step >= config.train_steps:
            self.log(f"Already at step {step} >= --train_steps={config.train_steps}.")
            return {"step": step}
        iterator = iter(self.train_dataset(step))
        writer, eval_writer = self._summary_writer("train"), self._summary_writer("eval")
        stats = TrainingStats(step, self.end_step, writer, clock=self.clock)
        while step < self.end_step:
            updates = self._updates_in_next_call(step)
            with self._data_errors_named(), \
                    self._out_of_memory_named(f"the update after step {step}"):
                if updates == 1:
                    loss, tokens, grad_norm = self.train_step(iterator)
                else:
                    loss, tokens, grad_norm = self.train_steps(iterator, tf.constant(updates))
            step = self.step
            self.signals.check()   # a stop signal during the update: save and stop
            stats.update(tokens)
            self._check_diverged(step, loss, grad_norm)
            on_log_step = step % config.log_every == 0 or step == self.end_step
            if on_log_step:
                self.log(stats.report(
                    step, loss, float(self.optimizer.learning_rate), grad_norm,
                    loss_scale=self.optimizer.dynamic_scale if self.fp16 else None))
            if config.save_every and step % config.save_every == 0:
                self.save()
            if config.eval_every and step % config.eval_every == 0 \
                    and step != self.end_step:
                self._log_eval(step, eval_writer)
                if self.stop_reason:
                    self.log(f"Stopping at step {step}: {self.stop_reason}.")
                    break
            if on_log_step and config.max_train_minutes and step < self.end_step \
                    and self._time_is_up(stats.elapsed()):
                self.log(f"Stopping at step {step}: the --max_train_minutes="
                         f"{config.max_train_minutes:g} budget is spent.")
                self._log_cut_cooldown(step)
                break
            if on_log_step and self.cooldown_fit and step < self.end_step:
                self._fit_cooldown(step, stats)
        if step < config.train_steps and step == self.end_step:
            self.log(f"Stopped at step {step}, where the learning-rate cooldown fitted to "
                     f"--max_train_minutes={config.max_train_minutes:g} ends "
                     f"(--train_steps={config.train_steps} was out of its reach).")
        if self.manager.latest_checkpoint is None or \
                not self.manager.latest_checkpoint.endswith(f"-{step}"):
            self.save()
        result = self._log_eval(step, eval_writer)
        result["step"] = step
        result["checkpoint"] = self.manager.latest_checkpoint
        result["stop_reason"] = self.stop_reason
        result["chief"] = self.chief
        if self._dev is not None and self.chief:
            result["best"] = self._dev[0].best
            result["best_checkpoint"] = self.directory.best.checkpoint_path()
        writer.flush()
        eval_writer.flush()
        return result

    def _check_diverged(self, step: int, loss, grad_norm) -> None:
        """Stop the run (UserError) if the update to `step` left NaN or
        infinity in the weights: every later update and checkpoint would hold
        them too, and the kept checkpoints (`keep_checkpoint_max`) would be
        overwritten one by one with a model that translates nothing.

        Checked where the loss or the gradient norm is not finite (reading
        them back costs nothing more: the token count already is, every
        call). With float16 loss scaling an overflowing gradient is expected
        now and then: its update is skipped and the weights stay finite, so
        the run goes on. (`save` checks the weights themselves.)
        """
        loss, grad_norm = float(loss), float(grad_norm)
        if math.isfinite(loss) and math.isfinite(grad_norm):
            return
        if not self._weights_are_finite():
            raise self._diverged(step, f" (its update's loss {loss:g}, gradient norm "
                                       f"{grad_norm:g})")

    def _weights_are_finite(self) -> bool:
        return all(bool(tf.reduce_all(tf.math.is_finite(v)))
                   for v in self.model.trainable_variables)

    def _diverged(self, step: int, figures: str) -> UserError:
        """The error of a run whose weights went NaN or infinite at `step`."""
        hp, latest = self.hparams, self.manager.latest_checkpoint
        kept = (f"the last checkpoint, {latest}, is from before it" if latest else
                "no checkpoint was saved before it")
        return UserError(
            f"the model diverged at step {step}: its weights hold NaN or infinity{figures}, "
            f"so it is not saved; {kept}. Lower learning_rate (now {hp.learning_rate:g}), "
            f"lengthen learning_rate_warmup_steps (now {hp.learning_rate_warmup_steps}) or "
            f"set clip_grad_norm (now {hp.clip_grad_norm:g}), and {self._rerun_advice()}. "
            f"Received: step={step}")

    def _rerun_advice(self) -> str:
        """How to go on with other hparams: a resume keeps the run's own, so
        a run with checkpoints continues from its latest in a new output_dir."""
        latest = self.manager.latest_checkpoint
        if latest:
            return f"train a new --output_dir with --warm_start_from={latest}"
        return "rerun (with no checkpoint saved, the output_dir takes the new hparams)"

    @contextlib.contextmanager
    def _out_of_memory_named(self, what: str):
        """A device out of memory in `what` ("the update after step 3", "the
        dev loss at step 4"; TensorFlow's ResourceExhaustedError, its
        allocator's statistics and a traceback of the graph) or in the dev
        decoding (`DevMetricEvaluator`'s OutOfMemoryError): one line saying
        which settings need less, the run saved first (`_save_at_fault`)."""
        try:
            yield
        except (tf.errors.ResourceExhaustedError, OutOfMemoryError) as e:
            saved = self._save_at_fault()   # first: the advice names its checkpoint
            error = e if isinstance(e, OutOfMemoryError) else \
                out_of_memory_error(what, e, self._lighter_training_advice())
            raise (UserError(f"{saved}: {error}") if saved else error) from None

    def _lighter_training_advice(self) -> str:
        """The hparams that make an update (or the dev loss) take less device memory."""
        hp = self.hparams
        half = max(hp.batch_size // 2, 1)
        lighter = "" if hp.mixed_precision != "float32" else \
            ", or train in mixed_precision=mixed_bfloat16 (now float32)"
        return (f"Lower batch_size (now {hp.batch_size} tokens per replica; batch_size={half},"
                f"gradient_accumulation_steps={2 * hp.gradient_accumulation_steps} keeps "
                f"the tokens per update) or max_length (now {hp.max_length}){lighter}, and "
                f"{self._rerun_advice()}. Received: batch_size={hp.batch_size}")

    def _save_at_fault(self) -> str:
        """Save the run at its step (unless saved already) after a fault that
        changed nothing: reading the next batch, or running out of memory in
        an update, fails before the update assigns a weight (and the updates
        before it in a call of several are whole); an evaluation assigns
        none. Returns "training stopped at step N and saved it
        (<checkpoint>)", or "" where there is nothing to save (before
        training, or at step 0)."""
        if not (self.signals.armed and self.step > 0):
            return ""
        return f"training stopped at step {self.step} and saved it ({self._save_unless_saved()})"

    @contextlib.contextmanager
    def _data_errors_named(self):
        """The data's faults as one line (a DataError), a training run saved
        first (`_save_at_fault`), so the rerun resumes there.

        TensorFlow's DataLossError names no file: the corrupt shard is found
        and named. A NotFoundError names a shard that went missing (deleted
        while training read the data). Where every shard is intact (the error
        came from elsewhere) the traceback stays.
        """
        try:
            yield
        except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
            data_dir = self.config.data_dir
            error = (self.problem.corrupt_data_error(data_dir)
                     if isinstance(e, tf.errors.DataLossError)
                     else self.problem.missing_data_error(data_dir))
            if error is None:
                raise
            saved = self._save_at_fault()
            if saved:
                error = DataError(f"{saved}; repair the data, then rerun the same command "
                                  f"to resume: {error}")
            raise error from None

    @property
    def end_step(self) -> int:
        """The step this run trains to: --train_steps, or before it where the
        time budget runs out (`CooldownFit`)."""
        return self.cooldown_fit.end_step if self.cooldown_fit else self.config.train_steps

    def _fit_cooldown(self, step: int, stats: TrainingStats) -> None:
        """Move the cooldown's end to where the time budget runs out at the
        pace so far (`CooldownFit`); every worker takes the same."""
        fit, elapsed = self.cooldown_fit, stats.elapsed()
        end = fit.estimate(step, stats.start_step, elapsed)
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            # Workers' clocks differ; they must stop at the same step, or the
            # others would wait forever in the next all-reduce: the estimate of
            # the worker holding replica 0 (the chief) goes to all.
            values = self.strategy.experimental_distribute_values_from_function(
                lambda context: tf.constant(
                    float(end) if context.replica_id_in_sync_group == 0 else 0.0))
            end = int(float(self.strategy.reduce(tf.distribute.ReduceOp.SUM, values,
                                                 axis=None)))
        if end == fit.end_step:
            return
        line = fit.move_to(end, step, stats.start_step, elapsed)
        self._cooldown_end.assign(end)
        stats.train_steps = end
        if line:
            self.log(line)

    def _log_cut_cooldown(self, step: int) -> None:
        """Say where the time limit, stopping the run at `step`, left the
        learning-rate cooldown, and what would fit it in."""
        cooldown, end = self.hparams.learning_rate_cooldown_steps, self.end_step
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

    def _time_is_up(self, elapsed: float) -> bool:
        """Whether the time budget is spent after `elapsed` seconds; every worker
        gets the same answer."""
        up = elapsed >= 60.0 * self.config.max_train_minutes
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            # Workers' clocks differ: stop when any one of them is out of time,
            # or the others would wait forever in the next all-reduce.
            flags = self.strategy.experimental_distribute_values_from_function(
                lambda _: tf.constant(1.0 if up else 0.0))
            # (SUM: cross-device reductions know only SUM and MEAN.)
            up = float(self.strategy.reduce(tf.distribute.ReduceOp.SUM, flags,
                                            axis=None)) > 0.0
        return up

    def _log_eval(self, step: int, eval_writer) -> dict[str, float]:
        if self._last_eval is not None and self._last_eval[0] == step:
            return dict(self._last_eval[1])   # stopped early right after evaluating
        early_stopping, evaluator = self._dev_tracking()
        with self._out_of_memory_named(f"the dev loss at step {step}"):
            metrics = self.evaluate()
            if evaluator is not None:   # the chief decodes; the other workers wait for it
                scored = evaluator.evaluate()
        line = (f"eval at step {step}: loss {metrics['loss']:.4f}  "
                f"accuracy {metrics['accuracy']:.4f}  "
                f"perplexity {metrics['perplexity']:.2f}")
        if evaluator is not None:
            metrics[scored.score_name] = scored.score
            line += (f"  {scored.score_name} {scored.score:.2f} ({len(evaluator)} dev "
                     f"sentences, {evaluator.seconds:.0f} s)")
        self.log(line)
        with eval_writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        self._keep_best(step, metrics, early_stopping, evaluator)
        self._last_eval = (step, dict(metrics))
        return dict(metrics)

    # ------------------------------------------------ dev metric, best/, stop
    def _dev_tracking(self) -> tuple[EarlyStopping, DevMetricEvaluator | None]:
        """The early-stopping state and the chief's dev decoder, made at the first eval."""
        if self._dev is None:
            best, evaluator = None, None
            if self.chief:
                self.directory.best.recover()   # what a kill mid-update left
                best = self.directory.best.record()
                if best is not None:
                    self.log(f"best/ holds {best.describe()}.")
                if self.config.eval_decode_sentences:
                    vocab = self.problem.vocabulary(self.config.data_dir)
                    trained = TrainedModel(
                        hparams=self.hparams, vocab=vocab, checkpoint_path="", model=self.model,
                        run_record=RunRecord(problem=self.config.problem,
                                             model=self.config.model,
                                             hparams_set=self.config.hparams_set,
                                             hparams=self.config.hparams))
                    evaluator = DevMetricEvaluator(
                        self.problem, self.config.data_dir, trained,
                        self.config.eval_decode_sentences, self.config.eval_decode_hparams)
                    if evaluator.skipped:
                        self.log(f"Dev decoding leaves out {evaluator.skipped} of the first "
                                 f"{self.config.eval_decode_sentences} dev sentences: longer "
                                 f"than max_length={self.hparams.max_length} tokens.")
                if best is not None:
                    self._say_if_ranked_otherwise(best, evaluator)
            self._dev = (EarlyStopping(self.config.eval_early_stopping_evals, best), evaluator)
        return self._dev

    def _say_if_ranked_otherwise(self, best: BestRecord,
                                 evaluator: DevMetricEvaluator | None) -> None:
        """Warn when best/ was ranked by another metric (or on another number of
        dev sentences) than this run's: the figures cannot be compared, so this
        run's first evaluation replaces it (`EarlyStopping.update`)."""
        metric, sentences = _ranked_by(evaluator)
        if (best.metric, best.sentences) == (metric, sentences):
            return
        def ranking(name, n):
            return f"dev {name}" + (f" on {n} sentences" if n else "")
        self.log(f"best/ was ranked by {ranking(best.metric, best.sentences)}; this run ranks "
                 f"by {ranking(metric, sentences)}, so its first evaluation replaces best/ "
                 f"(rerun with the earlier --eval_decode_sentences to keep the ranking).")

    def _keep_best(self, step: int, metrics: dict[str, float],
                   early_stopping: EarlyStopping,
                   evaluator: DevMetricEvaluator | None) -> None:
        """Copy this step's checkpoint into best/ when the dev metric improved;
        set `stop_reason` when it has not for --eval_early_stopping_evals evals.

        The chief decides; under MultiWorker the others follow its decision
        (they save with it, for the collectives, and stop with it).
        """
        improved = stop = False
        if self.chief:
            name, sentences = _ranked_by(evaluator)
            candidate = BestRecord(step=step, metric=name, value=float(metrics[name]),
                                   higher_is_better=name != "loss",
                                   checkpoint=f"{CHECKPOINT_PREFIX}-{step}",
                                   sentences=sentences)
            improved = early_stopping.update(candidate)
            stop = early_stopping.should_stop
        improved, stop = self._chief_decides(improved, stop)
        if improved:
            latest = self.manager.latest_checkpoint
            if latest is None or not latest.endswith(f"-{step}"):
                self.save()
            if self.chief:
                path = self.directory.best.update(self.manager.latest_checkpoint,
                                                  early_stopping.best)
                self.log(f"New best: {early_stopping.best.describe()}, copied to {path}.")
                if self.on_new_best is not None:
                    self.on_new_best(path, early_stopping.best)
        if stop:
            self.stop_reason = early_stopping.reason() if self.chief else \
                "the chief's dev metric stopped improving"

    def _chief_decides(self, *flags: bool) -> list[bool]:
        """The chief's `flags`, on every worker (a collective under MultiWorker)."""
        if not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return list(flags)
        mine = [1.0 if (f and self.chief) else 0.0 for f in flags]
        values = self.strategy.experimental_distribute_values_from_function(
            lambda _: tf.constant(mine))
        # (SUM: cross-device reductions know only SUM and MEAN.)
        reduced = self.strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None).numpy()
        return [bool(v > 0.0) for v in reduced]


def _on_cpu_only(strategy: tf.distribute.Strategy) -> bool:
    """Whether every device of `strategy` is a CPU."""
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:   # the default strategy: TensorFlow's default device
        devices = [d.name for d in tf.config.list_logical_devices("GPU")] or ["CPU"]
    return all("CPU" in d.upper() for d in devices)


def train(config: TrainConfig, strategy: tf.distribute.Strategy | None = None,
          log=print, on_new_best=None) -> dict[str, Any]:
    """Build a Trainer for `config` and train; returns the final eval metrics.

    `on_new_best`: see `Trainer.on_new_best`.
    """
    trainer = Trainer(config, strategy=strategy, log=log)
    trainer.on_new_best = on_new_best
    return trainer.train()
