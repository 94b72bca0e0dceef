"""The paper's learning-rate schedule (section 5.3, equation 3)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="t2t_revival")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = multiplier * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Linear warmup for `warmup_steps` updates, then decay with the inverse square
    root of the step number. `step` counts optimizer updates from 1 (the Keras
    optimizer passes its 0-based iteration count).

    Args:
        d_model: model width.
        warmup_steps: the paper's warmup_steps (4000).
        multiplier: the `learning_rate` hparam (1.0 is the paper).
    """

    def __init__(self, d_model, warmup_steps, multiplier=1.0):
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.multiplier = multiplier

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = max(float(self.warmup_steps), 1.0)
        return (self.multiplier * float(self.d_model) ** -0.5
                * ops.minimum(ops.rsqrt(step), step * warmup ** -1.5))

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
                "multiplier": self.multiplier}
