"""`t2t-bleu`: BLEU of a translation file against a reference file.

Prints two labelled figures: sacreBLEU (cased, 13a) with its signature, and
the paper's tokenized BLEU (Moses tokenizer + compound splitting +
multi-bleu, as tensor2tensor's get_ende_bleu.sh computed the 28.4).
"""

from __future__ import annotations

from absl import flags

from t2t_revival.cli import entry_point, path_flags
from t2t_revival.metrics.bleu import (BleuInputError, bleu_files, check_language,
                                      format_scores)

FLAGS = flags.FLAGS

path_flags.define_path("translation", None, "System output: detokenized text, one sentence a line.")
path_flags.define_path("reference", None, "Reference translations, aligned line by line.")
flags.DEFINE_string("language", "de", "Target language for the Moses tokenizer (-l).")
flags.DEFINE_bool("json", False, "Print one JSON object instead of text.")


def main(argv: list[str]) -> int:
    for name in ("translation", "reference"):
        if not getattr(FLAGS, name):
            raise BleuInputError(f"--{name}=FILE is required. Received: {name}=None")
    check_language(FLAGS.language)
    scores = bleu_files(FLAGS.translation, FLAGS.reference, FLAGS.language)
    print(format_scores(scores, FLAGS.json))
    return 0


def run() -> None:
    entry_point.run(main, prog="t2t-bleu")


if __name__ == "__main__":
    run()
