"""tensor2tensor's flags in our CLIs: each is accepted with the same meaning,
mapped to ours with one line saying so, or refused with one line saying why
and what to use instead; none is an "unknown flag".

tensor2tensor's `t2t-trainer` reads `utils/flags.py` and `bin/t2t_trainer.py`;
its `t2t-decoder` and `t2t-exporter` import `t2t_trainer`, so they accept all
of those too (most without effect), and add their own. `TENSOR2TENSOR_FLAGS`
is the one table of what each means here; `define(program)` defines the
ones a CLI of ours lacks (default None: "not given"), and `apply(program)`,
called first in the CLI's `main`, says what each given one became.

The trainer also calls `apply_trainer_schedule` (`--schedule`, the
`--eval_early_stopping_*` flags); the decoder and exporter `check_run_flags`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable

from absl import flags

from t2t_revival.errors import UserError

SAME, MAPPED, NO_EFFECT, REFUSED, CHECKED = "same", "mapped", "no effect", "refused", "checked"

# What tensor2tensor's programs read: (program, T2T source files).
TRAINER, DECODER, EXPORTER = "t2t-trainer", "t2t-decoder", "t2t-exporter"
DATAGEN, AVERAGER, BLEU = "t2t-datagen", "t2t-avg-checkpoints", "t2t-bleu"


@dataclasses.dataclass(frozen=True)
class T2TFlag:
    """One tensor2tensor flag as one of our programs takes it.

    outcome: SAME (ours has it, same meaning), MAPPED (to `ours`, with a
    line), NO_EFFECT (accepted, a line says why it changes nothing here),
    REFUSED (one line: `why`), CHECKED (the decoder's run flags, compared
    with the run's record).
    """
    name: str
    kind: str            # bool, integer, float, string: as T2T defines it
    outcome: str
    why: str = ""        # the line's reason (MAPPED: how it maps)
    ours: str = ""       # MAPPED: our flag's name
    convert: Callable | None = None   # MAPPED: T2T's value -> ours


_TPU = "TPUs are not supported here (TensorFlow 2's TPU support is not built in); " \
       "train on GPUs or CPUs, where t2t-trainer uses MirroredStrategy over every visible GPU"
_PS = "parameter servers are tensorflow 1's distribution; here several machines train " \
      "with MultiWorkerMirroredStrategy from the TF_CONFIG environment variable"
_CLOUD = "Google Cloud ML Engine's job submission is not part of this tool; run " \
         "t2t-trainer on the machine, or submit it as any container job"
_TF1 = "a tensorflow 1 session option with no counterpart in TensorFlow 2's eager runtime"


def _common() -> list[T2TFlag]:
    """utils/flags.py and bin/t2t_trainer.py: what t2t-trainer reads."""
    return [
        T2TFlag("registry_help", "bool", SAME),
        T2TFlag("tfdbg", "bool", REFUSED, "tfdbg is tensorflow 1's session debugger; use "
                "tf.debugging.enable_check_numerics or TensorBoard's Debugger V2"),
        T2TFlag("export_saved_model", "bool", SAME),
        T2TFlag("dbgprofile", "bool", REFUSED, "tensorflow 1's profiler hooks are gone; "
                "profile a step with python -m benchmarks.train_step --profile_steps=3"),
        T2TFlag("model", "string", SAME),
        T2TFlag("hparams_set", "string", SAME),
        T2TFlag("hparams_range", "string", REFUSED, "hparam ranges fed Cloud ML's tuner; "
                "run one t2t-trainer per setting with --hparams"),
        T2TFlag("hparams", "string", SAME),
        T2TFlag("problem", "string", SAME),
        T2TFlag("data_dir", "string", SAME),
        T2TFlag("train_steps", "integer", SAME),
        T2TFlag("eval_early_stopping_metric", "string", CHECKED),
        T2TFlag("eval_early_stopping_metric_delta", "float", CHECKED),
        # The trainer maps it: patience counts evaluations here, steps /
        # --local_eval_frequency (with _metric, _metric_delta, _metric_minimize).
        T2TFlag("eval_early_stopping_steps", "integer", CHECKED),
        T2TFlag("eval_early_stopping_metric_minimize", "bool", CHECKED),
        T2TFlag("eval_timeout_mins", "integer", NO_EFFECT,
                "evaluation runs inside training here, not in a separate process that waits"),
        T2TFlag("eval_run_autoregressive", "bool", NO_EFFECT,
                "dev evaluation here always decodes autoregressively (dev BLEU) besides "
                "the teacher-forced loss; --eval_decode_sentences sets how many"),
        T2TFlag("eval_use_test_set", "bool", REFUSED,
                "the dev set is the evaluation set here; decode the test set with t2t-decoder"),
        T2TFlag("keep_checkpoint_max", "integer", SAME),
        T2TFlag("enable_graph_rewriter", "bool", NO_EFFECT, _TF1),
        T2TFlag("keep_checkpoint_every_n_hours", "integer", NO_EFFECT,
                "checkpoints are kept by count (--keep_checkpoint_max) and the best in "
                "best/; copy a checkpoint elsewhere to keep it"),
        T2TFlag("save_checkpoints_secs", "integer", REFUSED,
                "checkpoints are saved by update count here; use --save_checkpoints_steps "
                "(a stop signal or --max_train_minutes also saves)"),
        T2TFlag("log_device_placement", "bool", NO_EFFECT,
                "call tf.debugging.set_log_device_placement(True) in a --t2t_usr_dir module"),
        T2TFlag("warm_start_from", "string", SAME),
        T2TFlag("local_eval_frequency", "integer", SAME),
        T2TFlag("eval_throttle_seconds", "integer", NO_EFFECT,
                "evaluation runs every --local_eval_frequency updates inside training"),
        T2TFlag("sync", "bool", REFUSED, _PS),
        T2TFlag("worker_job", "string", REFUSED, _PS),
        T2TFlag("worker_gpu", "integer", SAME),
        T2TFlag("worker_replicas", "integer", REFUSED, _PS),
        T2TFlag("worker_id", "integer", REFUSED, _PS),
        T2TFlag("worker_gpu_memory_fraction", "float", NO_EFFECT,
                "TensorFlow 2 grows GPU memory as needed here"),
        T2TFlag("ps_gpu", "integer", REFUSED, _PS),
        T2TFlag("gpu_order", "string", REFUSED,
                "use CUDA_VISIBLE_DEVICES to choose and order the GPUs"),
        T2TFlag("ps_job", "string", REFUSED, _PS),
        T2TFlag("ps_replicas", "integer", REFUSED, _PS),
        T2TFlag("decode_hparams", "string", NO_EFFECT,
                "the trainer's dev decoding takes --eval_decode_hparams"),
        T2TFlag("decode_from_file", "string", NO_EFFECT, "decode with t2t-decoder"),
        T2TFlag("decode_to_file", "string", NO_EFFECT, "decode with t2t-decoder"),
        T2TFlag("decode_reference", "string", NO_EFFECT, "decode with t2t-decoder"),
        T2TFlag("t2t_usr_dir", "string", SAME),
        T2TFlag("random_seed", "integer", MAPPED, "the same seed", ours="seed"),
        T2TFlag("tpu_num_shards", "integer", REFUSED, _TPU),
        T2TFlag("tpu_job_name", "string", REFUSED, _TPU),
        T2TFlag("iterations_per_loop", "integer", MAPPED,
                "updates per call of the compiled step, on any device",
                ours="steps_per_execution"),
        T2TFlag("use_tpu", "bool", REFUSED, _TPU),
        T2TFlag("use_tpu_estimator", "bool", REFUSED, _TPU),
        T2TFlag("export_saved_model_api_version", "integer", NO_EFFECT,
                "there is one SavedModel format here: text in, text out"),
        T2TFlag("use_guarantee_const_getter", "bool", REFUSED, _TPU),
        T2TFlag("xla_compile", "bool", MAPPED, "XLA on the per-replica step", ours="xla"),
        T2TFlag("xla_jit_level", "integer", NO_EFFECT,
                "the step is compiled whole with jit_compile (--xla); TF_XLA_FLAGS still "
                "reaches XLA"),
        T2TFlag("tpu_infeed_sleep_secs", "integer", REFUSED, _TPU),
        T2TFlag("generate_data", "bool", NO_EFFECT,
                "t2t-trainer here generates the data when --data_dir lacks it"),
        T2TFlag("tmp_dir", "string", SAME),
        T2TFlag("profile", "bool", REFUSED, "tensorflow 1's ProfilerHook is gone; profile a "
                "step with python -m benchmarks.train_step --profile_steps=3"),
        T2TFlag("inter_op_parallelism_threads", "integer", NO_EFFECT,
                "set TF_NUM_INTEROP_THREADS in the environment"),
        T2TFlag("intra_op_parallelism_threads", "integer", NO_EFFECT,
                "set TF_NUM_INTRAOP_THREADS in the environment"),
        T2TFlag("optionally_use_dist_strat", "bool", NO_EFFECT,
                "tf.distribute is always used here (MirroredStrategy, or MultiWorker "
                "from TF_CONFIG)"),
        T2TFlag("master", "string", REFUSED, _PS),
        T2TFlag("output_dir", "string", SAME),
        T2TFlag("schedule", "string", CHECKED),
        T2TFlag("eval_steps", "integer", SAME),
        T2TFlag("std_server_protocol", "string", REFUSED, _PS),
        T2TFlag("cloud_tpu_name", "string", REFUSED, _TPU),
        T2TFlag("cloud_mlengine", "bool", REFUSED, _CLOUD),
        T2TFlag("cloud_mlengine_master_type", "string", REFUSED, _CLOUD),
        T2TFlag("autotune_objective", "string", REFUSED, _CLOUD),
        T2TFlag("autotune_maximize", "bool", REFUSED, _CLOUD),
        T2TFlag("autotune_max_trials", "integer", REFUSED, _CLOUD),
        T2TFlag("autotune_parallel_trials", "integer", REFUSED, _CLOUD),
        T2TFlag("job-dir", "string", REFUSED, _CLOUD),
        T2TFlag("log_step_count_steps", "integer", SAME),
        T2TFlag("gpu_automatic_mixed_precision", "bool", MAPPED,
                "Keras mixed precision (float16 on a GPU)", ours="mixed_precision",
                convert=lambda on: "mixed_float16" if on else "float32"),
    ]


# tensor2tensor's other programs (its bin/), which are not shipped here, and
# what to run instead; `--registry_help`'s neighbours in docs/tensor2tensor.md.
NOT_SHIPPED = {
    "t2t-avg-all": "t2t-avg-checkpoints --output_dir=RUN --num_last_checkpoints=N averages "
                   "a run's last N checkpoints into RUN/averaged/; run it again when new "
                   "ones appear",
    "t2t-translate-all": "t2t-decoder --checkpoint_path=<each checkpoint> "
                         "--decode_to_file=DIR/<name>-<step>, then t2t-bleu "
                         "--translations_dir=DIR --event_dir=... scores them all",
    "t2t-eval": "t2t-trainer evaluates the dev split every --local_eval_frequency "
                "updates; t2t-decoder --decode_reference scores a checkpoint on a file",
    "t2t-attack": "adversarial attacks on image classifiers are not part of this "
                  "translation tool",
    "t2t-distill": "decode the training source with the teacher (t2t-decoder), then train "
                   "the student on those pairs as your own data (translate_plain_text)",
    "t2t-prune": "weight pruning is not supported here; t2t-exporter --format=ctranslate2 "
                 "with int8 quantization makes a smaller, faster model",
    "build_vocab": "t2t-datagen trains the problem's vocabulary (SentencePiece); your own "
                   "data's corpora.json sets its size",
    "make_tf_configs": "write TF_CONFIG for each worker yourself: t2t-trainer reads it for "
                       "MultiWorkerMirroredStrategy (docs/training.md)",
}

# The schedules tensor2tensor's trainer knew, and what runs here.
SCHEDULES = {"continuous_train_and_eval": SAME, "train_and_evaluate": SAME, "train": SAME}


def table() -> dict[str, dict[str, T2TFlag]]:
    """Each program's tensor2tensor flags, by name."""
    common = _common()
    decoder_only = [
        T2TFlag("checkpoint_path", "string", SAME),
        T2TFlag("keep_timestamp", "bool", NO_EFFECT,
                "the decodes file's time is when it was written (touch -r to copy one)"),
        T2TFlag("decode_interactive", "bool", SAME),
        T2TFlag("decode_shards", "integer", NO_EFFECT,
                "one decoder process uses every core and every visible GPU here (one "
                "model copy each, --worker_gpu); for several machines split the input file"),
        T2TFlag("score_file", "string", SAME),
        T2TFlag("decode_in_memory", "bool", NO_EFFECT, "the decoder always reads the file "
                "into memory here"),
        T2TFlag("disable_grappler_optimizations", "bool", NO_EFFECT, _TF1),
    ]
    exporter_only = [
        T2TFlag("export_as_tfhub", "bool", REFUSED,
                "TF Hub modules are tensorflow 1's format; the SavedModel here loads "
                "with tf.saved_model.load and hub.KerasLayer alike"),
        T2TFlag("export_dir", "string", SAME),
        T2TFlag("checkpoint_path", "string", SAME),
        T2TFlag("as_text", "bool", NO_EFFECT, "the SavedModel is written as a binary "
                "saved_model.pb; saved_model_cli show --all prints it as text"),
    ]
    datagen = [
        T2TFlag("data_dir", "string", SAME), T2TFlag("tmp_dir", "string", SAME),
        T2TFlag("problem", "string", SAME), T2TFlag("t2t_usr_dir", "string", SAME),
        T2TFlag("exclude_problems", "string", REFUSED,
                "t2t-datagen here generates the one --problem given"),
        T2TFlag("num_shards", "integer", NO_EFFECT, "the problem sets its shard count"),
        T2TFlag("max_cases", "integer", REFUSED,
                "cut the corpus files instead (head -n N), or train on own corpora"),
        T2TFlag("env_problem_max_env_steps", "integer", REFUSED, "no RL problems here"),
        T2TFlag("env_problem_batch_size", "integer", REFUSED, "no RL problems here"),
        T2TFlag("only_list", "bool", REFUSED,
                "t2t-trainer --registry_help lists the problems (and models and hparam sets)"),
        T2TFlag("random_seed", "integer", NO_EFFECT,
                "the problems shuffle with their own fixed seeds, so datagen is reproducible"),
        T2TFlag("task_id", "integer", NO_EFFECT, "datagen runs --num_workers processes itself"),
        T2TFlag("task_id_start", "integer", NO_EFFECT,
                "datagen runs --num_workers processes itself"),
        T2TFlag("task_id_end", "integer", NO_EFFECT,
                "datagen runs --num_workers processes itself"),
        T2TFlag("num_concurrent_processes", "integer", MAPPED, "the datagen processes",
                ours="num_workers"),
    ]
    averager = [
        T2TFlag("checkpoints", "string", REFUSED,
                "give --output_dir and --num_last_checkpoints (the checkpoints are the run's)"),
        T2TFlag("num_last_checkpoints", "integer", SAME),
        T2TFlag("prefix", "string", MAPPED, "the run directory", ours="output_dir",
                convert=lambda prefix: prefix.rstrip("/").rsplit("/model.ckpt", 1)[0]),
        T2TFlag("output_path", "string", REFUSED, "the average is written to "
                "<output_dir>/averaged/ckpt-<step>, where t2t-decoder --checkpoint_path "
                "takes it"),
    ]
    bleu = [T2TFlag(name, kind, SAME) for name, kind in (
        ("reference", "string"), ("translation", "string"), ("translations_dir", "string"),
        ("event_dir", "string"), ("bleu_variant", "string"), ("tag_suffix", "string"),
        ("min_steps", "integer"), ("wait_minutes", "integer"), ("report_zero", "bool"))]
    bleu.append(T2TFlag("source", "string", NO_EFFECT,
                        "BLEU needs only the translation and the reference (tensor2tensor's "
                        "t2t-bleu did not read it either)"))
    decoder_keeps = ("output_dir", "t2t_usr_dir", "decode_hparams", "decode_from_file",
                     "decode_to_file", "decode_reference", "worker_gpu")
    by_program = {TRAINER: common,
                  DECODER: _run_reader(common, decoder_keeps) + decoder_only,
                  EXPORTER: _run_reader(common, ("output_dir", "t2t_usr_dir", "decode_hparams"))
                  + exporter_only,
                  DATAGEN: datagen, AVERAGER: averager, BLEU: bleu}
    return {program: {f.name: f for f in entries} for program, entries in by_program.items()}


def _run_reader(common: list[T2TFlag], keeps: tuple[str, ...]) -> list[T2TFlag]:
    """The trainer's flags as tensor2tensor's decoder and exporter took them:
    the run's names checked against run.json, `keeps` as ours, the other
    training flags without effect (as they were there), refusals kept."""
    out = []
    for flag in common:
        if flag.name in RUN_FLAGS:
            flag = dataclasses.replace(flag, outcome=CHECKED,
                                       why="compared with the run's run.json")
        elif flag.name in keeps:
            flag = dataclasses.replace(flag, outcome=SAME, why="")
        elif flag.outcome != REFUSED:
            flag = dataclasses.replace(
                flag, outcome=NO_EFFECT, ours="", convert=None,
                why="a training flag, which changes nothing here (tensor2tensor's decoder "
                    "and exporter took the trainer's flags too)")
        out.append(flag)
    return out


# The `--helpfull` section of tensor2tensor's flags that ours lack: `--help`
# lists a CLI's own flags alone, and says where these are.
HELP_SECTION = "tensor2tensor's flags, taken for its users' scripts (docs/tensor2tensor.md)"


def define(program: str, module_name: str, values: flags.FlagValues = flags.FLAGS) -> None:
    """Define each tensor2tensor flag of `program` that ours lacks, default
    None, in `HELP_SECTION` (`module_name`, the CLI's module, keeps its own
    flags alone in `--help`)."""
    del module_name   # kept for the CLIs' calls: the section is one for all
    for flag in table()[program].values():
        if flag.name in values:
            continue
        define_kind = {"bool": flags.DEFINE_bool, "integer": flags.DEFINE_integer,
                       "float": flags.DEFINE_float, "string": flags.DEFINE_string}[flag.kind]
        define_kind(flag.name, None, f"tensor2tensor's flag: {flag.outcome} here. {flag.why}",
                    flag_values=values, module_name=HELP_SECTION)


def take(program: str, values: flags.FlagValues = flags.FLAGS) -> None:
    """`apply`, its lines on stderr: first in each CLI's `main`."""
    for line in apply(program, values):
        print(line, file=sys.stderr, flush=True)


def given(values: flags.FlagValues) -> list[str]:
    """Names of the flags given on the command line."""
    return [name for name in values if values[name].present]


def apply(program: str, values: flags.FlagValues = flags.FLAGS) -> list[str]:
    """Say what each given tensor2tensor flag became here: a UserError for a
    refused one; for a mapped one, set ours and return the line that says so."""
    lines = []
    entries = table()[program]
    for name in given(values):
        flag = entries.get(name)
        if flag is None or flag.outcome in (SAME, CHECKED):
            continue
        value = values[name].value
        if flag.outcome == REFUSED:
            raise UserError(f"--{name} is tensor2tensor's flag and is not taken here: "
                            f"{flag.why}. Received: {name}={value!r}")
        if flag.outcome == NO_EFFECT:
            lines.append(f"--{name} (tensor2tensor's) has no effect here: {flag.why}.")
            continue
        ours = flag.convert(value) if flag.convert else value
        if values[flag.ours].present and values[flag.ours].value != ours:
            raise UserError(f"--{name} (tensor2tensor's) is --{flag.ours} here, and both "
                            f"were given with different values; give one. Received: "
                            f"{name}={value!r}, {flag.ours}={values[flag.ours].value!r}")
        _assign(values, flag.ours, ours, f"--{name}={value}")
        lines.append(f"--{name} (tensor2tensor's) is --{flag.ours} here ({flag.why}): "
                     f"--{flag.ours}={ours}.")
    return lines


def _assign(values: flags.FlagValues, ours: str, value, given: str) -> None:
    """Set our flag `ours` to `value`, what tensor2tensor's `given`
    ("--name=value") became, through our flag's own validators (its bounds,
    its NaN check): a value ours refuses is a UserError naming `given`."""
    try:
        setattr(values, ours, value)
    except flags.IllegalFlagValueError as e:
        why = str(e).split(": ", 1)[-1]
        raise UserError(f"{given} (tensor2tensor's) is --{ours}={value} here, which is "
                        f"refused: {why}. Received: {given[2:]}") from None


# tensor2tensor's early-stopping metric names for the figures that rank best/ here.
_STOPPING_METRICS = {"loss": "loss", "approx_bleu_score": "bleu", "bleu": "bleu"}


def apply_trainer_schedule(values: flags.FlagValues = flags.FLAGS) -> list[str]:
    """tensor2tensor's `--schedule` and `--eval_early_stopping_*` flags as
    t2t-trainer's own: lines saying what they became; a UserError for what
    cannot apply."""
    lines = []
    if values["schedule"].present:
        schedule = values["schedule"].value
        if schedule == "train":
            every = values["local_eval_frequency"]
            if every.present and every.value:
                # Refused, not honoured: tensor2tensor's `train` schedule never
                # evaluated, so evaluating every N updates is what it is not.
                raise UserError(
                    "--schedule=train (tensor2tensor's) is --local_eval_frequency=0 here "
                    "(train, then evaluate once at the end), and --local_eval_frequency="
                    f"{every.value} asks for evaluations during training; give one of them. "
                    f"Received: schedule='train', local_eval_frequency={every.value}")
            values["local_eval_frequency"].value = 0
            lines.append("--schedule=train (tensor2tensor's) is --local_eval_frequency=0 here: "
                         "train, then evaluate once at the end.")
        elif schedule not in ("continuous_train_and_eval", "train_and_evaluate"):
            raise UserError(
                f"--schedule={schedule} (tensor2tensor's) is not taken here: t2t-trainer "
                "trains with evaluation every --local_eval_frequency updates "
                "(continuous_train_and_eval, the default); to evaluate or test a "
                "checkpoint, decode with t2t-decoder --decode_reference. "
                f"Received: schedule={schedule!r}")
    present = {name: values[name].value for name in
               ("eval_early_stopping_steps", "eval_early_stopping_metric",
                "eval_early_stopping_metric_delta", "eval_early_stopping_metric_minimize")
               if values[name].present}
    if not present:
        return lines
    if "eval_early_stopping_steps" not in present:
        raise UserError(f"--{next(iter(present))} (tensor2tensor's) needs "
                        "--eval_early_stopping_steps=N, the patience. "
                        f"Received: {present}")
    every = values["local_eval_frequency"].value
    if not every:
        raise UserError("--eval_early_stopping_steps counts evaluations here: set "
                        "--local_eval_frequency=N too. Received: local_eval_frequency=0")
    decoding = bool(values["eval_decode_sentences"].value)
    # What ranks best/: the dev loss, or the decoded metric (--eval_metric, else
    # the problem's: bleu).
    decoded = values["eval_metric"].value or "bleu"
    followed = decoded if decoding else "loss"
    metric = present.get("eval_early_stopping_metric", "loss")
    if _STOPPING_METRICS.get(metric, metric) != followed and \
            "eval_early_stopping_metric" in present:
        fix = ("--eval_decode_sentences=0, so that best/ and early stopping follow the dev "
               "loss" if metric == "loss" else
               "the dev loss (--eval_decode_sentences=0) or the decoded metric "
               f"({'approx_bleu_score' if decoded == 'bleu' else decoded})")
        raise UserError(f"--eval_early_stopping_metric={metric} (tensor2tensor's): early "
                        f"stopping here follows the figure best/ keeps, dev {followed}; use "
                        f"{fix}. Received: eval_early_stopping_metric={metric!r}")
    minimize = present.get("eval_early_stopping_metric_minimize")
    if minimize is not None and minimize != (followed == "loss"):
        raise UserError(f"--eval_early_stopping_metric_minimize={minimize} (tensor2tensor's) "
                        f"disagrees with dev {followed}, which is "
                        f"{'minimized' if followed == 'loss' else 'maximized'}. "
                        f"Received: eval_early_stopping_metric_minimize={minimize}")
    steps = present["eval_early_stopping_steps"]
    if steps < 0:
        raise UserError("--eval_early_stopping_steps (tensor2tensor's) is the patience, in "
                        "updates: 0 or more. Received: eval_early_stopping_steps="
                        f"{steps}")
    evals = max(1, -(-steps // every))
    delta = present.get("eval_early_stopping_metric_delta", 0.1)   # tensor2tensor's default
    _assign(values, "eval_early_stopping_evals", evals, f"--eval_early_stopping_steps={steps}")
    _assign(values, "eval_early_stopping_delta", delta,
            f"--eval_early_stopping_metric_delta={delta}")
    lines.append(f"--eval_early_stopping_steps={steps} (tensor2tensor's) is "
                 f"--eval_early_stopping_evals={evals} here (evaluations every "
                 f"--local_eval_frequency={every} updates), following dev {followed} with "
                 f"--eval_early_stopping_delta={delta:g}.")
    return lines


def check_run_flags(output_dir: str, values: flags.FlagValues = flags.FLAGS) -> None:
    """The decoder's and exporter's tensor2tensor run flags (--problem, --model,
    --hparams_set, --hparams, --data_dir) against the run's run.json: a
    UserError naming the first that disagrees; agreeing ones change nothing."""
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    names = [n for n in RUN_FLAGS if n in values and values[n].present]
    directory = TrainingDirectory(output_dir)
    if not names or not os.path.isfile(directory.run_file):
        return   # (a directory without run.json is the decoder's own error)
    record = directory.read_run_record()
    for name in names:
        given_value = values[name].value
        if name == "hparams":
            agrees = _same_hparams(values, record, output_dir)
        elif name == "data_dir":
            agrees = not record.data_dir or \
                os.path.realpath(given_value) == os.path.realpath(record.data_dir)
        else:   # (an imported run's also the flags of tensor2tensor's flags.txt)
            agrees = record.agrees(name, given_value)
        if not agrees:
            t2t = f"; tensor2tensor's flags.txt: {name}={record.imported_flags[name]!r}" \
                if name in record.imported_flags else ""
            raise UserError(
                f"--{name}={given_value} disagrees with the run in {output_dir}, which "
                f"was trained with {name}={getattr(record, name)!r} (its run.json{t2t}); the "
                f"decoder reads the run's own settings, so leave --{name} out or give the "
                f"run's. Received: {name}={given_value!r}")


RUN_FLAGS = ("problem", "model", "hparams_set", "hparams", "data_dir")


def _same_hparams(values: flags.FlagValues, record, output_dir: str) -> bool:
    """Whether --hparams (on --hparams_set or the run's set) resolves to what
    the run's set and overrides resolve to. A run without a set (imported by
    t2t-import, or fine-tuned from its hparams.json) is its hparams.json; an
    imported run also agrees with the --hparams_set and --hparams of the
    tensor2tensor run's flags.txt."""
    from t2t_revival.settings.hparams import resolve
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    imported = record.imported_flags
    set_given = values["hparams_set"].present and \
        values["hparams_set"].value != imported.get("hparams_set")
    if imported and not set_given and values["hparams"].value == imported.get("hparams", ""):
        return True   # tensor2tensor's own flags for the run it trained
    own = None if record.hparams_set else TrainingDirectory(output_dir).read_hparams()
    hparams_set = values["hparams_set"].value if set_given else record.hparams_set
    return resolve(hparams_set, values["hparams"].value,
                   base=None if set_given else own) == \
        (own if own is not None else resolve(record.hparams_set, record.hparams))
