"""`t2t-import`: turn a tensor2tensor training directory, or a Marian model in
Hugging Face's format (OPUS-MT), into one of our training directories.

    t2t-import --t2t_dir=T2T_OUTPUT_DIR --vocab_file=vocab.X.subwords --output_dir=RUN
    t2t-import --marian_dir=opus-mt-en-de --output_dir=RUN

Then every tool works on RUN (t2t-decoder, t2t-exporter, t2t-avg-checkpoints,
t2t-trainer --warm_start_from).
"""

from __future__ import annotations

from absl import flags

from t2t_revival.cli import entry_point, path_flags

FLAGS = flags.FLAGS
path_flags.define_path("t2t_dir", None, "The tensor2tensor run's output_dir (its checkpoint, "
                       "model.ckpt-N.*, hparams.json, flags.txt).")
path_flags.define_path("vocab_file", None, "The run's SubwordTextEncoder vocabulary "
                       "(vocab.<problem>.<size>.subwords in its data_dir); with --t2t_dir.")
path_flags.define_path("marian_dir", None, "A Marian model in Hugging Face's format, instead "
                       "of --t2t_dir: a folder as transformers' save_pretrained writes it or "
                       "the hub holds a Helsinki-NLP/opus-mt-* model (config.json, "
                       "model.safetensors, source.spm, target.spm, vocab.json, ...). Nothing "
                       "is downloaded.")
path_flags.define_path("output_dir", None, "The training directory to write (must not "
                       "exist, or be empty).")
flags.mark_flags_as_required(["output_dir"])
flags.DEFINE_string("checkpoint", None, "Which T2T checkpoint: model.ckpt-N (or a path "
                    "prefix), 'all' (to average them later), default the latest.")
flags.DEFINE_integer("target_space_id", 0, "The target space row the encoder adds (T2T 1.15's "
                     "text problems: 0, GENERIC; early translate_ende_* problems: DE_TOK).",
                     lower_bound=0, upper_bound=31)


def main(argv: list[str]) -> int:
    from t2t_revival.errors import UserError

    if bool(FLAGS.t2t_dir) == bool(FLAGS.marian_dir):
        raise UserError("t2t-import needs one of --t2t_dir (a tensor2tensor run, with "
                        "--vocab_file) and --marian_dir (a Marian model in Hugging Face's "
                        f"format). Received: t2t_dir={FLAGS.t2t_dir!r}, "
                        f"marian_dir={FLAGS.marian_dir!r}")
    if FLAGS.marian_dir:
        from t2t_revival.marian_import.marian_importer import import_marian_run
        from t2t_revival.t2t_import.importer import check_output_dir

        check_output_dir(FLAGS.output_dir)   # before TensorFlow's import (seconds)
        import_marian_run(FLAGS.marian_dir, FLAGS.output_dir)
    else:
        from t2t_revival.t2t_import.importer import import_t2t_run

        if not FLAGS.vocab_file:
            raise UserError("--t2t_dir needs --vocab_file, the run's vocab.*.subwords file "
                            "(in its data_dir). Received: vocab_file=None")
        import_t2t_run(FLAGS.t2t_dir, FLAGS.vocab_file, FLAGS.output_dir, FLAGS.checkpoint,
                       FLAGS.target_space_id)
    print(f"Next: t2t-decoder --output_dir={FLAGS.output_dir} --decode_from_file=FILE")
    return 0


def run() -> None:
    entry_point.run(main, prog="t2t-import")


if __name__ == "__main__":
    run()
