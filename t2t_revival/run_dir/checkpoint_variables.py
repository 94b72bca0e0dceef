"""What goes into a checkpoint: explicit maps of variables.

Keras 3.15 (TensorFlow backend) does not expose layers kept in Python lists
(the encoder and decoder stacks) to `tf.train.Checkpoint`'s object graph, so
checkpointing the model object would silently leave them out. We checkpoint
explicit maps instead: model variables by their path inside the model (without
the model's own, instance-numbered, name) and optimizer variables by position,
which is fixed by the model's trainable variables. The resolved hparams.json
beside the checkpoints guarantees the same structure on restore
(`TrainingDirectory.restore_weights`).
"""

from __future__ import annotations

import tensorflow as tf


def model_variables(model) -> dict[str, tf.Variable]:
    """{path inside the model: tf.Variable} for every weight of `model`."""
    items = {}
    for weight in model.weights:
        key = weight.path.split("/", 1)[-1].replace("/", ".")
        if key in items:
            raise ValueError(f"two weights share the path {weight.path}; give the "
                             f"layers distinct names.")
        items[key] = weight.value if hasattr(weight, "value") else weight
    return items


def optimizer_variables(optimizer) -> dict[str, tf.Variable]:
    """{position_name: tf.Variable} for every variable of `optimizer`."""
    items = {}
    for i, var in enumerate(optimizer.variables):
        name = var.path.rsplit("/", 1)[-1] if hasattr(var, "path") else var.name
        items[f"{i:05d}_{name.split('_')[-1]}"] = var.value if hasattr(var, "value") else var
    return items


def make_checkpoint(model, optimizer=None) -> tf.train.Checkpoint:
    """A tf.train.Checkpoint of the model's (and optimizer's) variables."""
    if optimizer is None:
        return tf.train.Checkpoint(model=model_variables(model))
    return tf.train.Checkpoint(model=model_variables(model),
                               optimizer=optimizer_variables(optimizer))

