"""`make_optimizer`: the paper's optimizer, as the trainer and the benchmarks build it.

Adam(beta1 0.9, beta2 0.98, eps 1e-9) on the learning-rate schedule of
section 5.3 (`NoamSchedule`, with the optional cooldown), clipping by the
global norm when the hparams ask for it, and dynamic loss scaling under
mixed_float16. Keras only (no TensorFlow import): the JAX benchmark of the
training step (`benchmarks/train_step.py --backend jax`) times this very
optimizer.
"""

from __future__ import annotations

import keras

from t2t_revival.settings.hparams import HParams
from t2t_revival.train.noam_schedule import NoamSchedule
from t2t_revival.train.reduced_gradients_adam import ReducedGradientsAdam


def make_optimizer(hparams: HParams, train_steps: int, end_step=None):
    """The optimizer of a run of `hparams` to `train_steps` updates.

    Args:
        hparams: the resolved hparams (learning rate, warmup, cooldown, Adam's
            settings, clip_grad_norm, mixed_precision).
        train_steps: where the cooldown ends (--train_steps).
        end_step: optional integer variable that moves the cooldown's end
            (`NoamSchedule`'s end_step; the trainer's time budget).

    Returns:
        `ReducedGradientsAdam` (Keras's Adam, which does not all-reduce the
        gradients the trainer has already reduced; plain Adam without
        tf.distribute), wrapped in `keras.optimizers.LossScaleOptimizer`
        under mixed_float16.
    """
    optimizer = ReducedGradientsAdam(
        learning_rate=NoamSchedule(hparams.d_model, hparams.learning_rate_warmup_steps,
                                   hparams.learning_rate, hparams.learning_rate_cooldown_steps,
                                   train_steps, end_step=end_step),
        beta_1=hparams.adam_beta1, beta_2=hparams.adam_beta2, epsilon=hparams.adam_epsilon,
        # The optimizer sees the all-reduced gradient, so this clips by the
        # global norm of the whole update.
        global_clipnorm=hparams.clip_grad_norm or None)
    if hparams.mixed_precision == "mixed_float16":
        # Dynamic loss scaling; skips updates whose gradients overflow.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
