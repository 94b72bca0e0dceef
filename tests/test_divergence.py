"""A run whose weights go NaN or infinite stops with one line, and never
saves them: its kept checkpoints stay the ones from before."""

import math

import numpy as np
import pytest

from test_faults import PROBLEM, TINY_HPARAMS, _one_error_line, _run
from test_faults_run_dir import _trainer_args


def test_a_diverged_run_stops_with_one_line_and_keeps_its_checkpoints(tiny_data, tmp_path):
    """learning_rate=1e37: the first update makes the weights huge (finite,
    saved as ckpt-1), the second's loss and gradients are NaN. Before, the run
    went on to its end, saving NaN checkpoints and calling a NaN dev loss its
    best, and exited 0."""
    import tensorflow as tf

    out = tmp_path / "run"
    args = _trainer_args(tiny_data, out, 12, "--save_checkpoints_steps=1",
                         "--log_step_count_steps=1")
    args = [a.replace("--hparams=", "--hparams=learning_rate=1e37,") for a in args]
    line = _one_error_line(_run("trainer", *args), "t2t-trainer", "the model diverged at step 2",
                           "its update's loss nan, gradient norm nan",
                           f"the last checkpoint, {out / 'ckpt-1'}, is from before it",
                           "Lower learning_rate (now 1e+37)",
                           f"--warm_start_from={out / 'ckpt-1'}")
    assert line.endswith("Received: step=2")
    assert tf.train.latest_checkpoint(str(out)) == str(out / "ckpt-1")
    assert sorted(p.name for p in out.glob("ckpt-*.index")) == ["ckpt-1.index"]
    reader = tf.train.load_checkpoint(str(out / "ckpt-1"))
    for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            assert np.isfinite(value).all(), name
    assert not (out / "best").exists()


@pytest.fixture
def trained(tiny_data, tmp_path):
    """A Trainer of the tiny model after 2 updates (ckpt-2 saved)."""
    from t2t_revival.train.train_config import TrainConfig
    from t2t_revival.train.trainer import Trainer

    config = TrainConfig(problem=PROBLEM, hparams_set="transformer_tiny", hparams=TINY_HPARAMS,
                         data_dir=str(tiny_data), output_dir=str(tmp_path / "run"),
                         train_steps=2, log_every=1, eval_steps=1, eval_every=0,
                         eval_decode_sentences=0, xla=False)
    trainer = Trainer(config, log=lambda line: None)
    assert trainer.train()["checkpoint"].endswith("ckpt-2")
    return trainer


def test_a_weight_gone_infinite_is_not_saved(trained):
    from t2t_revival.errors import UserError

    weight = trained.model.trainable_variables[0]
    weight.assign(_filled_like(weight, math.inf))
    with pytest.raises(UserError, match=r"diverged at step 2: its weights hold NaN or "
                                        r"infinity, so it is not saved; the last "
                                        r"checkpoint, .*ckpt-2, is from before it"):
        trained.save()
    assert trained.manager.latest_checkpoint.endswith("ckpt-2")


def test_an_overflow_that_left_the_weights_finite_goes_on(trained):
    """float16 loss scaling skips an update whose gradient overflowed: its
    gradient norm is infinite, the weights are untouched."""
    from t2t_revival.errors import UserError

    trained._check_diverged(2, 3.5, math.inf)   # nothing raised
    trained._check_diverged(2, math.nan, math.nan)
    weight = trained.model.trainable_variables[-1]
    weight.assign(_filled_like(weight, math.nan))
    trained._check_diverged(2, 3.5, 1.0)   # not read back: loss and norm are finite
    with pytest.raises(UserError, match=r"its update's loss 3\.5, gradient norm nan"):
        trained._check_diverged(2, 3.5, math.nan)


def _filled_like(variable, value):
    return np.full(variable.shape, value, dtype=variable.dtype)
