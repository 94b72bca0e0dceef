"""Faults of the training itself: a run whose weights go NaN or infinite
stops with one line and never saves them (its kept checkpoints stay the
ones from before); a device out of memory is one line naming the settings
that need less."""

import math

import numpy as np
import pytest

from conftest import checkpoint_step, one_line_error, run_cli
from tiny_runs import PROBLEM, TINY_HPARAMS, trainer_args


def test_a_diverged_run_stops_with_one_line_and_keeps_its_checkpoints(tiny_data, tmp_path):
    """learning_rate=1e37: the first update makes the weights huge (finite,
    saved as ckpt-1), the second's loss and gradients are NaN. Before, the run
    went on to its end, saving NaN checkpoints and calling a NaN dev loss its
    best, and exited 0."""
    import tensorflow as tf

    out = tmp_path / "run"
    args = trainer_args(tiny_data, out, 12, "--save_checkpoints_steps=1",
                        "--log_step_count_steps=1")
    args = [a.replace("--hparams=", "--hparams=learning_rate=1e37,") for a in args]
    line = one_line_error(run_cli("trainer", *args), "t2t-trainer",
                          "the model diverged at step 2",
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


def test_a_run_that_diverged_before_its_first_save_is_rerun_with_new_hparams(tiny_data,
                                                                             tmp_path,
                                                                             monkeypatch):
    """learning_rate=1e45 is infinite in float32: the first update makes the
    weights infinite, and its save is refused. The output_dir then holds the
    run's hparams.json but no checkpoint: the rerun with a sane learning
    rate starts the run anew there, as the error advised."""
    import json

    out = tmp_path / "run"
    args = trainer_args(tiny_data, out, 2, "--save_checkpoints_steps=1")
    diverging = [a.replace("--hparams=", "--hparams=learning_rate=1e45,") for a in args]
    line = one_line_error(run_cli("trainer", *diverging), "t2t-trainer",
                          "the model diverged at step 1: its weights hold NaN or infinity, "
                          "so it is not saved; no checkpoint was saved before it")
    assert line.endswith("rerun (with no checkpoint saved, the output_dir takes the new "
                         "hparams). Received: step=1")
    assert not list(out.glob("ckpt-*"))
    assert json.loads((out / "hparams.json").read_text())["learning_rate"] == 1e45

    # The rerun's updates need not compute: what it says and writes is the subject.
    import t2t_revival.train.trainer as trainer_module
    from fake_update_step import FakeUpdateStep

    monkeypatch.setattr(trainer_module, "UpdateStep", FakeUpdateStep)
    result = run_cli("trainer", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (f"{out} holds the hparams of an earlier run that saved no checkpoint: starting "
            f"the run anew with these (learning_rate: saved 1e+45, now 2.0).") \
        in result.stdout
    assert json.loads((out / "hparams.json").read_text())["learning_rate"] == 2.0
    assert (out / "ckpt-2.index").exists()


def _tiny_trainer(tiny_data, tmp_path, train_steps, log=lambda line: None, update_step=None,
                  **config):
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    config = {"log_step_count_steps": 1, "eval_steps": 1, "local_eval_frequency": 0,
              "eval_decode_sentences": 0, "xla": False, **config}
    config = resolve_train_config(problem=PROBLEM, hparams_set="transformer_tiny",
                                  hparams=TINY_HPARAMS, data_dir=str(tiny_data),
                                  output_dir=str(tmp_path / "run"), train_steps=train_steps,
                                  **config)
    return Trainer(config, log=log, update_step=update_step)


@pytest.fixture
def trained(tiny_data, trained_copy, tmp_path):
    """A Trainer of the tiny model restored at step 3 (a copy of the session's
    `tiny_trained`: ckpt-1 to ckpt-3 saved), as it is after its updates."""
    trainer = _tiny_trainer(tiny_data, tmp_path, 3)
    assert trainer.restore() == str(trained_copy / "ckpt-3") and trainer.step == 3
    return trainer


def test_a_weight_gone_infinite_is_not_saved(trained):
    from t2t_revival.errors import UserError

    weight = trained.model.trainable_variables[0]
    weight.assign(_filled_like(weight, math.inf))
    with pytest.raises(UserError, match=r"diverged at step 3: its weights hold NaN or "
                                        r"infinity, so it is not saved; the last "
                                        r"checkpoint, .*ckpt-3, is from before it"):
        trained.save()
    assert trained.checkpoints.latest().endswith("ckpt-3")


def test_an_overflow_that_left_the_weights_finite_goes_on(trained):
    """float16 loss scaling skips an update whose gradient overflowed: its
    gradient norm is infinite, the weights are untouched."""
    from t2t_revival.errors import UserError

    trained.faults.check_diverged(3, 3.5, math.inf)   # nothing raised
    trained.faults.check_diverged(3, math.nan, math.nan)
    weight = trained.model.trainable_variables[-1]
    weight.assign(_filled_like(weight, math.nan))
    trained.faults.check_diverged(3, 3.5, 1.0)   # not read back: loss and norm are finite
    with pytest.raises(UserError, match=r"its update's loss 3\.5, gradient norm nan"):
        trained.faults.check_diverged(3, 3.5, math.nan)


def _filled_like(variable, value):
    return np.full(variable.shape, value, dtype=variable.dtype)


_OOM = ("OOM when allocating tensor with shape[256,32,8192] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")


@pytest.mark.parametrize("after", [0, 1])
def test_a_device_out_of_memory_is_one_line_naming_what_needs_less(after, tiny_data,
                                                                   tmp_path):
    """TensorFlow's ResourceExhaustedError (its message goes on with the
    allocator's statistics and the graph's nodes) in the update after step
    `after`; after step 1, the run is saved first (ckpt-1)."""
    import tensorflow as tf

    from t2t_revival.errors import UserError

    from fake_update_step import FakeUpdateStep

    # The updates before it need not compute: what is said and saved is the subject.
    trainer = _tiny_trainer(tiny_data, tmp_path, 3, save_checkpoints_steps=1000,
                            update_step=FakeUpdateStep)
    update = trainer.update_step.run

    def out_of_memory_after_step(iterator):
        if trainer.step >= after:
            raise tf.errors.ResourceExhaustedError(
                None, None, _OOM + "\n\t [[{{node transformer/decoder/...}}]]\nHint: ...")
        return update(iterator)

    trainer.update_step.run = out_of_memory_after_step
    with pytest.raises(UserError) as error:
        trainer.train()
    checkpoint = tmp_path / "run" / f"ckpt-{after}"
    saved = f"training stopped at step 1 and saved it ({checkpoint}): " if after else ""
    rerun = (f"train a new --output_dir with --warm_start_from={checkpoint}"
             if after else "rerun (with no checkpoint saved, the output_dir takes the new "
                           "hparams)")
    assert str(error.value) == (
        f"{saved}the update after step {after} ran out of memory: {_OOM}. Lower batch_size (now 256 "
        f"tokens per replica; batch_size=128,gradient_accumulation_steps=2 keeps the tokens "
        f"per update) or max_length (now 32), or train in mixed_precision=mixed_bfloat16 "
        f"(now float32), and {rerun}. Received: batch_size=256")
    assert sorted(p.name for p in checkpoint.parent.glob("ckpt-*.index")) == \
        (["ckpt-1.index"] if after else [])


@pytest.mark.parametrize("where", ["dev loss", "dev decoding"])
def test_a_device_out_of_memory_while_evaluating_saves_the_run_first(where, tiny_data,
                                                                     tmp_path, monkeypatch):
    """Out of memory in the evaluation at step 2 (the dev loss, or the dev
    sentences' beam search): the run is saved at step 2 first (no save was
    due: save_every=1000), and the line names the settings of what ran out.
    Before, the updates since the last save were lost."""
    import tensorflow as tf

    from fake_update_step import FakeUpdateStep
    from t2t_revival.decode import decoder as decoder_module
    from t2t_revival.errors import UserError
    from t2t_revival.train import evaluator as evaluator_module

    def out_of_memory(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, _OOM + "\n\t [[{{node while/body/...}}]]\nHint: ...")

    # What runs out: the dev loss's sums, or the dev decoder's beam search
    # (the functions the evaluator and the decoder call, each in its module).
    if where == "dev loss":
        monkeypatch.setattr(evaluator_module, "token_metrics_sums", out_of_memory)
    else:
        monkeypatch.setattr(decoder_module, "beam_search", out_of_memory)
    trainer = _tiny_trainer(tiny_data, tmp_path, 4, save_checkpoints_steps=1000,
                            local_eval_frequency=2, update_step=FakeUpdateStep,
                            eval_decode_sentences=3 if where == "dev decoding" else 0)
    with pytest.raises(UserError) as error:
        trainer.train()
    checkpoint = tmp_path / "run" / "ckpt-2"
    saved = f"training stopped at step 2 and saved it ({checkpoint}): "
    if where == "dev loss":
        assert str(error.value) == (
            f"{saved}the dev loss at step 2 ran out of memory: {_OOM}. Lower batch_size "
            f"(now 256 tokens per replica; batch_size=128,gradient_accumulation_steps=2 "
            f"keeps the tokens per update) or max_length (now 32), or train in "
            f"mixed_precision=mixed_bfloat16 (now float32), and train a new --output_dir "
            f"with --warm_start_from={checkpoint}. Received: batch_size=256")
    else:
        assert str(error.value) == (
            f"{saved}decoding the dev sentences ran out of memory: {_OOM}. Lower "
            f"--eval_decode_hparams' batch_size (now 32 sentences; e.g. batch_size=16), "
            f"beam_size (now 4), parallel_batches (now 2), and rerun with them to resume. "
            f"Received: batch_size=32")
    assert sorted(p.name for p in checkpoint.parent.glob("ckpt-*.index")) == ["ckpt-2.index"]
    assert checkpoint_step(checkpoint) == 2


def test_shards_deleted_while_training_stop_it_saved_with_one_line(tiny_data, tmp_path):
    """The train shards deleted at step 2: the next epoch's read fails
    (NotFoundError). The run saves at its step first, and names the shards."""
    import glob
    import os
    import shutil

    import tensorflow as tf

    from t2t_revival.data.data_error import DataError

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)

    def delete_the_train_shards_at_step_2(line):
        if line.startswith("step 2/"):
            for path in glob.glob(str(data / f"{PROBLEM}-train-*")):
                os.remove(path)

    from fake_update_step import FakeUpdateStep

    trainer = _tiny_trainer(data, tmp_path, 200, log=delete_the_train_shards_at_step_2,
                            save_checkpoints_steps=1000, update_step=FakeUpdateStep)
    with pytest.raises(DataError) as error:
        trainer.train()
    step = trainer.step
    assert step > 2
    out = tmp_path / "run"
    assert str(error.value) == (
        f"training stopped at step {step} and saved it ({out / f'ckpt-{step}'}); repair the "
        f"data, then rerun the same command to resume: 10 data shard(s) of {PROBLEM} are "
        f"missing, first {data / f'{PROBLEM}-train-00000-of-00010'} (deleted while in use?); "
        f"rerun t2t-datagen --problem={PROBLEM} --data_dir={data} (it writes only the "
        f"missing shards). Received: missing_shards="
        f"{[f'{PROBLEM}-train-{i:05d}-of-00010' for i in range(10)]}")
    assert tf.train.latest_checkpoint(str(out)) == str(out / f"ckpt-{step}")


def test_t2t_trainer_parses_its_hparams_once(tiny_data, tmp_path, monkeypatch, fake_updates):
    """--hparams (and --eval_decode_hparams) are parsed once, at the door
    (config_resolution); the trainer takes the typed HParams (issue 55)."""
    import t2t_revival.settings.decode_hparams as decode_hparams
    import t2t_revival.settings.hparams as hparams

    parsed = []
    for module in (hparams, decode_hparams):
        parse = module.parse_typed_pairs
        monkeypatch.setattr(module, "parse_typed_pairs",
                            lambda text, *a, parse=parse, **k: parsed.append(text)
                            or parse(text, *a, **k))
    out = run_cli("trainer", *trainer_args(tiny_data, tmp_path / "run", 1),
                  "--eval_decode_hparams=beam_size=1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert parsed == [TINY_HPARAMS, "beam_size=1"]
