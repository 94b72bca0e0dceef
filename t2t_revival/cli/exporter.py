"""`t2t-exporter`: export a trained model as a TF Serving SavedModel, a
CTranslate2 model directory or LiteRT programs.

    t2t-exporter --output_dir=t2t_train/tiny --checkpoint_path=t2t_train/tiny/averaged/ckpt-2000
    docker run -p 8501:8501 -v $PWD/t2t_train/tiny/export:/models/t2t \\
        -e MODEL_NAME=t2t tensorflow/serving

Writes output_dir/export/<step>/ (TF Serving's --model_base_path layout): a
SavedModel whose `serving_default` signature takes sentences (tf.string [None])
and returns translations (`outputs`, tf.string [None]) and their scores
(`scores`, float32 [None]); `translate_ids` does the same on token ids.
Tokenization and beam search run in the graph; the beam settings come from
hparams.json and --decode_hparams. Without --checkpoint_path: the latest
checkpoint.

    t2t-exporter --output_dir=t2t_train/tiny --checkpoint_path=t2t_train/tiny/averaged/ckpt-2000 \\
        --format=ctranslate2 --quantization=int8

writes output_dir/export/ctranslate2/<step>/: the same checkpoint as a
CTranslate2 model (model.bin, config.json, shared_vocabulary.json) with the
SentencePiece vocab.model beside it, for fast CPU/GPU decoding
(`t2t_revival.decode.ctranslate2_translator.CTranslate2Translator`). Needs the
optional extra: python -m pip install -e ".[ctranslate2]" in the clone.

    t2t-exporter --output_dir=t2t_train/tiny --format=litert

writes output_dir/export/litert/<step>/: encoder.tflite and step.tflite (the
decoder's cached step over the beam's rows), fixed-shape LiteRT programs
for devices (XNNPACK's CPU kernels), with the vocabulary and the settings;
`t2t_revival.decode.litert_translator.LiteRTTranslator` translates with them,
one sentence at a time.
"""

from __future__ import annotations

import contextlib
import sys

from absl import flags

from t2t_revival.cli import entry_point, path_flags, tensor2tensor_flags, tensorflow_noise
from t2t_revival.export.export_format import DEFAULT_FORMAT, FORMATS, export_format, formats_help

FLAGS = flags.FLAGS
PROG = "t2t-exporter"

path_flags.define_usr_dir_flag(__name__)
flags.DEFINE_enum("format", DEFAULT_FORMAT, list(FORMATS),
                  f"What to export: {formats_help()}.")
path_flags.define_path("output_dir", None, "The training directory (hparams.json, checkpoints).")
path_flags.define_path("checkpoint_path", None,
                       "A checkpoint prefix to export (default: the latest in output_dir), or "
                       "a folder of checkpoints such as output_dir/best: its latest.")
flags.DEFINE_string("decode_hparams", "",
                    'Beam settings fixed in the export: "beam_size=4,alpha=0.6,extra_length=50" '
                    "and early_stop (--format=ctranslate2: batch_size instead of "
                    "early_stop); alignments=true (with alignment_layer, alignment_heads) adds "
                    "the SavedModel signature translate_with_alignments; no other decode "
                    "setting.")
path_flags.define_path("export_dir", None,
                       "The directory to write <version>/ under (default: output_dir/export "
                       "for saved_model, output_dir/export/ctranslate2 for ctranslate2, "
                       "output_dir/export/litert for litert).")
flags.DEFINE_integer("version", None, "The version number (default: the checkpoint's step).",
                     lower_bound=1)
flags.DEFINE_string("quantization", None,
                    "--format=ctranslate2 only: the stored weight type: int8, "
                    "int8_float32, int8_float16, int8_bfloat16, int16, float16, bfloat16 "
                    "or float32 (default float32).")
flags.DEFINE_bool("xla", False,
                  "--format=saved_model only: compile the encoder and beam search with XLA "
                  "(jit_compile) in the SavedModel: several times faster per batch on CPU; "
                  "TF Serving then needs --xla_cpu_compilation_enabled=true.")
flags.mark_flag_as_required("output_dir")
tensor2tensor_flags.define(PROG, __name__)


def main(argv: list[str]) -> int:
    from t2t_revival.errors import UserError

    tensor2tensor_flags.take(PROG)
    # Where the export goes must be writable before the model is loaded and traced.
    path_flags.check_directory("output_dir", FLAGS.output_dir, writable=FLAGS.export_dir is None)
    tensor2tensor_flags.check_run_flags(FLAGS.output_dir)
    path_flags.import_usr_dir(FLAGS.output_dir)
    if FLAGS.export_dir is not None:
        path_flags.check_directory("export_dir", FLAGS.export_dir, writable=True)
    if FLAGS.xla and FLAGS.format != "saved_model":
        raise UserError("--xla applies to --format=saved_model only (CTranslate2 "
                        f"and LiteRT have their own kernels). Received: format={FLAGS.format!r}")
    from t2t_revival.settings.decode_hparams import parse_decode_hparams
    from t2t_revival.run_dir.training_directory import TrainingDirectory, require_directory

    overrides = parse_decode_hparams(FLAGS.decode_hparams)   # once, before any model loads
    if FLAGS.format == "ctranslate2":
        from t2t_revival.export.ctranslate2_export import check_quantization

        check_quantization(FLAGS.quantization or "float32")
    elif FLAGS.quantization is not None:
        raise UserError("--quantization applies to --format=ctranslate2 only. "
                        f"Received: quantization={FLAGS.quantization!r}, "
                        f"format={FLAGS.format!r}")
    # The run's files before the imports of TensorFlow (seconds): a missing
    # run directory or hparams.json is reported at once.
    require_directory(FLAGS.output_dir)
    TrainingDirectory(FLAGS.output_dir).read_hparams()
    chosen = export_format(FLAGS.format)
    options = {"xla": FLAGS.xla, "quantization": FLAGS.quantization or "float32"}
    with (tensorflow_noise.quiet_native_stderr() if chosen.native_noise
          else contextlib.nullcontext()):   # tensorflow-text's SentencePiece logs INFO
        path = chosen.export(FLAGS.output_dir, FLAGS.checkpoint_path, overrides,
                             FLAGS.export_dir, FLAGS.version, log=_say,
                             **{name: options[name] for name in chosen.options})
    print(f"Exported the {chosen.what} to {path}")
    return 0


def _say(line: str) -> None:
    """A line of the library's (`log`) to stderr: what an export cleared up."""
    print(line, file=sys.stderr, flush=True)


def run() -> None:
    entry_point.run(main, prog=PROG)


if __name__ == "__main__":
    run()
