"""`t2t-exporter`: export a trained model as a TF Serving SavedModel.

    t2t-exporter --output_dir=t2t_train/tiny
    docker run -p 8501:8501 -v $PWD/t2t_train/tiny/export:/models/t2t \
        -e MODEL_NAME=t2t tensorflow/serving

Writes output_dir/export/<step>/ (TF Serving's --model_base_path layout): a
SavedModel whose `serving_default` signature takes sentences (tf.string [None])
and returns translations (`outputs`, tf.string [None]) and their scores
(`scores`, float32 [None]); `translate_ids` does the same on token ids.
Tokenization and beam search run in the graph; the beam settings come from
hparams.json and --decode_hparams.
"""

from __future__ import annotations

from absl import flags

from t2t_revival.cli import common

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "The training directory (hparams.json, checkpoints).")
flags.DEFINE_string("checkpoint_path", None,
                    "A checkpoint prefix to export (default: the latest in output_dir).")
flags.DEFINE_string("decode_hparams", "",
                    'Beam settings fixed in the export: "beam_size=4,alpha=0.6,extra_length=50".')
flags.DEFINE_string("export_dir", None,
                    "The model base path to write <version>/ under (default: output_dir/export).")
flags.DEFINE_integer("version", None, "The version number (default: the checkpoint's step).",
                     lower_bound=1)
flags.mark_flag_as_required("output_dir")


def main(argv: list[str]) -> int:
    from t2t_revival.export.saved_model_export import export_saved_model

    path = export_saved_model(FLAGS.output_dir, FLAGS.checkpoint_path,
                              FLAGS.decode_hparams, FLAGS.export_dir, FLAGS.version)
    print(f"Exported the SavedModel to {path}")
    return 0


def run() -> None:
    common.run(main, prog="t2t-exporter")


if __name__ == "__main__":
    run()
