"""`UpdateStep`: one optimizer update (or several) of the model, on every replica.

One update is:

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
With one CPU replica, no gradient accumulation and no loss scaling, the whole
update is fused instead (`fused`): forward, backward, the (trivial)
all-reduce, clipping and Adam in ONE XLA call, which saves the graph ops Adam
runs per variable (benchmarks/train_loop.py measures it).

Several updates per call (`run_many`, Keras's steps_per_execution): one
`tf.function` call runs N updates in a `tf.while_loop`, summing the target
token counts on the device, so the host reads the loss, the token count and
the gradient norm back once per call instead of once per update.

No I/O here: no file, no log line; the training loop (`TrainingLoop`) owns those.
"""

from __future__ import annotations

import tensorflow as tf

from t2t_revival.settings.hparams import HParams
from t2t_revival.train.losses import smoothed_cross_entropy_sum
from t2t_revival.train.strategy import on_cpu_only


class UpdateStep:
    """The compiled update of `model` by `optimizer` under `strategy`.

    Args:
        model: the built model (made in `strategy.scope()`).
        optimizer: its optimizer (`make_optimizer`), built for the model's
            trainable variables.
        strategy: the tf.distribute strategy.
        hparams: the run's hparams (batch_size, label smoothing, gradient
            accumulation, mixed precision).
        xla: XLA-compile each replica's forward and backward pass.
        fuse: compile the whole update as one XLA call; default (None) where
            it can be: XLA, one CPU replica, no accumulation, no loss scaling.
    """

    def __init__(self, model, optimizer, strategy: tf.distribute.Strategy, hparams: HParams,
                 xla: bool = True, fuse: bool | None = None):
        self.model, self.optimizer, self.strategy, self.hparams = \
            model, optimizer, strategy, hparams
        self.fp16 = hparams.mixed_precision == "mixed_float16"
        # The compiled function goes to strategy.run itself, which then
        # compiles the replica's whole step (tf.distribute re-enters a
        # tf.function given to run on non-GPU devices). Several replicas
        # cannot: the all-reduce's merge_call inside a compiled function is a
        # RuntimeError under MirroredStrategy; on GPUs run() calls the
        # function nested, which fails the same way.
        can_fuse = (xla and strategy.num_replicas_in_sync == 1
                    and hparams.gradient_accumulation_steps == 1 and not self.fp16
                    and on_cpu_only(strategy)
                    and not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy))
        self.fused = can_fuse if fuse is None else fuse
        """Whether `run` is one XLA call (forward, backward, all-reduce, Adam)."""
        # autograph=False throughout: no Python control flow on tensors here,
        # and autograph's conversion cache can go stale in long processes.
        self.grad_fn = tf.function(self.replica_grads, jit_compile=xla,
                                   reduce_retracing=True, autograph=False)
        """`replica_grads`, compiled (with xla)."""
        self._update_fn = tf.function(self._fused_update, jit_compile=True,
                                      reduce_retracing=True, autograph=False)
        self.run = tf.function(self._one_update, autograph=False)
        """One update: (distributed iterator) -> (loss, target tokens, gradient norm)."""
        self.run_many = tf.function(self._updates, autograph=False)
        """`n` updates (an int32 scalar tensor >= 1) in one call: (iterator, n) ->
        (the last update's loss, the tokens of all n, the last gradient norm)."""

    # ------------------------------------------------- one replica's parts
    def replica_grads(self, batch: dict[str, tf.Tensor]):
        """One replica's loss and gradients of one micro-batch.

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

    def first_micro(self, batch):
        """Replica context: `replica_grads` of the first micro-batch, compiled."""
        return self._on_replica_device(self.grad_fn, batch)

    def next_micro(self, batch, grads, loss_sum, tokens):
        """Replica context: add the next micro-batch's gradients, loss and tokens."""
        g, l, t = self._on_replica_device(self.grad_fn, batch)
        return [a + b for a, b in zip(grads, g)], loss_sum + l, tokens + t

    def reduce(self, grads, loss_sum, tokens):
        """Replica context: the global token-mean gradient, loss, tokens and norm."""
        ctx = tf.distribute.get_replica_context()
        total_tokens = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tokens)
        total_loss = ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss_sum)
        factor = float(self.hparams.batch_size) / tf.maximum(total_tokens, 1.0)
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [g * factor for g in grads])
        grad_norm = tf.linalg.global_norm(grads)
        if self.fp16:  # report the norm of the unscaled gradient
            grad_norm = grad_norm / tf.cast(self.optimizer.dynamic_scale, grad_norm.dtype)
        return grads, total_loss / tf.maximum(total_tokens, 1.0), total_tokens, grad_norm

    def apply(self, grads, loss_sum, tokens):
        """Replica context: reduce, then let the optimizer apply the gradients."""
        grads, loss, total_tokens, grad_norm = self.reduce(grads, loss_sum, tokens)
        self.optimizer.apply(grads, self.model.trainable_variables)
        return loss, total_tokens, grad_norm

    def _fused_update(self, batch):
        """The whole update of one replica and one micro-batch (`fused`)."""
        return self.apply(*self.replica_grads(batch))

    # ------------------------------------------------------------ updates
    def _one_update(self, iterator):
        """One optimizer update over `gradient_accumulation_steps` micro-batches."""
        run = self.strategy.run
        first = self.strategy.experimental_local_results
        if self.fused:
            loss, tokens, grad_norm = run(self._update_fn, (next(iterator),))
            return first(loss)[0], first(tokens)[0], first(grad_norm)[0]
        state = run(self.first_micro, (next(iterator),))
        for _ in range(self.hparams.gradient_accumulation_steps - 1):
            state = run(self.next_micro, (next(iterator), *state))
        loss, tokens, grad_norm = run(self.apply, state)
        return first(loss)[0], first(tokens)[0], first(grad_norm)[0]

    def _updates(self, iterator, n):
        def body(i, loss, tokens, grad_norm):
            step_loss, step_tokens, step_norm = self._one_update(iterator)
            return (i + 1, tf.cast(step_loss, tf.float32),
                    tokens + tf.cast(step_tokens, tf.float32), tf.cast(step_norm, tf.float32))

        zero = tf.constant(0.0)
        _, loss, tokens, grad_norm = tf.while_loop(
            lambda i, *_: i < n, body, (tf.constant(0), zero, zero, zero))
        return loss, tokens, grad_norm

