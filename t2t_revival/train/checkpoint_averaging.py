"""Averaging the weights of the last N checkpoints (the paper, section 6.1)."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.errors import UserError
from t2t_revival.hparams import HParams
from t2t_revival.train.checkpointing import make_checkpoint

AVERAGED_DIR = "averaged"


def build_model(output_dir: str, model_name: str = "transformer"):
    """The model of a training directory, built from its hparams.json."""
    registry.load_all()
    hparams = HParams.load(os.path.join(output_dir, "hparams.json"))
    model = registry.models.get(model_name)(hparams)
    dummy = tf.zeros([1, 8], tf.int32)
    model({"inputs": dummy, "targets": dummy}, training=False)
    return model, hparams


def average_checkpoints(output_dir: str, num_last: int, model_name: str = "transformer",
                        log=print) -> str:
    """Average the model weights of the last `num_last` checkpoints of output_dir.

    Writes `output_dir/averaged/ckpt-<last step>` (model weights only), which
    `t2t-decoder --checkpoint_path` reads like any checkpoint. Returns its path.
    """
    state = tf.train.get_checkpoint_state(output_dir)
    paths = list(state.all_model_checkpoint_paths) if state else []
    if not paths:
        raise UserError(f"no checkpoints in {output_dir}; train first with t2t-trainer. "
                        f"Received: output_dir={output_dir}")
    if num_last > len(paths):
        log(f"Only {len(paths)} checkpoints in {output_dir}; averaging all of them.")
    paths = paths[-num_last:]
    model, _ = build_model(output_dir, model_name)
    checkpoint = make_checkpoint(model)
    sums = [np.zeros(w.shape, np.float64) for w in model.weights]
    for path in paths:
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
        for total, w in zip(sums, model.weights):
            total += np.asarray(w.numpy(), np.float64)
        log(f"read {path}")
    for total, w in zip(sums, model.weights):
        w.assign((total / len(paths)).astype(w.dtype))
    step = paths[-1].rsplit("-", 1)[-1]
    out_dir = os.path.join(output_dir, AVERAGED_DIR)
    os.makedirs(out_dir, exist_ok=True)
    # CheckpointManager writes the data first and the `checkpoint` index last,
    # so a kill mid-save leaves the previous average readable.
    manager = tf.train.CheckpointManager(checkpoint, out_dir, max_to_keep=3,
                                         checkpoint_name="ckpt")
    path = manager.save(checkpoint_number=int(step) if step.isdigit() else None)
    log(f"Averaged {len(paths)} checkpoints into {path}")
    return path
