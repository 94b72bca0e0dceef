"""The learning-rate schedule: equation 3 of the paper, and the optional
linear cooldown to 0 before --train_steps (learning_rate_cooldown_steps)."""

import re

import pytest

from fake_update_step import FakeUpdateStep
from t2t_revival.train.noam_schedule import NoamSchedule


def _equation_3(iteration, d_model=128, warmup=2000, multiplier=2.53):
    step = iteration + 1
    return multiplier * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def test_without_cooldown_the_schedule_is_equation_3():
    schedule = NoamSchedule(128, 2000, 2.53)
    for iteration in (0, 999, 1999, 5000, 9249, 20000):
        assert float(schedule(iteration)) == pytest.approx(_equation_3(iteration), rel=1e-5)


def test_cooldown_falls_linearly_to_zero_over_the_last_updates():
    schedule = NoamSchedule(128, 2000, 2.53, cooldown_steps=2000, train_steps=9250)
    # Before the last 2000 updates: equation 3 unchanged.
    for iteration in (0, 1999, 7000, 7250):
        assert float(schedule(iteration)) == pytest.approx(_equation_3(iteration), rel=1e-5)
    # Inside: times (9250 - iteration) / 2000.
    for iteration, factor in ((7750, 0.75), (8250, 0.5), (9000, 0.125)):
        assert float(schedule(iteration)) == pytest.approx(_equation_3(iteration) * factor,
                                                           rel=1e-5)
    # The last update (iteration 9249) still moves the weights; none after it would.
    assert float(schedule(9249)) == pytest.approx(_equation_3(9249) / 2000, rel=1e-4)
    assert float(schedule(9250)) == 0.0
    assert float(schedule(12000)) == 0.0


def test_schedule_round_trips_through_its_config_and_reads_an_old_one():
    schedule = NoamSchedule(64, 100, 1.5, cooldown_steps=10, train_steps=50)
    again = NoamSchedule.from_config(schedule.get_config())
    assert float(again(45)) == pytest.approx(float(schedule(45)))
    assert float(again(45)) == pytest.approx(_equation_3(45, 64, 100, 1.5) * 0.5, rel=1e-5)
    old = NoamSchedule.from_config({"d_model": 64, "warmup_steps": 100, "multiplier": 1.5})
    assert float(old(45)) == pytest.approx(_equation_3(45, 64, 100, 1.5), rel=1e-5)


def test_cooldown_longer_than_training_is_refused():
    with pytest.raises(ValueError, match="cooldown_steps=10 needs train_steps >= it"):
        NoamSchedule(64, 100, cooldown_steps=10, train_steps=9)
    with pytest.raises(ValueError, match="Received: train_steps=None"):
        NoamSchedule(64, 100, cooldown_steps=10)


def test_trainer_runs_the_cooldown_to_its_train_steps(tiny_data, tmp_path):
    """The trainer gives the schedule --train_steps: the logged rate after each
    of 4 updates (the next update's) is equation 3 times (4 - step) / 4."""
    from tiny_runs import PROBLEM, TINY_HPARAMS
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    lines = []
    config = resolve_train_config(problem=PROBLEM, hparams_set="transformer_tiny",
                                  hparams=TINY_HPARAMS + ",learning_rate_warmup_steps=2,"
                                                         "learning_rate_cooldown_steps=4",
                                  data_dir=str(tiny_data), output_dir=str(tmp_path / "run"),
                                  train_steps=4, log_step_count_steps=1, eval_steps=1,
                                  local_eval_frequency=0, eval_decode_sentences=0, xla=False)
    # The rate logged is the optimizer's schedule at its step: the fake
    # update moves the step as a real one does.
    trainer = Trainer(config, log=lines.append, update_step=FakeUpdateStep)
    trainer.train()
    logged = {int(m[1]): float(m[2]) for m in
              (re.search(r"step (\d+)/4 .*lr (\S+)", line) for line in lines) if m}
    assert sorted(logged) == [1, 2, 3, 4]
    for step in (1, 2, 3):
        expected = _equation_3(step, d_model=16, warmup=2, multiplier=trainer.hparams.learning_rate)
        assert logged[step] == pytest.approx(expected * (4 - step) / 4, rel=6e-3)
    assert logged[4] == 0.0


def test_trainer_refuses_a_cooldown_longer_than_train_steps(tiny_data, tmp_path):
    from conftest import one_line_error, run_cli
    from tiny_runs import TINY_HPARAMS, trainer_args

    out = tmp_path / "run"
    args = [a if not a.startswith("--hparams=") else
            f"--hparams={TINY_HPARAMS},learning_rate_cooldown_steps=5"
            for a in trainer_args(tiny_data, out, 3)]
    result = run_cli("trainer", *args)
    one_line_error(result, "t2t-trainer", "hparam learning_rate_cooldown_steps=5 is more "
                                          "than --train_steps=3", "raise --train_steps")
    assert not out.exists() or not any(out.glob("ckpt-*"))


@pytest.mark.parametrize("cooldown, message", [
    (6, "The learning-rate cooldown (learning_rate_cooldown_steps=6) stopped 5 updates "
        "short of 0; a lower --train_steps ends it inside the budget."),
    (2, "The learning-rate cooldown (learning_rate_cooldown_steps=2, from step 4) did not "
        "start; a lower --train_steps fits it inside the budget."),
])
def test_a_time_budget_that_cuts_the_cooldown_says_so(tiny_data, tmp_path, cooldown, message):
    """--max_train_minutes stops the run at step 1 of 6 (0.6 s: a fake clock
    gives 10 s an update); the log says where that left the cooldown."""
    from tiny_runs import PROBLEM, TINY_HPARAMS
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    lines = []
    config = resolve_train_config(
        problem=PROBLEM, hparams_set="transformer_tiny",
        hparams=f"{TINY_HPARAMS},learning_rate_cooldown_steps={cooldown}",
        data_dir=str(tiny_data), output_dir=str(tmp_path / "run"), train_steps=6,
        max_train_minutes=0.01, log_step_count_steps=1, eval_steps=1, local_eval_frequency=0,
        eval_decode_sentences=0, xla=False)
    trainer = Trainer(config, log=lines.append, update_step=FakeUpdateStep,
                      clock=lambda: 10.0 * trainer.step)
    trainer.train()
    stop = lines.index("Stopping at step 1: the --max_train_minutes=0.01 budget is spent.")
    assert lines[stop + 1] == message


def test_the_cooldown_follows_its_end_step_variable():
    """With `end_step` (a variable the trainer moves, `CooldownFit`), the
    cooldown ends there: the same rates as a schedule built with that
    train_steps, before and after the variable moves."""
    import tensorflow as tf

    end = tf.Variable(9250, dtype=tf.int64)
    moving = NoamSchedule(128, 2000, 2.53, cooldown_steps=2000, train_steps=9250, end_step=end)
    fixed = NoamSchedule(128, 2000, 2.53, cooldown_steps=2000, train_steps=9250)
    for iteration in (0, 7000, 8250, 9249, 9250):
        assert float(moving(iteration)) == pytest.approx(float(fixed(iteration)), rel=1e-6)
    end.assign(6000)
    shorter = NoamSchedule(128, 2000, 2.53, cooldown_steps=2000, train_steps=6000)
    for iteration in (0, 3999, 4500, 5999, 6000, 8000):
        assert float(moving(iteration)) == pytest.approx(float(shorter(iteration)), rel=1e-6)
    assert float(moving(5000)) == pytest.approx(_equation_3(5000) * 0.5, rel=1e-5)
    assert moving.get_config() == fixed.get_config()   # the variable is not config


def test_cooldown_fit_estimates_where_the_budget_runs_out():
    from t2t_revival.train.cooldown_fit import CooldownFit

    fit = CooldownFit(train_steps=1000, cooldown_steps=200, budget_seconds=100.0, log_every=10)
    assert fit.estimate(step=20, start_step=0, elapsed=5.0) == 1000   # before the warm-in
    # 5 updates a second: 100 + 5 * 80 = 500 by the end of the budget.
    assert fit.estimate(step=100, start_step=0, elapsed=20.0) == 500
    # From a resumed run's own start; rounded down to a progress line.
    assert fit.estimate(step=700, start_step=600, elapsed=40.0) == 850
    assert fit.estimate(step=100, start_step=0, elapsed=10.0) == 1000  # fast enough
    assert fit.estimate(step=95, start_step=0, elapsed=99.5) == 100    # the next progress line
    assert fit.estimate(step=100, start_step=0, elapsed=100.0) == 1000  # spent: the time limit's
    line = fit.move_to(500, step=100, start_step=0, elapsed=20.0)
    assert fit.end_step == 500
    assert line == ("At 300 updates a minute the --max_train_minutes=1.66667 budget ends near "
                    "step 500, before --train_steps=1000: the learning-rate cooldown "
                    "(learning_rate_cooldown_steps=200) now ends there, from step 300, and "
                    "training stops there.")
    assert fit.move_to(510, step=110, start_step=0, elapsed=22.0) is None  # < a tenth of 200
    assert fit.end_step == 510
    assert fit.move_to(1000, step=120, start_step=0, elapsed=23.0).endswith(
        "reaches --train_steps=1000: the learning-rate cooldown ends there again.")
    with pytest.raises(ValueError, match="needs a cooldown and a time budget"):
        CooldownFit(1000, 0, 100.0, 10)


def _trainer_with_a_one_minute_budget(tiny_data, tmp_path, lines):
    """A tiny run of 12 updates, the last 4 a cooldown, a 1-minute budget
    (tests give it a fake clock), logging every update into `lines`."""
    from tiny_runs import PROBLEM, TINY_HPARAMS
    from t2t_revival.settings.config_resolution import resolve_train_config
    from t2t_revival.train.trainer import Trainer

    config = resolve_train_config(problem=PROBLEM, hparams_set="transformer_tiny",
                                  hparams=TINY_HPARAMS + ",learning_rate_warmup_steps=2,"
                                                         "learning_rate_cooldown_steps=4",
                                  data_dir=str(tiny_data), output_dir=str(tmp_path / "run"),
                                  train_steps=12, max_train_minutes=1.0, log_step_count_steps=1,
                                  eval_steps=1, local_eval_frequency=0,
                                  eval_decode_sentences=0, xla=False)
    return Trainer(config, log=lines.append, update_step=FakeUpdateStep)


def test_trainer_ends_the_cooldown_where_the_time_budget_runs_out(tiny_data, tmp_path):
    """A run whose --train_steps the budget cannot reach (a fake clock: 10 s an
    update, 60 s of budget) moves the cooldown's end to step 6 and stops there,
    its learning rate falling to 0 at step 6 rather than being cut off."""
    lines = []
    trainer = _trainer_with_a_one_minute_budget(tiny_data, tmp_path, lines)
    trainer.clock = lambda: 10.0 * trainer.step
    result = trainer.train()
    assert result.step == 6 and result.checkpoint.endswith("ckpt-6")
    assert ("At 6 updates a minute the --max_train_minutes=1 budget ends near step 6, "
            "before --train_steps=12: the learning-rate cooldown "
            "(learning_rate_cooldown_steps=4) now ends there, from step 2, and training "
            "stops there.") in lines
    assert ("Stopped at step 6, where the learning-rate cooldown fitted to "
            "--max_train_minutes=1 ends (--train_steps=12 was out of its reach).") in lines
    logged = {int(m[1]): (int(m[2]), float(m[3])) for m in
              (re.search(r"step (\d+)/(\d+) .*lr (\S+)", line) for line in lines) if m}
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]
    assert logged[1][0] == 12 and logged[2][0] == 6   # the line after the estimate
    for step in (2, 3, 4, 5):
        expected = _equation_3(step, d_model=16, warmup=2, multiplier=trainer.hparams.learning_rate)
        assert logged[step][1] == pytest.approx(expected * min(1.0, (6 - step) / 4), rel=6e-3)
    assert logged[6][1] == 0.0
    assert not any("budget is spent" in line for line in lines)


def test_a_pace_that_falls_after_the_fit_is_told_from_the_fitted_end(tiny_data, tmp_path):
    """The fit moves the end to step 6 at 10 s an update; then updates take
    30 s, and the budget runs out at step 4: the cut is counted from the
    fitted end (2 updates short), not from --train_steps, and the log says
    the pace fell rather than to lower --train_steps."""
    lines = []
    trainer = _trainer_with_a_one_minute_budget(tiny_data, tmp_path, lines)
    trainer.clock = lambda: 10.0 * min(trainer.step, 3) + 30.0 * max(trainer.step - 3, 0)
    result = trainer.train()
    assert result.step == 4 and result.checkpoint.endswith("ckpt-4")
    stop = lines.index("Stopping at step 4: the --max_train_minutes=1 budget is spent.")
    assert lines[stop + 1] == (
        "The learning-rate cooldown (learning_rate_cooldown_steps=4) stopped 2 updates "
        "short of 0; the pace fell after the cooldown was fitted to the budget.")
