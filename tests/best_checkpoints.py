"""Checkpoints and best/ records for the tests of best/ (test_best_checkpoint,
test_disk_failures): small TensorFlow checkpoints whose one variable holds
their step, and the check that best/ is complete and readable."""

import os

import numpy as np

from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
from t2t_revival.run_dir.best_record import BestRecord


def write_checkpoint(folder, step, size=16):
    """A TensorFlow checkpoint `folder/ckpt-<step>` whose one variable is all `step`."""
    import tensorflow as tf

    os.makedirs(folder, exist_ok=True)
    variable = tf.Variable(np.full([size], float(step), np.float32))
    return tf.train.Checkpoint(v=variable).write(os.path.join(str(folder), f"ckpt-{step}"))


def best_record(step, value=None, metric="bleu"):
    """best.json's record of `ckpt-<step>`, its value `step` unless given."""
    return BestRecord(step=step, metric=metric, value=float(step if value is None else value),
                      higher_is_better=metric != "loss", checkpoint=f"ckpt-{step}",
                      sentences=200 if metric != "loss" else 0)


def assert_best_readable(best: BestCheckpoint):
    """best/ is complete: best.json, TensorFlow's index and the weights agree.
    Returns the step it holds."""
    import tensorflow as tf

    record = best.record()
    assert record is not None, os.listdir(best.output_dir)
    latest = tf.train.latest_checkpoint(best.path)
    assert latest == os.path.join(best.path, record.checkpoint) == best.checkpoint_path()
    values = tf.train.load_checkpoint(latest).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE")
    assert np.all(values == record.step)
    return record.step
