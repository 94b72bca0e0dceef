"""Several updates per compiled call (`--steps_per_execution`, issue 17 item 3):
the same weights as one update per call, progress lines, summaries and
checkpoints on the same steps, and a resume after SIGKILL lands on the saved step."""

import json
import subprocess
import sys

import pytest

from conftest import ENV, ROOT, run_cli, sigkill_once_saved
from tiny_runs import PROBLEM, TINY_HPARAMS


def test_a_call_ends_on_the_next_progress_save_eval_or_final_step():
    from t2t_revival.settings.hparams import HParams
    from t2t_revival.settings.train_config import TrainConfig
    from t2t_revival.train.training_loop import updates_in_next_call

    def sizes(steps_per_execution, train_steps=23, end_step=None, log=50, save=1000, eval=1000):
        config = TrainConfig(problem=PROBLEM, output_dir="", data_dir="", hparams=HParams(),
                             train_steps=train_steps, steps_per_execution=steps_per_execution,
                             log_step_count_steps=log, save_checkpoints_steps=save,
                             local_eval_frequency=eval)
        end_step = end_step or train_steps   # before it: the cooldown fitted to a budget
        step, calls = 0, []
        while step < end_step:
            calls.append(updates_in_next_call(step, end_step, config))
            step += calls[-1]
        return calls

    assert sizes(1, log=5, save=10, eval=0) == [1] * 23
    assert sizes(4, log=5, save=10, eval=0) == [4, 1, 4, 1, 4, 1, 4, 1, 3]
    assert sizes(8, log=6, save=9, eval=0) == [6, 3, 3, 6, 5]
    assert sizes(10, log=50, save=0, eval=7) == [7, 7, 7, 2]
    assert sizes(100, log=100, save=1000, eval=1000, train_steps=250) == [100, 100, 50]
    # A fitted end before --train_steps: the last call ends on it.
    assert sizes(8, log=5, save=0, eval=0, end_step=20) == [5, 5, 5, 5]
    assert sizes(100, log=100, save=0, eval=0, train_steps=250, end_step=150) == [100, 50]


@pytest.mark.parametrize("updates", [3])
def test_n_updates_per_call_give_the_same_weights_as_one_at_a_time(tmp_path, updates):
    """Default strategy and MirroredStrategy on 2 logical CPUs, XLA as in training;
    and the fused update (one replica) against the unfused one."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "scripts" / "steps_per_execution_check.py"),
         str(tmp_path), str(2 * updates)],
        capture_output=True, text=True, env=ENV, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for name, replicas in (("default", 1), ("mirrored", 2)):
        r = result[name]
        assert r["replicas"] == replicas
        assert r["step1"] == r["stepn"] == 2 * updates // replicas
        assert r["tokens1"] == r["tokensn"] > 0          # tokens summed on the device
        assert r["loss1"] == pytest.approx(r["lossn"], rel=1e-6)
        assert r["w_moved"] > 1e-6                       # training changed the weights
        # (at the warm-up's small learning rate: the same to float round-off)
        assert r["w_diff"] <= 1e-3 * r["w_moved"] and r["opt_diff"] <= 1e-7, r
    # One replica: the update is fused into one XLA call (issue 17 item 4); it
    # trains the same weights as the unfused update, to float round-off.
    r = result["default"]
    assert r["fused"] is True
    assert r["unfused_tokens"] == r["tokens1"]
    assert r["unfused_loss"] == pytest.approx(r["loss1"], rel=1e-5)
    assert r["unfused_w_diff"] <= 1e-2 * r["w_moved"], r


def _train(tiny_data, out_dir, steps_per_execution):
    """A tiny run of 10 updates, `steps_per_execution` a call, with the fake
    update (what the loop schedules around the calls is the subject here;
    that n updates a call compute what n calls do is the test above)."""
    from fake_update_step import FakeUpdateStep
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    config = resolve_train_config(
        problem=PROBLEM, output_dir=str(out_dir), data_dir=str(tiny_data),
        hparams_set="transformer_tiny", hparams=TINY_HPARAMS, train_steps=10,
        log_step_count_steps=4, save_checkpoints_steps=8, local_eval_frequency=5,
        eval_steps=1, eval_decode_sentences=0, xla=False,
        steps_per_execution=steps_per_execution)
    lines = []
    trainer = Trainer(config, log=lines.append, update_step=FakeUpdateStep)
    trainer.train()
    return trainer, lines, trainer.update_step.calls   # the updates of each call


def _summary_steps(directory, tag):
    import tensorflow as tf

    steps = []
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            steps += [event.step for v in event.summary.value if v.tag == tag]
    return steps


def test_progress_lines_summaries_evals_and_checkpoints_land_on_the_same_steps(
        tiny_data, tmp_path):
    runs = {n: _train(tiny_data, tmp_path / f"n{n}", n) for n in (1, 4)}
    trainer1, lines1, calls1 = runs[1]
    trainer, lines4, calls4 = runs[4]
    assert calls1 == [1] * 10
    assert calls4 == [4, 1, 3, 2]      # ends on progress 4, eval 5, progress and save 8, final 10

    def landmarks(lines):
        return [line.split("  loss")[0].split(": loss")[0] for line in lines
                if line.startswith(("step ", "eval at step"))]

    assert landmarks(lines4) == landmarks(lines1) == [
        "step 4/10", "eval at step 5", "step 8/10", "step 10/10", "eval at step 10"]
    for n in (1, 4):
        out = tmp_path / f"n{n}"
        assert _summary_steps(out / "train", "loss") == [4, 8, 10]
        assert _summary_steps(out / "eval", "loss") == [5, 10]
    # save_every 8, the final step, and the eval at 5 (its new best is saved for best/)
    for t in (trainer1, trainer):
        assert [c.rsplit("-", 1)[1] for c in t.directory.checkpoints.intact()] == \
            ["5", "8", "10"]
        assert t.step == 10


def _trainer_args(data, out, steps, *extra):
    return [str(ROOT / "t2t_trainer.py"), f"--problem={PROBLEM}",
            "--hparams_set=transformer_tiny", f"--hparams={TINY_HPARAMS}",
            f"--data_dir={data}", f"--output_dir={out}", f"--train_steps={steps}", "--noxla",
            "--local_eval_frequency=0", "--eval_steps=1", "--eval_decode_sentences=0", *extra]


def test_sigkill_with_several_updates_per_call_resumes_from_the_saved_step(tiny_data,
                                                                           tmp_path):
    import tensorflow as tf

    out_dir = tmp_path / "run"
    latest, saved_step, _ = sigkill_once_saved(
        _trainer_args(tiny_data, out_dir, 100000, "--steps_per_execution=8",
                      "--save_checkpoints_steps=6", "--log_step_count_steps=100"),
        out_dir, min_step=12, timeout=300, settle=0.5)   # land in a later call or save
    assert saved_step % 6 == 0

    final = saved_step + 5
    # The resume in this process: its lines and files are the subject.
    out = run_cli("trainer", *_trainer_args(tiny_data, out_dir, final, "--steps_per_execution=8",
                                            "--save_checkpoints_steps=6",
                                            "--log_step_count_steps=100")[1:])
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"Resumed from {latest} at step {saved_step}." in out.stdout
    assert f"step {final}/{final}" in out.stdout
    assert tf.train.latest_checkpoint(str(out_dir)).endswith(f"-{final}")
