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
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from typing import Any

import keras
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.errors import UserError
from t2t_revival.hparams import HParams, resolve
from t2t_revival.train.checkpointing import make_checkpoint
from t2t_revival.train.losses import smoothed_cross_entropy_sum, token_metrics_sums
from t2t_revival.train.noam_schedule import NoamSchedule
from t2t_revival.train.reduced_gradients_adam import ReducedGradientsAdam
from t2t_revival.train.strategy import is_chief, make_strategy
from t2t_revival.train.train_config import TrainConfig

HPARAMS_FILE = "hparams.json"
DEFAULT_TMP_DIR = os.path.join(tempfile.gettempdir(), "t2t_datagen")  # tensor2tensor's
RUN_FILE = "run.json"
VOCAB_FILE = "vocab.model"
CHECKPOINT_PREFIX = "ckpt"



class Trainer:
    """Trains `config.model` on `config.problem`, resuming from `output_dir`.

    Args:
        config: the run options.
        strategy: a tf.distribute strategy (default: `make_strategy` from config).
        log: a print-like callable for progress lines.
    """

    def __init__(self, config: TrainConfig, strategy: tf.distribute.Strategy | None = None,
                 log=print):
        self.config = config
        self.log = log
        # User errors first, before TensorFlow sets up its devices.
        registry.load_all()
        self.hparams = resolve(config.hparams_set, config.hparams)
        self.problem = registry.problems.get(config.problem)()
        self.model_cls = registry.models.get(config.model)
        self.hparams = resolve(config.hparams_set, config.hparams, self.problem)
        self._check_resume_config()
        self.strategy = strategy or make_strategy(config.num_cpu_devices, config.worker_gpu)
        self.chief = is_chief(self.strategy)
        keras.utils.set_random_seed(config.seed)
        keras.mixed_precision.set_global_policy(self.hparams.mixed_precision)
        self.fp16 = self.hparams.mixed_precision == "mixed_float16"
        with self.strategy.scope():
            self.model = self.model_cls(self.hparams)
            self._build_model()
            optimizer = ReducedGradientsAdam(
                learning_rate=NoamSchedule(self.hparams.d_model,
                                           self.hparams.learning_rate_warmup_steps,
                                           self.hparams.learning_rate),
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
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._checkpoint_dir(), max_to_keep=config.keep_checkpoint_max,
            checkpoint_name=CHECKPOINT_PREFIX)
        # autograph=False throughout: no Python control flow on tensors here,
        # and autograph's conversion cache can go stale in long processes.
        self.grad_fn = tf.function(self._replica_grads, jit_compile=config.xla,
                                   reduce_retracing=True, autograph=False)
        self.eval_fn = tf.function(self._eval_sums, jit_compile=config.xla,
                                   reduce_retracing=True, autograph=False)
        self.train_step = tf.function(self._train_step, autograph=False)

    # ------------------------------------------------------------------ setup
    def _checkpoint_dir(self) -> str:
        if self.chief:
            return self.config.output_dir
        # Non-chief MultiWorker replicas must save too (collectives), elsewhere.
        resolver = self.strategy.cluster_resolver
        return os.path.join(self.config.output_dir, f".worker_{resolver.task_id}")

    def _check_resume_config(self) -> None:
        path = os.path.join(self.config.output_dir, HPARAMS_FILE)
        if not os.path.exists(path):
            return
        saved = HParams.load(path)
        if saved != self.hparams:
            diff = [f"{k}: saved {v!r}, now {self.hparams.to_dict()[k]!r}"
                    for k, v in saved.to_dict().items() if self.hparams.to_dict()[k] != v]
            raise UserError(
                f"{self.config.output_dir} holds a run with other hparams ({'; '.join(diff)}); "
                f"rerun with the same --hparams_set/--hparams to resume, or use a new "
                f"--output_dir. Received: output_dir={self.config.output_dir}")

    def _build_model(self) -> None:
        dummy = tf.zeros([1, 8], tf.int32)
        self.model({"inputs": dummy, "targets": dummy}, training=False)

    def _write_run_files(self) -> None:
        """hparams.json, run.json and a copy of the vocabulary in output_dir."""
        out = self.config.output_dir
        os.makedirs(out, exist_ok=True)
        self.hparams.save(os.path.join(out, HPARAMS_FILE))
        vocab = self.problem.vocabulary(self.config.data_dir)
        vocab_copy = os.path.join(out, VOCAB_FILE)
        tmp = vocab_copy + ".tmp"
        shutil.copyfile(vocab.model_file, tmp)
        os.replace(tmp, vocab_copy)
        run = {"problem": self.config.problem, "model": self.config.model,
               "hparams_set": self.config.hparams_set, "hparams": self.config.hparams,
               "data_dir": os.path.abspath(self.config.data_dir),
               "vocab_file": VOCAB_FILE,
               "vocab_source": os.path.abspath(vocab.model_file)}
        tmp = os.path.join(out, RUN_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(run, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, os.path.join(out, RUN_FILE))

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

    def global_gradients(self, batch):
        """The reduced gradients and loss of one distributed batch, not applied.

        `batch` is a per-replica value (e.g. from
        `strategy.experimental_distribute_values_from_function`). For tests and
        diagnostics: the same computation as one update's, without the update.
        """
        @tf.function(autograph=False)
        def compute(batch):
            def replica(b):
                grads, loss, tokens, _ = self._reduce(*self._first_micro(b))
                return grads, loss, tokens
            grads, loss, tokens = self.strategy.run(replica, (batch,))
            first = self.strategy.experimental_local_results
            return [first(g)[0] for g in grads], first(loss)[0], first(tokens)[0]
        return compute(batch)

    def _train_step(self, iterator):
        """One optimizer update over `gradient_accumulation_steps` micro-batches."""
        run = self.strategy.run
        state = run(self._first_micro, (next(iterator),))
        for _ in range(self.hparams.gradient_accumulation_steps - 1):
            state = run(self._next_micro, (next(iterator), *state))
        loss, tokens, grad_norm = run(self._finish, state)
        first = self.strategy.experimental_local_results
        return first(loss)[0], first(tokens)[0], first(grad_norm)[0]

    # ------------------------------------------------------------- evaluation
    def _eval_sums(self, batch):
        logits = self.model(batch, training=False)
        return token_metrics_sums(logits, batch["targets"])

    def evaluate(self) -> dict[str, float]:
        """Loss, per-token accuracy and perplexity on the dev split."""
        dataset = self.problem.dataset("eval", self.config.data_dir, self.hparams)
        xent = correct = tokens = 0.0
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
        """Restore the latest checkpoint, if any; returns the step reached."""
        latest = self.manager.latest_checkpoint
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            self.log(f"Resumed from {latest} at step {self.step}.")
        return self.step

    def save(self) -> str:
        path = self.manager.save(checkpoint_number=self.step)
        if not self.chief:
            shutil.rmtree(self._checkpoint_dir(), ignore_errors=True)
        return path

    def _train_dataset(self, step: int):
        seed = self.config.seed + step  # a resumed run does not replay the same order

        def dataset_fn(input_context):
            return self.problem.dataset("train", self.config.data_dir, self.hparams,
                                        input_context=input_context, seed=seed)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def train(self) -> dict[str, Any]:
        """Train to `config.train_steps`, saving and evaluating on the way."""
        config = self.config
        if not self.problem.has_data(config.data_dir):
            self.log(f"No {config.problem} data in {config.data_dir}: running datagen first.")
            self.problem.generate_data(config.data_dir, config.tmp_dir or DEFAULT_TMP_DIR)
        if self.chief:
            self._write_run_files()
        step = self.restore()
        if step >= config.train_steps:
            self.log(f"Already at step {step} >= --train_steps={config.train_steps}.")
            return {"step": step}
        iterator = iter(self._train_dataset(step))
        writer = (tf.summary.create_file_writer(os.path.join(config.output_dir, "train"))
                  if self.chief else tf.summary.create_noop_writer())
        eval_writer = (tf.summary.create_file_writer(os.path.join(config.output_dir, "eval"))
                       if self.chief else tf.summary.create_noop_writer())
        start_step, started = step, time.time()
        window_tokens, window_start, window_steps = 0.0, time.time(), 0
        result: dict[str, Any] = {}
        while step < config.train_steps:
            loss, tokens, grad_norm = self.train_step(iterator)
            step = self.step
            window_tokens += float(tokens)
            window_steps += 1
            on_log_step = step % config.log_every == 0 or step == config.train_steps
            if on_log_step:
                elapsed = time.time() - window_start
                tps = window_tokens / max(elapsed, 1e-9)
                per_step = (time.time() - started) / max(step - start_step, 1)
                eta = per_step * (config.train_steps - step)
                lr = float(self.optimizer.learning_rate)
                self.log(f"step {step}/{config.train_steps}  loss {float(loss):.4f}  "
                         f"lr {lr:.3g}  grad_norm {float(grad_norm):.3g}  "
                         f"{tps:,.0f} tokens/s  ETA {_format_eta(eta)}")
                with writer.as_default(step=step):
                    tf.summary.scalar("loss", loss)
                    tf.summary.scalar("learning_rate", lr)
                    tf.summary.scalar("tokens_per_second", tps)
                    tf.summary.scalar("grad_norm", grad_norm)
                    if self.fp16:
                        tf.summary.scalar("loss_scale", self.optimizer.dynamic_scale)
                window_tokens, window_start, window_steps = 0.0, time.time(), 0
            if config.save_every and step % config.save_every == 0:
                self.save()
            if config.eval_every and step % config.eval_every == 0 \
                    and step != config.train_steps:
                self._log_eval(step, eval_writer)
            if on_log_step and config.max_train_minutes and step < config.train_steps \
                    and self._time_is_up(started):
                self.log(f"Stopping at step {step}: the --max_train_minutes="
                         f"{config.max_train_minutes:g} budget is spent.")
                break
        if self.manager.latest_checkpoint is None or \
                not self.manager.latest_checkpoint.endswith(f"-{step}"):
            self.save()
        result = self._log_eval(step, eval_writer)
        result["step"] = step
        writer.flush()
        eval_writer.flush()
        return result

    def _time_is_up(self, started: float) -> bool:
        """Whether the time budget is spent; every worker gets the same answer."""
        up = (time.time() - started) >= 60.0 * self.config.max_train_minutes
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            # Workers' clocks differ: stop when any one of them is out of time,
            # or the others would wait forever in the next all-reduce.
            flags = self.strategy.experimental_distribute_values_from_function(
                lambda _: tf.constant(1.0 if up else 0.0))
            up = float(self.strategy.reduce("MAX", flags, axis=None)) > 0.0
        return up

    def _log_eval(self, step: int, eval_writer) -> dict[str, float]:
        metrics = self.evaluate()
        self.log(f"eval at step {step}: loss {metrics['loss']:.4f}  "
                 f"accuracy {metrics['accuracy']:.4f}  "
                 f"perplexity {metrics['perplexity']:.2f}")
        with eval_writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        return dict(metrics)


def _format_eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


def train(config: TrainConfig, strategy: tf.distribute.Strategy | None = None,
          log=print) -> dict[str, Any]:
    """Build a Trainer for `config` and train; returns the final eval metrics."""
    return Trainer(config, strategy=strategy, log=log).train()
