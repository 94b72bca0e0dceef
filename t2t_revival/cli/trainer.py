"""`t2t-trainer`: train a registered model on a registered problem.

    t2t-trainer --problem=translate_ende_multi30k --hparams_set=transformer_tiny \\
        --data_dir=t2t_data --output_dir=t2t_train/tiny --train_steps=2000

Rerunning the same command resumes from the latest checkpoint in output_dir.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys

from absl import flags

from t2t_revival import registry
from t2t_revival.cli import entry_point, float_flags, path_flags, tensor2tensor_flags, tensorflow_noise
from t2t_revival.cli.next_commands import next_commands
from t2t_revival.errors import UserError
from t2t_revival.settings.train_config import TrainConfig

FLAGS = flags.FLAGS
PROG = "t2t-trainer"
# The run options' defaults have one owner, `TrainConfig`; the flags show them.
_DEFAULT = {field.name: field.default for field in dataclasses.fields(TrainConfig)}

path_flags.define_usr_dir_flag(__name__)
flags.DEFINE_bool("registry_help", False,
                  "Print every registered problem, model and hparam set, and the hparam "
                  "fields (their types, defaults and meaning), then exit.")
flags.DEFINE_string("problem", "translate_ende_multi30k", "Registered problem name.")
flags.DEFINE_string("model", _DEFAULT["model"], "Registered model name.")
flags.DEFINE_string("hparams_set", _DEFAULT["hparams_set"],
                    "Registered hparam set name. With --warm_start_from and no --hparams_set, "
                    "the hparams.json of the run warm-started from (e.g. a run t2t-import "
                    "wrote) instead.")
flags.DEFINE_string("hparams", "",
                    'Overrides of the hparam set, e.g. "num_hidden_layers=2,dropout=0.3,'
                    'bucket_boundaries=[8,16,32]". batch_size is tokens per replica.')
path_flags.define_path("data_dir", "t2t_data",
                       "TFRecords and vocabulary; t2t-datagen runs first when missing.")
path_flags.define_path("tmp_dir", "",
                       "Raw corpora for datagen (default: /tmp/t2t_datagen, as tensor2tensor).")
path_flags.define_path("output_dir", "t2t_train",
                       "Checkpoints, hparams.json, run.json, vocab.model, summaries.")
flags.DEFINE_integer("train_steps", _DEFAULT["train_steps"], "Optimizer updates to train to.",
                     lower_bound=1)
flags.DEFINE_float("max_train_minutes", _DEFAULT["max_train_minutes"],
                   "Stop at the first progress line (--log_step_count_steps) after this "
                   "many minutes of training, save and evaluate (0 = train to --train_steps). "
                   "With the hparam learning_rate_cooldown_steps, the cooldown is fitted "
                   "to the budget: if the pace so far will not reach --train_steps in "
                   "time, the cooldown ends, and training stops, where the budget runs "
                   "out (estimated at each progress line).",
                   lower_bound=0.0)
float_flags.require_finite("max_train_minutes")
flags.DEFINE_integer("eval_steps", _DEFAULT["eval_steps"],
                     "Dev batches per evaluation (0 = whole dev split).",
                     lower_bound=0)
flags.DEFINE_integer("local_eval_frequency", _DEFAULT["local_eval_frequency"],
                     "Evaluate on the dev split every N updates (0 = only at the end).",
                     lower_bound=0)
flags.DEFINE_integer("eval_decode_sentences", _DEFAULT["eval_decode_sentences"],
                     "At each evaluation, also decode the first N dev sentences with "
                     "t2t-decoder's beam search and settings and score them with the "
                     "problem's metric (BLEU; F1 for parsing; --eval_metric chooses another): "
                     "printed on the eval line, eval/bleu in TensorBoard, and what best/ and "
                     "early stopping follow (0 = no decoding: they follow the dev loss).",
                     lower_bound=0)
flags.DEFINE_string("eval_metric", _DEFAULT["eval_metric"],
                    "What the --eval_decode_sentences decodes are scored with, and so what "
                    "best/ and early stopping follow (higher is better): bleu (sacreBLEU, "
                    "cased, 13a) or chrf (sacreBLEU's chrF2, character n-grams) for "
                    "translation problems; '' = the problem's own (bleu; evalb, F1, for "
                    "parsing). Printed on the eval line, eval/<bleu|chrf> in TensorBoard, "
                    "the metric of best/best.json.")
flags.DEFINE_string("eval_decode_hparams", "",
                    'Overrides of the decode settings for those decodes, as t2t-decoder\'s '
                    '--decode_hparams (e.g. "beam_size=1" for speed).')
flags.DEFINE_integer("eval_early_stopping_evals", _DEFAULT["eval_early_stopping_evals"],
                     "Stop after N evaluations in a row without a better dev metric, then "
                     "save, evaluate and exit 0 (0 = never; needs --local_eval_frequency).",
                     lower_bound=0)
flags.DEFINE_float("eval_early_stopping_delta", _DEFAULT["eval_early_stopping_delta"],
                   "What counts as better for --eval_early_stopping_evals: more than this "
                   "(0 = any; best/ still takes every better figure).", lower_bound=0.0)
float_flags.require_finite("eval_early_stopping_delta")
flags.DEFINE_integer("save_checkpoints_steps", _DEFAULT["save_checkpoints_steps"],
                     "Checkpoint every N updates.",
                     lower_bound=0)
flags.DEFINE_integer("keep_checkpoint_max", _DEFAULT["keep_checkpoint_max"], "Checkpoints to keep.",
                     lower_bound=1)
flags.DEFINE_integer("log_step_count_steps", _DEFAULT["log_step_count_steps"],
                     "Progress line and TensorBoard summaries every N updates.", lower_bound=1)
flags.DEFINE_integer("steps_per_execution", _DEFAULT["steps_per_execution"],
                     "Run up to N updates per compiled call (Keras's steps_per_execution): "
                     "the host reads the loss and token count back once per call, not after "
                     "every update, so it does not stall the device; a call ends on each "
                     "progress, save, eval and final step, so those keep their frequencies. "
                     "A run-time setting: a resume may change it.", lower_bound=1)
flags.DEFINE_integer("seed", _DEFAULT["seed"], "Random seed (weights, dropout, data order).",
                     lower_bound=0, upper_bound=2**32 - 1)  # numpy's seed range
flags.DEFINE_bool("xla", _DEFAULT["xla"], "XLA-compile each replica's forward and backward pass.")
flags.DEFINE_enum("mixed_precision", "", ["", "float32", "mixed_bfloat16", "mixed_float16"],
                  "Overrides the hparam of the same name ('' keeps the set's value).")
flags.DEFINE_integer("worker_gpu", _DEFAULT["worker_gpu"],
                     "Use the first N visible GPUs (0 = all).",
                     lower_bound=0)
flags.DEFINE_integer("cpu_devices", _DEFAULT["cpu_devices"],
                     "Split the CPU into N logical devices and mirror over them "
                     "(tests the multi-replica path without GPUs).", lower_bound=0)
path_flags.define_path("warm_start_from", None,
                       "Fine-tuning: initialize the model weights from this checkpoint prefix, "
                       "or from the latest checkpoint of this training directory (same model "
                       "shape and vocabulary); the optimizer, the step and the learning-rate "
                       "schedule start fresh (shorter warmup: --hparams "
                       "learning_rate_warmup_steps=N). Only for a new output_dir; a resume "
                       "continues the run itself.")
flags.DEFINE_enum("warm_start_vocab", "same", ["same", "update", "update_random"],
                  "With --warm_start_from: 'same' requires the source run's vocabulary "
                  "(byte for byte); 'update' takes another one (your corpora.json's "
                  "\"vocab_size\" trains it on the new data, or \"vocab\" names it): the "
                  "embedding and softmax rows of the pieces both vocabularies have are "
                  "kept, a new piece starts as the mean of the rows of the pieces the old "
                  "vocabulary splits it into, and one line says how many rows were kept, "
                  "dropped and added (OpenNMT-tf's update_vocab); 'update_random' starts "
                  "the new rows as a run from scratch does (slower to learn: "
                  "benchmarks/RESULTS.md).")
flags.DEFINE_bool("skip_corrupt_records", _DEFAULT["skip_corrupt_records"],
                  "Read each data shard up to a truncated or corrupted record and skip the "
                  "rest of it, instead of stopping with an error naming the shard; the "
                  "records skipped are counted and the shards named at the start.")
flags.DEFINE_bool("export_saved_model", False,
                  "After training, export the best checkpoint (output_dir/best) as a TF "
                  "Serving SavedModel to output_dir/export/<step> (as t2t-exporter does, "
                  "with the decode settings of hparams.json).")
flags.DEFINE_bool("export_ctranslate2", False,
                  "After training, export the best checkpoint as a CTranslate2 model to "
                  "output_dir/export/ctranslate2/<step> (needs the ctranslate2 extra).")
flags.DEFINE_bool("export_on_best", False,
                  "With --export_saved_model / --export_ctranslate2: also export each new "
                  "best checkpoint as soon as it is found, as a new version (TF Serving "
                  "serves the highest).")


tensor2tensor_flags.define(PROG, __name__)

def _progress(line: str) -> None:
    """Print a line of the run's progress at once, even into a pipe (which
    Python otherwise fills 8 KiB at a time): `| tee train.log` shows each line
    as it comes, and a reader that went away (a dead tee, `| head`) is
    noticed at the next line, where the trainer saves and stops (`Trainer.log`)."""
    print(line, flush=True)


def _print_summary(config, result) -> None:
    """Where the result is and what to run next, after a run."""
    from t2t_revival.run_dir.file_names import BEST_DIR

    out = config.output_dir
    if result.stop_reason:
        print(f"Stopped early at step {result.step}: {result.stop_reason}.")
    if result.checkpoint:
        print(f"Done: step {result.step}, dev loss {result.evaluation.loss:.4f} "
              f"(perplexity {result.evaluation.perplexity:.2f}); the checkpoints are in {out}, "
              f"the latest {result.checkpoint}.")
    if result.best:
        print(f"The best: {result.best.describe()}, in {result.best_checkpoint} "
              f"(t2t-decoder/t2t-exporter --checkpoint_path={os.path.join(out, BEST_DIR)}).")
    print("Next, average the last 5 checkpoints, decode the test set with the average and "
          "score it, and export the same average for serving:")
    for command in next_commands(config.problem, out, config.data_dir, result.step):
        print(f"  {command}")


def main(argv: list[str]) -> int:
    tensor2tensor_flags.take(PROG)
    for line in tensor2tensor_flags.apply_trainer_schedule():
        print(line, file=sys.stderr, flush=True)
    if FLAGS.registry_help:
        path_flags.import_usr_dir()
        from t2t_revival.settings.hparams import fields_help
        from t2t_revival.settings.t2t_hparam_names import names_help

        print(registry.help_text())
        print(fields_help())
        print(names_help())
        return 0
    output_dir = path_flags.check_directory("output_dir", FLAGS.output_dir, writable=True)
    usr_dir = path_flags.import_usr_dir(output_dir)   # the flag, or the run's own when resuming
    data_dir = path_flags.check_directory("data_dir", FLAGS.data_dir)
    if FLAGS.eval_early_stopping_evals and not FLAGS.local_eval_frequency:
        raise UserError("--eval_early_stopping_evals counts evaluations: set "
                        "--local_eval_frequency=N too. Received: local_eval_frequency=0")
    if FLAGS.export_on_best and not (FLAGS.export_saved_model or FLAGS.export_ctranslate2):
        raise UserError("--export_on_best needs --export_saved_model or "
                        "--export_ctranslate2 (which format to export). "
                        "Received: export_on_best=True alone")
    if FLAGS.warm_start_vocab != "same" and not FLAGS.warm_start_from:
        raise UserError(f"--warm_start_vocab={FLAGS.warm_start_vocab} updates the vocabulary "
                        f"of the run --warm_start_from names: give that flag too. "
                        f"Received: warm_start_from=None")
    from t2t_revival.settings.config_resolution import resolve_train_config

    # The flags, resolved once into the typed config the trainer takes.
    config = resolve_train_config(
        problem=FLAGS.problem, model=FLAGS.model, hparams_set=FLAGS.hparams_set,
        # Fine-tuning without --hparams_set: the model of the run warm-started from.
        hparams_from=(FLAGS.warm_start_from or "") if not FLAGS["hparams_set"].present else "",
        hparams=FLAGS.hparams, mixed_precision=FLAGS.mixed_precision,
        eval_decode_hparams=FLAGS.eval_decode_hparams, data_dir=data_dir,
        tmp_dir=FLAGS.tmp_dir, output_dir=output_dir,
        train_steps=FLAGS.train_steps, max_train_minutes=FLAGS.max_train_minutes,
        eval_steps=FLAGS.eval_steps, local_eval_frequency=FLAGS.local_eval_frequency,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        eval_decode_sentences=FLAGS.eval_decode_sentences, eval_metric=FLAGS.eval_metric,
        eval_early_stopping_evals=FLAGS.eval_early_stopping_evals,
        eval_early_stopping_delta=FLAGS.eval_early_stopping_delta,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        log_step_count_steps=FLAGS.log_step_count_steps,
        steps_per_execution=FLAGS.steps_per_execution,
        seed=FLAGS.seed, xla=FLAGS.xla, cpu_devices=FLAGS.cpu_devices,
        worker_gpu=FLAGS.worker_gpu, usr_dir=usr_dir or "",
        warm_start_from=FLAGS.warm_start_from or "", warm_start_vocab=FLAGS.warm_start_vocab,
        skip_corrupt_records=FLAGS.skip_corrupt_records)
    from t2t_revival.process.phase_times import phase
    phase("checked")
    from t2t_revival.train.trainer import train
    phase("imported")

    formats = [name for name, on in (("saved_model", FLAGS.export_saved_model),
                                      ("ctranslate2", FLAGS.export_ctranslate2)) if on]

    exported: dict[str, str] = {}   # version folder -> the checkpoint this run exported there

    def export_new_best(checkpoint_path, record):
        _export(output_dir, checkpoint_path, formats, exported)

    result = train(config, log=_progress,
                   on_new_best=export_new_best if FLAGS.export_on_best else None)
    _print_summary(config, result)
    if formats and result.chief:
        from t2t_revival.run_dir.training_directory import TrainingDirectory

        directory = TrainingDirectory(output_dir)   # the best, else the latest
        checkpoint = directory.best.checkpoint_path() or directory.checkpoints.find()
        _export(output_dir, checkpoint, formats, exported, at_end=True)
    return 0


def _export(output_dir: str, checkpoint_path: str, formats: list[str],
            exported: dict[str, str], at_end: bool = False) -> list[str]:
    """Export `checkpoint_path` in each of `formats` as the version of its step
    (each version folder written atomically by the exporter); print where.

    `exported` maps each version folder this run wrote to its checkpoint (it
    is updated). At the end of the run (`at_end`) a version that exists is not
    exported again: this run's --export_on_best wrote it from the same
    checkpoint, or an earlier export did, which is kept and said so (it may be
    of another checkpoint with the same step, such as an average)."""
    from t2t_revival.export.export_format import DEFAULT_FORMAT, export_format
    from t2t_revival.export.version_directory import checkpoint_version

    version = checkpoint_version(checkpoint_path)
    paths = []
    for name in formats:
        chosen = export_format(name)
        what = chosen.what
        path = os.path.join(chosen.export_dir(output_dir), str(version))
        if at_end and exported.get(path) == checkpoint_path:
            print(f"The {what} of {checkpoint_path} is {path}, exported when it was "
                  f"found (--export_on_best).", flush=True)
        elif at_end and os.path.isdir(path):
            print(f"Kept the {what} {path}, exported before this run (t2t-exporter "
                  f"--output_dir={output_dir} --checkpoint_path={checkpoint_path}"
                  f"{'' if name == DEFAULT_FORMAT else f' --format={name}'} "
                  f"exports it again).", flush=True)
        else:
            with (tensorflow_noise.quiet_native_stderr() if chosen.native_noise
                  else contextlib.nullcontext()):   # tensorflow-text logs INFO
                path = chosen.export(output_dir, checkpoint_path, version=version,
                                     log=_say)
            exported[path] = checkpoint_path
            print(f"Exported the {what} to {path} (from {checkpoint_path}).", flush=True)
        paths.append(path)
    return paths


def _say(line: str) -> None:
    """A line of the library's (`log`) to stderr: what an export cleared up."""
    print(line, file=sys.stderr, flush=True)


def run() -> None:
    entry_point.run(main, prog=PROG)


if __name__ == "__main__":
    run()
