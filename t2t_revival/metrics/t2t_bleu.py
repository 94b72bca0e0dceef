"""BLEU as tensor2tensor's `t2t-bleu` printed it: `BLEU_uncased` and `BLEU_cased`.

tensor2tensor's `utils/bleu_hook.bleu_wrapper`, step for step, so that a
user's new figures compare with those their old runs logged:
- each line lowercased (Python's `str.lower`) for BLEU_uncased, as it is
  for BLEU_cased;
- `bleu_tokenize`, its "international" tokenization (mteval-v14.pl's
  `--international-tokenization`): a space around every Unicode punctuation
  character (category P) unless it stands between two digits (as a
  thousands or decimal separator), and around every symbol (category S);
  then split on whitespace;
- `compute_bleu`: clipped n-gram counts up to 4 over the corpus, an order
  with no match smoothed as 1 / (2^k x its n-gram count) (the k-th such
  order), the geometric mean of the non-zero precisions over 4, and the
  brevity penalty exp(1 - ref_len / hyp_len) when the translation is
  shorter; the result rounded to float32 as T2T's, times 100.
tests/test_bleu.py checks the figures against tensor2tensor 1.15.7's own
`bleu_hook` on the newstest files.
"""

from __future__ import annotations

import collections
import functools
import math
import re
import sys
import unicodedata
from typing import Sequence

import numpy as np

from t2t_revival.metrics.bleu_score import BleuScore

MAX_ORDER = 4
"""bleu_hook's max_order."""

UNCASED, CASED = "BLEU_uncased", "BLEU_cased"
"""The labels of T2T's two figures, as its t2t-bleu printed and logged them."""


@functools.lru_cache(maxsize=1)
def _regexes() -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """bleu_hook's UnicodeRegex: built once (it scans every code point)."""
    def chars(prefix: str) -> str:
        # bleu_hook's characters (every code point below sys.maxunicode of
        # the category), written as ranges: the same class, matched faster.
        points = [x for x in range(sys.maxunicode)
                  if unicodedata.category(chr(x)).startswith(prefix)]
        ranges, start = [], points[0]
        for before, x in zip(points, points[1:] + [None]):
            if x != before + 1:
                ranges.append(re.escape(chr(start)) + ("-" + re.escape(chr(before))
                                                       if before > start else ""))
                start = x
        return "".join(ranges)

    punctuation = chars("P")
    return (re.compile(r"([^\d])([" + punctuation + r"])"),
            re.compile(r"([" + punctuation + r"])([^\d])"),
            re.compile("([" + chars("S") + "])"))


def bleu_tokenize(line: str) -> list[str]:
    """tensor2tensor's `bleu_hook.bleu_tokenize` (mteval-v14's international tokenization)."""
    nondigit_punct, punct_nondigit, symbol = _regexes()
    line = nondigit_punct.sub(r"\1 \2 ", line)
    line = punct_nondigit.sub(r" \1 \2", line)
    line = symbol.sub(r" \1 ", line)
    return line.split()


def _ngrams(tokens: list[str]) -> collections.Counter:
    return collections.Counter(tuple(tokens[i:i + order])
                               for order in range(1, MAX_ORDER + 1)
                               for i in range(len(tokens) - order + 1))


def t2t_bleu(hypotheses: Sequence[str], references: Sequence[str],
             case_sensitive: bool) -> BleuScore:
    """`100 * bleu_hook.bleu_wrapper(reference, hypothesis, case_sensitive)`.

    Args:
        hypotheses: detokenized system outputs, one sentence each.
        references: detokenized references, aligned with `hypotheses`.
        case_sensitive: False for BLEU_uncased, True for BLEU_cased.
    """
    if not case_sensitive:
        hypotheses = [line.lower() for line in hypotheses]
        references = [line.lower() for line in references]
    matches, possible = [0] * MAX_ORDER, [0] * MAX_ORDER
    hyp_len = ref_len = 0
    for hypothesis, reference in zip(hypotheses, references):
        hyp_tokens, ref_tokens = bleu_tokenize(hypothesis), bleu_tokenize(reference)
        hyp_len += len(hyp_tokens)
        ref_len += len(ref_tokens)
        hyp_counts, ref_counts = _ngrams(hyp_tokens), _ngrams(ref_tokens)
        for ngram, count in ref_counts.items():
            matches[len(ngram) - 1] += min(count, hyp_counts[ngram])
        for ngram, count in hyp_counts.items():
            possible[len(ngram) - 1] += count
    precisions, smooth = [0.0] * MAX_ORDER, 1.0
    for i in range(MAX_ORDER):
        if possible[i] and matches[i]:
            precisions[i] = matches[i] / possible[i]
        elif possible[i]:
            smooth *= 2
            precisions[i] = 1.0 / (smooth * possible[i])
    geo_mean = (math.exp(sum(math.log(p) for p in precisions if p) / MAX_ORDER)
                if max(precisions) > 0 else 0.0)
    ratio = hyp_len / ref_len if ref_len else 1.0
    brevity_penalty = 0.0 if ratio <= 0 else 1.0 if ratio >= 1 else math.exp(1 - 1 / ratio)
    score = 100 * np.float32(geo_mean * brevity_penalty)
    return BleuScore(label=CASED if case_sensitive else UNCASED, score=float(score),
                     precisions=tuple(100 * p for p in precisions),
                     brevity_penalty=brevity_penalty, hyp_len=hyp_len, ref_len=ref_len,
                     signature=f"tensor2tensor bleu_hook.bleu_wrapper(case_sensitive="
                               f"{case_sensitive}), bleu_tokenize")


def t2t_line(score: BleuScore) -> str:
    """`BLEU_uncased =  27.31`: the line tensor2tensor's t2t-bleu printed."""
    return "%s = %6.2f" % (score.label, score.score)
