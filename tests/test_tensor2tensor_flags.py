"""tensor2tensor's flags in our CLIs (issue 57, item 1): every flag its
t2t-trainer, t2t-decoder, t2t-exporter, t2t-datagen and t2t-avg-checkpoints
read is listed here, from its sources (tensor2tensor 1.15.7), with what it
does here; none is an unknown flag."""

from __future__ import annotations

import json
import math

import pytest
from absl import flags

from conftest import one_line_error, run_cli
from t2t_revival.cli import tensor2tensor_flags as t2t
from t2t_revival.errors import UserError
from t2t_revival.run_dir.best_record import BestRecord
from t2t_revival.train.early_stopping import EarlyStopping
from t2t_reference import t2t_file, t2t_flag_names

# The flags of tensor2tensor 1.15.7's sources, in their order.
UTILS_FLAGS_PY = [
    "registry_help", "tfdbg", "export_saved_model", "dbgprofile", "model", "hparams_set",
    "hparams_range", "hparams", "problem", "data_dir", "train_steps",
    "eval_early_stopping_metric", "eval_early_stopping_metric_delta",
    "eval_early_stopping_steps", "eval_early_stopping_metric_minimize", "eval_timeout_mins",
    "eval_run_autoregressive", "eval_use_test_set", "keep_checkpoint_max",
    "enable_graph_rewriter", "keep_checkpoint_every_n_hours", "save_checkpoints_secs",
    "log_device_placement", "warm_start_from", "local_eval_frequency", "eval_throttle_seconds",
    "sync", "worker_job", "worker_gpu", "worker_replicas", "worker_id",
    "worker_gpu_memory_fraction", "ps_gpu", "gpu_order", "ps_job", "ps_replicas",
    "decode_hparams", "decode_from_file", "decode_to_file", "decode_reference"]
BIN_T2T_TRAINER_PY = [
    "t2t_usr_dir", "random_seed", "tpu_num_shards", "tpu_job_name", "iterations_per_loop",
    "use_tpu", "use_tpu_estimator", "export_saved_model_api_version",
    "use_guarantee_const_getter", "xla_compile", "xla_jit_level", "tpu_infeed_sleep_secs",
    "generate_data", "tmp_dir", "profile", "inter_op_parallelism_threads",
    "intra_op_parallelism_threads", "optionally_use_dist_strat", "master", "output_dir",
    "schedule", "eval_steps", "std_server_protocol", "cloud_tpu_name", "cloud_mlengine",
    "cloud_mlengine_master_type", "autotune_objective", "autotune_maximize",
    "autotune_max_trials", "autotune_parallel_trials", "job-dir", "log_step_count_steps",
    "gpu_automatic_mixed_precision"]
BIN_T2T_DECODER_PY = ["checkpoint_path", "keep_timestamp", "decode_interactive",
                      "decode_shards", "score_file", "decode_in_memory",
                      "disable_grappler_optimizations"]
SERVING_EXPORT_PY = ["export_as_tfhub", "export_dir", "checkpoint_path", "as_text"]
BIN_T2T_DATAGEN_PY = [
    "data_dir", "tmp_dir", "problem", "exclude_problems", "num_shards", "max_cases",
    "env_problem_max_env_steps", "env_problem_batch_size", "only_list", "random_seed",
    "task_id", "task_id_start", "task_id_end", "num_concurrent_processes", "t2t_usr_dir"]
UTILS_AVG_CHECKPOINTS_PY = ["checkpoints", "num_last_checkpoints", "prefix", "output_path"]
BIN_T2T_BLEU_PY = ["source", "reference", "translation", "translations_dir", "event_dir",
                   "bleu_variant", "tag_suffix", "min_steps", "wait_minutes", "report_zero"]

# What each program of tensor2tensor read (the decoder and exporter import
# bin/t2t_trainer.py, so they took the trainer's flags too), and our module.
PROGRAMS = {
    t2t.TRAINER: ("trainer", UTILS_FLAGS_PY + BIN_T2T_TRAINER_PY),
    t2t.DECODER: ("decoder", UTILS_FLAGS_PY + BIN_T2T_TRAINER_PY + BIN_T2T_DECODER_PY),
    t2t.EXPORTER: ("exporter", UTILS_FLAGS_PY + BIN_T2T_TRAINER_PY + SERVING_EXPORT_PY),
    t2t.DATAGEN: ("datagen", BIN_T2T_DATAGEN_PY),
    t2t.AVERAGER: ("avg_checkpoints", UTILS_AVG_CHECKPOINTS_PY),
    t2t.BLEU: ("bleu", BIN_T2T_BLEU_PY),
}
_VALUES = {"bool": "true", "integer": "3", "float": "0.5", "string": "x"}
_VALUE_OF = {"bleu_variant": "cased"}   # (an enum)


# tensor2tensor's bin/ programs and library files whose flags each list holds.
SOURCES = {"utils/flags.py": UTILS_FLAGS_PY, "bin/t2t_trainer.py": BIN_T2T_TRAINER_PY,
           "bin/t2t_decoder.py": BIN_T2T_DECODER_PY, "serving/export.py": SERVING_EXPORT_PY,
           "bin/t2t_datagen.py": BIN_T2T_DATAGEN_PY,
           "utils/avg_checkpoints.py": UTILS_AVG_CHECKPOINTS_PY,
           "bin/t2t_bleu.py": BIN_T2T_BLEU_PY}
# Its bin/ programs not shipped here (t2t.NOT_SHIPPED says what to run instead).
BIN_NOT_SHIPPED = {"bin/t2t_avg_all.py": "t2t-avg-all",
                   "bin/t2t_translate_all.py": "t2t-translate-all", "bin/t2t_eval.py": "t2t-eval",
                   "bin/t2t_attack.py": "t2t-attack", "bin/t2t_distill.py": "t2t-distill",
                   "bin/t2t_prune.py": "t2t-prune", "bin/build_vocab.py": "build_vocab",
                   "bin/make_tf_configs.py": "make_tf_configs"}


def test_the_lists_hold_every_flag_of_tensor2tensors_sources():
    """Each list above is what the tensor2tensor 1.15.7 package's file
    defines (its `flags.DEFINE_*` calls, read with ast), in order; every
    program of its bin/ is one of ours or a program not shipped, with what
    to run instead."""
    for relative, names in SOURCES.items():
        assert t2t_flag_names(relative) == names, relative
    programs = {p.name for p in t2t_file("bin/__init__.py").parent.glob("*.py")
                if p.name != "__init__.py" and not p.name.endswith("_test.py")}
    ours = {relative.split("/")[1] for relative in SOURCES if relative.startswith("bin/")}
    assert programs == ours | {r.split("/")[1] for r in BIN_NOT_SHIPPED}
    assert set(t2t.NOT_SHIPPED) == set(BIN_NOT_SHIPPED.values())
    for program, instead in t2t.NOT_SHIPPED.items():
        assert instead.split()[0] in ("t2t-avg-checkpoints", "t2t-decoder", "t2t-trainer",
                                      "adversarial", "decode", "weight", "t2t-datagen",
                                      "write"), program


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_tensor2tensor_flag_of_the_program_has_an_outcome(program):
    _, names = PROGRAMS[program]
    table = t2t.table()[program]
    assert set(table) == set(names)
    for flag in table.values():
        assert flag.outcome in (t2t.SAME, t2t.MAPPED, t2t.NO_EFFECT, t2t.REFUSED, t2t.CHECKED)
        if flag.outcome in (t2t.NO_EFFECT, t2t.REFUSED):
            assert flag.why, flag.name     # a reason, and what to use instead
        if flag.outcome == t2t.MAPPED:
            assert flag.ours and flag.why, flag.name


@pytest.mark.parametrize("program", PROGRAMS)
def test_no_tensor2tensor_flag_is_unknown_and_each_does_what_the_table_says(program):
    """Each flag, parsed by the program's own absl flags, then applied: a
    refused one is a UserError naming it, one without effect a line saying
    so, a mapped one sets ours and says so."""
    module, names = PROGRAMS[program]
    assert run_cli(module, "--helpshort").returncode == 0   # (imports the CLI's flags)
    table = t2t.table()[program]
    try:
        for name in names:
            flag = table[name]
            flags.FLAGS.unparse_flags()
            required = [] if program in (t2t.TRAINER, t2t.DATAGEN, t2t.BLEU) or name in (
                "output_dir", "prefix") else ["--output_dir=run"]
            value = _VALUE_OF.get(name, _VALUES[flag.kind])
            flags.FLAGS([program, f"--{name}={value}", *required])   # no flag is unknown
            if flag.outcome == t2t.REFUSED:
                with pytest.raises(UserError, match=f"--{name} is tensor2tensor's flag"):
                    t2t.apply(program)
            elif flag.outcome == t2t.NO_EFFECT:
                assert t2t.apply(program) == [
                    f"--{name} (tensor2tensor's) has no effect here: {flag.why}."]
            elif flag.outcome == t2t.MAPPED:
                (line,) = t2t.apply(program)
                assert line.startswith(f"--{name} (tensor2tensor's) is --{flag.ours} here")
                value = flags.FLAGS[name].value
                assert flags.FLAGS[flag.ours].value == (
                    flag.convert(value) if flag.convert else value)
            else:
                assert t2t.apply(program) == []
                if flag.outcome == t2t.SAME:   # ours, by the same name
                    assert not flags.FLAGS[name].help.startswith("tensor2tensor's flag:"), name
    finally:
        flags.FLAGS.unparse_flags()


def test_a_mapped_flag_and_ours_with_another_value_is_one_error():
    run_cli("trainer", "--helpshort")
    try:
        flags.FLAGS(["t2t-trainer", "--random_seed=5", "--seed=6"])
        with pytest.raises(UserError, match="--random_seed .* is --seed here, and both"):
            t2t.apply(t2t.TRAINER)
        flags.FLAGS.unparse_flags()
        flags.FLAGS(["t2t-trainer", "--random_seed=5", "--seed=5"])
        assert t2t.apply(t2t.TRAINER) == [
            "--random_seed (tensor2tensor's) is --seed here (the same seed): --seed=5."]
        assert flags.FLAGS.seed == 5
    finally:
        flags.FLAGS.unparse_flags()


def test_a_refused_flag_stops_the_trainer_with_one_line_before_any_work(tmp_path):
    out = run_cli("trainer", "--use_tpu", f"--output_dir={tmp_path / 'run'}")
    one_line_error(out, "t2t-trainer", "--use_tpu is tensor2tensor's flag",
                   "train on GPUs or CPUs")
    assert not (tmp_path / "run").exists()


def _trainer_flags(*args):
    run_cli("trainer", "--helpshort")
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["t2t-trainer", *args])
    return t2t.apply_trainer_schedule()


@pytest.mark.parametrize("args, evals, delta, follows", [
    (["--eval_early_stopping_steps=2500", "--local_eval_frequency=1000"], 3, 0.1, "bleu"),
    (["--eval_early_stopping_steps=1000", "--local_eval_frequency=1000",
      "--eval_early_stopping_metric=loss", "--eval_early_stopping_metric_delta=0.02",
      "--eval_decode_sentences=0"], 1, 0.02, "loss"),
    (["--eval_early_stopping_steps=500", "--local_eval_frequency=100",
      "--eval_early_stopping_metric=approx_bleu_score",
      "--noeval_early_stopping_metric_minimize"], 5, 0.1, "bleu"),
    (["--eval_early_stopping_steps=500", "--local_eval_frequency=100", "--eval_metric=chrf",
      "--eval_early_stopping_metric=chrf"], 5, 0.1, "chrf"),
])
def test_tensor2tensor_early_stopping_steps_become_evaluations(args, evals, delta, follows):
    try:
        (line,) = _trainer_flags(*args)
        assert flags.FLAGS.eval_early_stopping_evals == evals
        assert flags.FLAGS.eval_early_stopping_delta == delta
        assert f"is --eval_early_stopping_evals={evals} here" in line
        assert f"following dev {follows} with --eval_early_stopping_delta={delta:g}" in line
    finally:
        flags.FLAGS.unparse_flags()


@pytest.mark.parametrize("args, message", [
    (["--eval_early_stopping_steps=1000", "--eval_early_stopping_metric=loss"],
     "use --eval_decode_sentences=0, so that best/ and early stopping follow the dev loss"),
    (["--eval_early_stopping_steps=1000", "--eval_early_stopping_metric=accuracy"],
     "early stopping here follows the figure best/ keeps, dev bleu"),
    (["--eval_early_stopping_steps=1000", "--eval_decode_sentences=0",
      "--noeval_early_stopping_metric_minimize"], "disagrees with dev loss, which is minimized"),
    (["--eval_early_stopping_steps=1000", "--eval_metric=chrf",
      "--eval_early_stopping_metric=approx_bleu_score"],
     "early stopping here follows the figure best/ keeps, dev chrf; use the dev loss "
     "(--eval_decode_sentences=0) or the decoded metric (chrf)"),
    (["--eval_early_stopping_steps=1000", "--local_eval_frequency=0"],
     "set --local_eval_frequency=N too"),
    (["--eval_early_stopping_metric=loss"], "needs --eval_early_stopping_steps=N"),
    (["--schedule=continuous_eval"], "--schedule=continuous_eval (tensor2tensor's) is not "
                                     "taken here"),
])
def test_tensor2tensor_early_stopping_or_schedule_that_cannot_apply_is_refused(args, message):
    try:
        with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
            _trainer_flags("--local_eval_frequency=1000", *args)
    finally:
        flags.FLAGS.unparse_flags()


def test_schedule_train_is_training_with_one_evaluation_at_the_end():
    try:
        assert _trainer_flags("--schedule=train") == [
            "--schedule=train (tensor2tensor's) is --local_eval_frequency=0 here: train, "
            "then evaluate once at the end."]
        assert flags.FLAGS.local_eval_frequency == 0
        assert _trainer_flags("--schedule=continuous_train_and_eval") == []
    finally:
        flags.FLAGS.unparse_flags()


def _record(value, step):
    return BestRecord(step=step, metric="loss", value=value, higher_is_better=False,
                      checkpoint=f"ckpt-{step}", sentences=0)


def test_early_stopping_delta_counts_only_larger_improvements_but_best_takes_every_one():
    stopping = EarlyStopping(patience=2, min_delta=0.1)
    assert stopping.update(_record(3.0, 1))
    assert stopping.update(_record(2.95, 2))          # better: best/, but within the delta
    assert stopping.evals_without_improvement == 1 and stopping.best.step == 2
    assert stopping.update(_record(2.85, 3))          # 0.15 below 3.0: the patience resets
    assert stopping.evals_without_improvement == 0
    assert not stopping.update(_record(2.9, 4))
    assert stopping.update(_record(2.8, 5))           # best, but 0.05 below 2.85
    assert stopping.should_stop and stopping.best.step == 5
    assert "did not improve by more than 0.1 for 2 evaluations" in stopping.reason()
    plain = EarlyStopping(patience=1)
    assert plain.update(_record(math.nan, 1)) and plain.update(_record(3.0, 2))
    assert plain.evals_without_improvement == 0


def _run_dir(tmp_path, **record):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps(record))
    return out


def test_the_decoders_run_flags_that_agree_with_run_json_are_accepted(tmp_path):
    out = _run_dir(tmp_path, problem="translate_ende_multi30k", model="transformer",
                   hparams_set="transformer_tiny", hparams="num_heads=2",
                   data_dir=str(tmp_path))
    run_cli("decoder", "--helpshort")
    try:
        flags.FLAGS(["t2t-decoder", f"--output_dir={out}", "--problem=translate_ende_multi30k",
                     "--model=transformer", "--hparams_set=transformer_tiny",
                     "--hparams=num_heads=2", f"--data_dir={tmp_path}/."])
        assert t2t.apply(t2t.DECODER) == []
        t2t.check_run_flags(str(out))
    finally:
        flags.FLAGS.unparse_flags()


@pytest.mark.parametrize("flag, message", [
    ("--problem=translate_ende_wmt32k", "was trained with problem='translate_ende_multi30k'"),
    ("--hparams_set=transformer_base", "was trained with hparams_set='transformer_tiny'"),
    ("--hparams=num_heads=4", "was trained with hparams='num_heads=2'"),
    ("--model=lstm", "was trained with model='transformer'"),
])
def test_a_decoder_run_flag_that_disagrees_with_run_json_is_one_line(tmp_path, flag, message):
    out = _run_dir(tmp_path, problem="translate_ende_multi30k", model="transformer",
                   hparams_set="transformer_tiny", hparams="num_heads=2")
    result = run_cli("decoder", f"--output_dir={out}", flag, "--decode_from_file=x")
    one_line_error(result, "t2t-decoder", f"{flag} disagrees with the run in {out}", message)


@pytest.mark.parametrize("args, message", [
    (["--random_seed=-1"], "--random_seed=-1 (tensor2tensor's) is --seed=-1 here, which is "
                           "refused: -1 is not an integer in the range [0, 4294967295]"),
    (["--iterations_per_loop=-5"], "--iterations_per_loop=-5 (tensor2tensor's) is "
                                   "--steps_per_execution=-5 here, which is refused: -5 is "
                                   "not a positive integer"),
    (["--eval_early_stopping_steps=1000", "--eval_early_stopping_metric_delta=-0.5"],
     "--eval_early_stopping_metric_delta=-0.5 (tensor2tensor's) is "
     "--eval_early_stopping_delta=-0.5 here, which is refused: -0.5 is not a non-negative "
     "number"),
    (["--eval_early_stopping_steps=1000", "--eval_early_stopping_metric_delta=nan"],
     "--eval_early_stopping_delta=nan here, which is refused: must be a finite number (NaN "
     "and infinities are not)"),
    (["--eval_early_stopping_steps=-1000"],
     "--eval_early_stopping_steps (tensor2tensor's) is the patience, in updates: 0 or more"),
    (["--eval_early_stopping_delta=nan"],
     "flag --eval_early_stopping_delta=nan: must be a finite number (NaN and infinities are "
     "not)"),
    (["--max_train_minutes=inf"],
     "flag --max_train_minutes=inf: must be a finite number (NaN and infinities are not)"),
    (["--schedule=train", "--local_eval_frequency=500"],
     "--schedule=train (tensor2tensor's) is --local_eval_frequency=0 here (train, then "
     "evaluate once at the end), and --local_eval_frequency=500 asks for evaluations during "
     "training; give one of them"),
])
def test_mapped_tensor2tensor_flags_go_through_our_flags_validators(tmp_path, args, message):
    """Issue 77, part 5: a mapped flag's value is checked as ours would be (a
    numpy traceback for seed -1 before), NaN is no early-stopping delta (it
    stopped whatever the loss did), and --schedule=train does not drop an
    explicit --local_eval_frequency silently; each before any work."""
    out = run_cli("trainer", *args, "--local_eval_frequency=1000" if "--schedule=train"
                  not in args else "--train_steps=1", f"--output_dir={tmp_path / 'run'}")
    one_line_error(out, "t2t-trainer", message)
    assert not (tmp_path / "run").exists()


def test_schedule_train_with_local_eval_frequency_0_agrees():
    try:
        assert len(_trainer_flags("--schedule=train", "--local_eval_frequency=0")) == 1
        assert flags.FLAGS.local_eval_frequency == 0
    finally:
        flags.FLAGS.unparse_flags()
