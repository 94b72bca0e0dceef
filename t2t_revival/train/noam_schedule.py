"""The paper's learning-rate schedule (section 5.3, equation 3), with an
optional linear cooldown to 0 before the last update."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="t2t_revival")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = multiplier * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Linear warmup for `warmup_steps` updates, then decay with the inverse square
    root of the step number. `step` counts optimizer updates from 1 (the Keras
    optimizer passes its 0-based iteration count).

    With `cooldown_steps` > 0 the rate is also multiplied by
    min(1, (train_steps - iteration) / cooldown_steps): unchanged until the
    last `cooldown_steps` updates, then falling linearly, reaching
    1 / cooldown_steps of equation 3 at the last update (iteration
    train_steps - 1) and 0 after it.

    Args:
        d_model: model width.
        warmup_steps: the paper's warmup_steps (4000).
        multiplier: the `learning_rate` hparam (1.0 is the paper).
        cooldown_steps: the `learning_rate_cooldown_steps` hparam (0 = none).
        train_steps: the update count training ends at; needed with
            cooldown_steps, at least cooldown_steps.
        end_step: optional, an integer variable that replaces `train_steps`
            as the end of the cooldown, read at every update: the trainer
            moves it to where a time budget runs out (`CooldownFit`). Not
            part of the config (the trainer makes it each run).
    """

    def __init__(self, d_model, warmup_steps, multiplier=1.0, cooldown_steps=0,
                 train_steps=None, end_step=None):
        if cooldown_steps and (train_steps is None or train_steps < cooldown_steps):
            raise ValueError(f"cooldown_steps={cooldown_steps} needs train_steps >= it. "
                             f"Received: train_steps={train_steps}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.multiplier = multiplier
        self.cooldown_steps = cooldown_steps
        self.train_steps = train_steps
        self.end_step = end_step

    def __call__(self, step):
        iteration = ops.cast(step, "float32")
        step = iteration + 1.0
        warmup = max(float(self.warmup_steps), 1.0)
        rate = (self.multiplier * float(self.d_model) ** -0.5
                * ops.minimum(ops.rsqrt(step), step * warmup ** -1.5))
        if self.cooldown_steps:
            end = (float(self.train_steps) if self.end_step is None
                   else ops.cast(self.end_step, "float32"))
            left = (end - iteration) / float(self.cooldown_steps)
            rate = rate * ops.clip(left, 0.0, 1.0)
        return rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
                "multiplier": self.multiplier, "cooldown_steps": self.cooldown_steps,
                "train_steps": self.train_steps}
