"""chrF, chrF++ and TER: sacreBLEU's own metric classes, with its defaults.

Each is what the `sacrebleu` command line prints on the same detokenized
files (`sacrebleu REF... -i HYP -m chrf ter`, `--chrf-word-order 2` for
chrF++), with its signature:
- `chrf`: chrF2 (Popovic 2015): character n-grams up to 6, beta 2, cased,
  whitespace ignored; with several references, each sentence takes the
  reference it matches best.
- `chrf`, `word_order=2`: chrF2++ (Popovic 2017): the same, plus word
  unigrams and bigrams.
- `ter`: TER (Snover et al. 2006), sacreBLEU's tercom port: edits (with
  shifts) per reference word, case-insensitive by default; lower is better.
  With several references each sentence takes the one with the fewest edits,
  over their average length.
"""

from __future__ import annotations

from typing import Sequence

import sacrebleu

from t2t_revival.metrics.bleu import reference_streams
from t2t_revival.metrics.metric_score import MetricScore

CHRF, CHRF_PLUS_PLUS, TER = "chrf", "chrf++", "ter"
"""The keys of the figures (t2t-bleu --json; "chrf" is also a dev metric)."""


def _score(metric, hypotheses, references, note: str = "") -> MetricScore:
    result = metric.corpus_score(list(hypotheses), reference_streams(hypotheses, references))
    return MetricScore(label=f"{result.name} (sacreBLEU{note})", name=result.name,
                       score=float(result.score), signature=str(metric.get_signature()))


def chrf(hypotheses: Sequence[str], references, word_order: int = 0) -> MetricScore:
    """sacreBLEU's chrF2 (`word_order=0`) or chrF2++ (`word_order=2`).

    Args:
        hypotheses: detokenized system outputs, one sentence each.
        references: the references aligned with `hypotheses`: one list of
            lines, or a list of such lists (several references).
        word_order: word n-gram order (0: chrF, 2: chrF++).
    """
    return _score(sacrebleu.metrics.CHRF(word_order=word_order), hypotheses, references)


def ter(hypotheses: Sequence[str], references) -> MetricScore:
    """sacreBLEU's TER with its defaults (case-insensitive, tercom tokenization).

    Args:
        hypotheses, references: as `chrf`'s.
    """
    return _score(sacrebleu.metrics.TER(), hypotheses, references, ", lower is better")


def chrf_ter_scores(hypotheses: Sequence[str], references) -> dict[str, MetricScore]:
    """{"chrf": chrF2, "chrf++": chrF2++, "ter": TER} of `hypotheses`."""
    return {CHRF: chrf(hypotheses, references), CHRF_PLUS_PLUS: chrf(hypotheses, references, 2),
            TER: ter(hypotheses, references)}
