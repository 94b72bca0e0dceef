"""`t2t-avg-checkpoints`: average the last N checkpoints of a training run."""

from __future__ import annotations

from absl import flags

from t2t_revival.cli import entry_point, path_flags, tensor2tensor_flags

FLAGS = flags.FLAGS
path_flags.define_usr_dir_flag(__name__)
path_flags.define_path("output_dir", None, "The training directory (holds hparams.json).")
flags.DEFINE_integer("num_last_checkpoints", 5,
                     "How many of the latest checkpoints to average (paper: 5 base, 20 big).",
                     lower_bound=1)
flags.DEFINE_string("model", "transformer", "Registered model name.")
tensor2tensor_flags.define(tensor2tensor_flags.AVERAGER, __name__)
# Required, or tensor2tensor's --prefix in its place.
flags.register_multi_flags_validator(
    ["output_dir", "prefix"], lambda given: bool(given["output_dir"] or given["prefix"]),
    message="flag --output_dir must have a value other than None")


def main(argv: list[str]) -> int:
    tensor2tensor_flags.take(tensor2tensor_flags.AVERAGER)
    # Writable: averaged/ is written there, after minutes of reading checkpoints.
    path_flags.check_directory("output_dir", FLAGS.output_dir, writable=True)
    path_flags.import_usr_dir(FLAGS.output_dir)
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    path = TrainingDirectory(FLAGS.output_dir).average_last(
        lambda hparams: build_model(hparams, FLAGS.model), FLAGS.num_last_checkpoints)
    print(f"Next: t2t-decoder --output_dir={FLAGS.output_dir} --checkpoint_path={path} "
          f"--decode_from_file=FILE (or t2t-exporter with the same --checkpoint_path).")
    return 0


def run() -> None:
    entry_point.run(main, prog=tensor2tensor_flags.AVERAGER)


if __name__ == "__main__":
    run()
