"""`t2t-bleu`: BLEU, chrF and TER of a translation file against reference files.

Prints labelled figures: sacreBLEU (cased, 13a) with its signature, the
paper's tokenized BLEU (Moses tokenizer + compound splitting + multi-bleu, as
tensor2tensor's get_ende_bleu.sh computed the 28.4), and tensor2tensor's own
`BLEU_uncased` and `BLEU_cased` lines (its bleu_hook, `metrics/t2t_bleu.py`),
as its t2t-bleu printed them; then sacreBLEU's chrF2, chrF2++ and TER with
their signatures (`metrics/chrf_ter.py`). `--reference` may name several
files (repeated, or comma-separated): every figure but T2T's (which takes
the first) uses them all. With `--translations_dir` and `--event_dir`
instead of `--translation`, tensor2tensor's other mode: T2T's figures of every
`<name>-<steps>` file of the folder as TensorBoard scalars
(`metrics/bleu_events.py`).
"""

from __future__ import annotations

from absl import flags

from t2t_revival.cli import entry_point, float_flags, path_flags, tensor2tensor_flags
from t2t_revival.metrics.bleu import (BleuInputError, bleu_scores, check_language,
                                      format_scores, read_lines, read_references)
from t2t_revival.metrics.chrf_ter import chrf_ter_scores

FLAGS = flags.FLAGS

_VARIANTS = {"both": (False, True), "uncased": (False,), "cased": (True,)}

path_flags.define_path("translation", None, "System output: detokenized text, one sentence a line.")
path_flags.define_paths("reference", "Reference translations, aligned line by line with "
                                     "the translation; several references: repeat the flag or "
                                     "separate the files with commas (tensor2tensor's "
                                     "BLEU_uncased/BLEU_cased lines score the first).")
flags.DEFINE_string("language", "de", "Target language for the Moses tokenizer (-l).")
flags.DEFINE_bool("json", False, "Print one JSON object instead of text.")
path_flags.define_path("translations_dir", None,
                       "tensor2tensor's mode: a folder of translations named <name>-<steps> "
                       "(one per checkpoint); each is scored (BLEU_uncased, BLEU_cased) into "
                       "--event_dir, instead of --translation.")
path_flags.define_path("event_dir", None, "With --translations_dir: where the TensorBoard "
                                          "events and last_evaluated_step.txt go.")
flags.DEFINE_enum("bleu_variant", "both", list(_VARIANTS),
                  "tensor2tensor's figures to give: BLEU_cased, BLEU_uncased or both.")
flags.DEFINE_string("tag_suffix", "", "With --translations_dir: appended to the tags "
                                      "BLEU_cased and BLEU_uncased (e.g. for each beam size).")
flags.DEFINE_integer("min_steps", -1, "With --translations_dir: skip translations of fewer "
                                      "steps; -1 starts after the step in "
                                      "<event_dir>/last_evaluated_step.txt.")
flags.DEFINE_float("wait_minutes", 0, "With --translations_dir: wait up to this long for "
                                  "each next translation file (a training in progress).",
                   lower_bound=0.0)
float_flags.require_finite("wait_minutes")
flags.DEFINE_bool("report_zero", None, "With --translations_dir: write BLEU 0 at step 0, at "
                                       "the time of the oldest file (default: when starting "
                                       "from step 0).")


def _translations_dir() -> int:
    from t2t_revival.metrics.bleu_events import evaluate_translations_dir
    from t2t_revival.metrics.t2t_bleu import t2t_bleu, t2t_line

    if FLAGS.translation:
        raise BleuInputError("give --translation or --translations_dir, not both. Received: "
                             f"translation={FLAGS.translation!r}, "
                             f"translations_dir={FLAGS.translations_dir!r}")
    if not FLAGS.event_dir:
        raise BleuInputError("--translations_dir needs --event_dir=DIR (where the events go). "
                             "Received: event_dir=None")
    if len(path_flags.paths(FLAGS.reference)) > 1:
        raise BleuInputError("--translations_dir gives tensor2tensor's BLEU, which takes one "
                             "reference; give one --reference (score a translation against "
                             "several with --translation). Received: "
                             f"reference={path_flags.paths(FLAGS.reference)}")
    # Before any scoring: the events and last_evaluated_step.txt are written there.
    path_flags.check_directory("event_dir", FLAGS.event_dir, writable=True)
    references = read_lines(path_flags.paths(FLAGS.reference)[0], "reference")

    def score(path: str):
        hypotheses = read_lines(path, "translation")
        if len(hypotheses) != len(references):
            raise BleuInputError(f"the translation {path} and the reference must have one "
                                 f"line per sentence; their line counts differ. Received: "
                                 f"translation lines={len(hypotheses)}, "
                                 f"reference lines={len(references)}")
        return [t2t_bleu(hypotheses, references, case)
                for case in _VARIANTS[FLAGS.bleu_variant]]

    results = evaluate_translations_dir(
        FLAGS.translations_dir, FLAGS.event_dir, score, tag_suffix=FLAGS.tag_suffix,
        min_steps=FLAGS.min_steps, wait_minutes=FLAGS.wait_minutes,
        report_zero=FLAGS.report_zero)
    for steps, scores in results:
        print(f"step {steps}: " + ", ".join(t2t_line(s) for s in scores))
    return 0


tensor2tensor_flags.define(tensor2tensor_flags.BLEU, __name__)


def main(argv: list[str]) -> int:
    tensor2tensor_flags.take(tensor2tensor_flags.BLEU)
    if not FLAGS.reference:
        raise BleuInputError("--reference=FILE is required. Received: reference=None")
    if FLAGS.translations_dir:
        return _translations_dir()
    if not FLAGS.translation:
        raise BleuInputError("--translation=FILE is required (or tensor2tensor's "
                             "--translations_dir=DIR). Received: translation=None")
    check_language(FLAGS.language)
    hypotheses = read_lines(FLAGS.translation, "translation")
    references = read_references(path_flags.paths(FLAGS.reference), FLAGS.translation,
                                 len(hypotheses))
    scores = bleu_scores(hypotheses, references, FLAGS.language,
                         t2t_cases=_VARIANTS[FLAGS.bleu_variant])
    print(format_scores(scores, FLAGS.json, chrf_ter_scores(hypotheses, references)))
    return 0


def run() -> None:
    entry_point.run(main, prog=tensor2tensor_flags.BLEU)


if __name__ == "__main__":
    run()
