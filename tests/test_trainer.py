"""The trainer: replicas agree with one device, XLA per replica, resume after
SIGKILL, checkpoint averaging, user errors, and the README's main job."""

import glob
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ENV, ROOT, run_cli, sigkill_once_saved
from tiny_runs import TINY_HPARAMS



def _python(args, env=None, timeout=900, **kw):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          env=env or ENV, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def replica_run(tmp_path_factory):
    """One subprocess: 2 logical CPU replicas vs 1 device, with an XLA dump."""
    tmp = tmp_path_factory.mktemp("replicas")
    dump = tmp / "xla_dump"
    env = dict(ENV, XLA_FLAGS=f"--xla_dump_to={dump}")
    out = _python([str(ROOT / "tests" / "scripts" / "replica_check.py"), str(tmp)], env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), dump


def test_two_replicas_match_one_device_on_the_same_global_batch(replica_run):
    result, _ = replica_run
    assert result["replicas"] == 2
    assert result["tokens1"] == result["tokens2"] == 28.0
    assert result["loss1"] == pytest.approx(result["loss2"], rel=1e-5)
    # Gradients of the global token mean agree to float32 round-off.
    assert result["grad_diff"] <= 1e-5 * max(result["grad_scale"], 1e-3)
    assert result["step1"][0] == pytest.approx(result["step2"][0], rel=1e-5)
    assert result["step1"][2] == pytest.approx(result["step2"][2], rel=1e-4)  # grad norm
    assert result["m_diff"] < 1e-6 and result["w_diff"] < 1e-5
    assert result["replica_copies_diff"] == 0.0


def test_replica_step_is_xla_compiled_once_per_bucket_shape(replica_run):
    result, dump = replica_run
    assert result["step"] == 7
    modules = glob.glob(str(dump / "*replica_grads*.before_optimizations.txt"))
    assert modules, f"no XLA module of the replica step in {dump}"
    # Entry parameter shapes of each compiled module: one per (device, shape).
    shapes = set()
    for path in modules:
        text = open(path).read()
        shapes.update(re.findall(r"s32\[(\d+,\d+)\]", text.split("ENTRY", 1)[1][:4000]))
    assert {"4,12", "2,12", "4,8", "2,16"} <= shapes
    # Bounded: one module per device and shape, not one per step.
    assert len(modules) <= 2 * 4


def test_user_errors_are_one_line(tmp_path):
    cases = [
        (["--hparams_set=nope"], "Unknown hparam set 'nope'"),
        (["--problem=translate_ende_multi30", "--hparams_set=transformer_tiny"],
         "Closest match: 'translate_ende_multi30k'"),
        (["--hparams_set=transformer_tiny", f"--data_dir={tmp_path / 'data'}",
          f"--tmp_dir={tmp_path / 'no_such_raw_dir'}", f"--output_dir={tmp_path / 'out'}",
          "--train_steps=1"], "no_such_raw_dir"),
        (["--train_steps=0"], "train_steps"),
        (["--seed=-1"], "--seed=-1: -1 is not an integer in the range [0, 4294967295]"),
    ]
    for args, message in cases:
        out = run_cli("trainer", *args)   # in this process: the output is the subject
        lines = [l for l in out.stderr.splitlines() if l.startswith("t2t-trainer: error:")]
        assert out.returncode == 2, (args, out.stderr[-2000:])
        assert len(lines) == 1 and message in lines[0], (args, out.stderr[-2000:])
        assert "Traceback" not in out.stderr


def test_averaging_copies_of_one_checkpoint_gives_it_back(tmp_path):
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.checkpoint_folder import restore_model_weights
    from t2t_revival.run_dir.training_directory import TrainingDirectory
    from t2t_revival.train.trainer import Trainer

    config = resolve_train_config(problem="translate_ende_multi30k", output_dir=str(tmp_path),
                                  data_dir=str(tmp_path), hparams_set="transformer_tiny")
    trainer = Trainer(config, log=lambda *a: None)
    trainer.hparams.save(str(tmp_path / "hparams.json"))
    directory = TrainingDirectory(tmp_path)
    for step in (1, 2, 3):
        trainer.optimizer.iterations.assign(step)
        trainer.save()
        if step == 1:   # fewer checkpoints than asked for: all of them, said in words
            logs = []
            directory.average_last(build_model, 2, log=logs.append)
            assert logs[0] == f"Only 1 checkpoint in {tmp_path}; averaging it."
            assert logs[-1] == f"Averaged 1 checkpoint into {tmp_path / 'averaged' / 'ckpt-1'}"
    expected = [w.numpy() for w in trainer.model.weights]
    import tensorflow as tf
    saved = tf.train.load_checkpoint(trainer.checkpoints.latest())
    model_keys = [k for k in saved.get_variable_to_shape_map()
                  if k.startswith("model/") and k.endswith("VARIABLE_VALUE")]
    assert len(model_keys) == len(trainer.model.weights) > 30  # every layer's weights
    logs = []
    path = directory.average_last(build_model, 3, log=logs.append)
    assert path.endswith("averaged/ckpt-3")
    # Steps 1..3 span 67% of the run: the averager warns (the README's quick
    # start once averaged steps 1000 and 2000 and lost 1.6 BLEU).
    assert [l for l in logs if l.startswith("Warning: the 3 checkpoints span steps 1 to 3")]
    model = build_model(directory.read_hparams())
    restore_model_weights(model, path)
    assert len(model.weights) == len(expected)
    for w, e in zip(model.weights, expected):
        np.testing.assert_allclose(w.numpy(), e, rtol=1e-6, atol=1e-7)
    # And a mix of different checkpoints averages elementwise.
    w0 = trainer.model.weights[0]
    w0.assign(w0.numpy() + 3.0)
    trainer.optimizer.iterations.assign(4)
    trainer.save()
    logs = []
    path = directory.average_last(build_model, 2, log=logs.append)
    assert not [l for l in logs if "Warning" in l], logs   # steps 3 and 4: 25% of the run
    restore_model_weights(model, path)
    np.testing.assert_allclose(model.weights[0].numpy(), expected[0] + 1.5, rtol=1e-5)


def _trainer_args(data_dir, out_dir, steps, *extra):
    """t2t_trainer.py's flags for the tiny model of `tiny_runs` on its corpus,
    XLA on (the trainer's default), no dev decoding."""
    return [str(ROOT / "t2t_trainer.py"), "--problem=translate_ende_multi30k",
            "--hparams_set=transformer_tiny", f"--hparams={TINY_HPARAMS}",
            f"--data_dir={data_dir}", f"--output_dir={out_dir}", f"--train_steps={steps}",
            "--eval_decode_sentences=0", *extra]


@pytest.mark.slow
def test_sigkill_mid_run_resumes_from_latest_checkpoint(tiny_data, tmp_path):
    import tensorflow as tf

    out_dir = tmp_path / "run"
    args = _trainer_args(tiny_data, out_dir, 100000, "--save_checkpoints_steps=3",
                         "--local_eval_frequency=0", "--log_step_count_steps=1")
    # land somewhere in the middle of later steps or saves
    latest, saved_step, reader = sigkill_once_saved(args, out_dir, min_step=9, timeout=600,
                                                    settle=0.7)

    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer
    config = resolve_train_config(problem="translate_ende_multi30k", output_dir=str(out_dir),
                                  data_dir=str(tiny_data), hparams_set="transformer_tiny",
                                  hparams=TINY_HPARAMS)
    trainer = Trainer(config, log=lambda *a: None)
    assert trainer.restore() == latest and trainer.step == saved_step
    # Optimizer state (Adam moments) comes back, not just the weights.
    keys = [k for k in reader.get_variable_to_shape_map() if k.startswith("optimizer/")]
    moments = {k: reader.get_tensor(k) for k in keys if "VARIABLE_VALUE" in k}
    restored = [v.numpy() for v in trainer.optimizer.variables]
    assert any(np.abs(r).sum() > 0 for r in restored[2:])
    for value in moments.values():
        assert any(r.shape == value.shape and np.array_equal(r, value) for r in restored)

    # The resume in this process: its lines and files are the subject.
    out = run_cli("trainer", *_trainer_args(tiny_data, out_dir, saved_step + 2,
                                            "--log_step_count_steps=1",
                                            "--local_eval_frequency=0", "--eval_steps=2")[1:])
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"Resumed from {latest} at step {saved_step}." in out.stdout
    assert f"step {saved_step + 2}/{saved_step + 2}" in out.stdout
    assert tf.train.latest_checkpoint(str(out_dir)).endswith(f"-{saved_step + 2}")


@pytest.mark.slow
def test_time_budget_stops_at_a_progress_step_then_saves_and_evaluates(tiny_data, tmp_path):
    import tensorflow as tf

    out_dir = tmp_path / "run"
    # 0.6 s of budget: spent during the first steps (XLA compiles), so the run
    # stops at the first progress line, step 3, far short of --train_steps.
    # (In this process: its lines and files are the subject.)
    out = run_cli("trainer", *_trainer_args(tiny_data, out_dir, 100000,
                                            "--max_train_minutes=0.01",
                                            "--log_step_count_steps=3",
                                            "--local_eval_frequency=0", "--eval_steps=2")[1:])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Stopping at step 3: the --max_train_minutes=0.01 budget is spent." in out.stdout
    assert "eval at step 3:" in out.stdout
    assert tf.train.latest_checkpoint(str(out_dir)).endswith("-3")


@pytest.mark.slow
def test_readme_main_job_dev_loss_falls(tiny_run):
    """The README's main command (shortened): tiny on Multi30k, dev loss falls."""
    from readme_workflow import MAIN_JOB_OUTPUT_DIR as run, TINY_RUN_STEPS as steps

    out_dir, stdout = tiny_run
    evals = [float(x) for x in re.findall(r"eval at step \d+: loss ([\d.]+)", stdout)]
    first_train = float(re.search(r"step 50/\d+  loss ([\d.]+)", stdout).group(1))
    hp = json.load(open(out_dir / "hparams.json"))
    chance = math.log(hp["vocab_size"])
    assert first_train > 0.6 * chance, stdout  # near chance early on
    assert evals and evals[-1] < 0.6 * chance, stdout
    for name in ("hparams.json", "run.json", "vocab.model", "checkpoint"):
        assert (out_dir / name).exists()
    # Every file, checkpoints and summaries included, is readable by other users.
    files = [p for p in out_dir.rglob("*") if p.is_file()]
    assert len(files) > 10
    assert [str(p) for p in files if p.stat().st_mode & 0o044 != 0o044] == []
    assert glob.glob(str(out_dir / "train" / "events.out.tfevents.*"))
    assert glob.glob(str(out_dir / "eval" / "events.out.tfevents.*"))
    # The run ends saying where its result is and what to run next.
    # (Its paths as the command gave them: the README's, relative.)
    assert f"Done: step {steps}, dev loss {evals[-1]:.4f}" in stdout, stdout[-2000:]
    assert f"the latest {run}/ckpt-{steps}." in stdout
    assert f"t2t-avg-checkpoints --output_dir={run} --num_last_checkpoints=5" in stdout
    assert f"--checkpoint_path={run}/averaged/ckpt-{steps} --decode_from_file=" in stdout


def test_training_stats_progress_line_throughput_and_eta():
    import tensorflow as tf

    from t2t_revival.train.training_stats import TrainingStats

    now = [100.0]
    stats = TrainingStats(start_step=10, train_steps=110, writer=tf.summary.create_noop_writer(),
                          clock=lambda: now[0])
    for _ in range(5):
        now[0] += 2.0
        stats.update(400.0)
    line = stats.report(15, 2.5, 1e-3, 0.75)
    # 2,000 tokens in 10 s; 2 s a step for the 95 steps left.
    assert line == ("step 15/110  loss 2.5000  lr 0.001  grad_norm 0.75  "
                    "200 tokens/s  ETA 0h03m10s")
    assert stats.elapsed() == 10.0
    now[0] += 1.0
    stats.update(50.0)
    assert "50 tokens/s" in stats.report(16, 2.0, 1e-3, 0.5)  # a new window
