"""BLEU two ways: sacreBLEU, and the paper's tokenized BLEU (and tensor2tensor's
own two, `t2t_bleu`, beside them).

1. `sacre_bleu`: sacreBLEU (Post 2018) on detokenized text, cased, its 13a
   tokenizer and default exp smoothing: exactly what the `sacrebleu` command
   line prints, with its signature. The comparable modern figure.

2. `tokenized_bleu`: the recipe behind the paper's 28.4 En-De, tensor2tensor's
   `utils/get_ende_bleu.sh`:
       perl tokenizer.perl -l de < file > file.tok          (both sides)
       perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'       (compound splitting)
       perl multi-bleu.perl reference.atat < hypothesis.atat (case-sensitive)
   Here tokenizer.perl is `sacremoses` (its Python port) with the script's
   defaults: escaping on (& -> &amp;, " -> &quot;, ' -> &apos;, ...) and no
   aggressive hyphen splitting (-a off), so hyphenated compounds stay one
   token until the ##AT## step splits them (`split_compounds`, the same
   regex, substituted left to right without overlap as perl's s///g does).
   multi-bleu.perl is sacreBLEU's BLEU with tokenize="none" (split on
   whitespace, as perl's `split`), cased, smooth_method="none", one
   reference or several: both count n-grams over the corpus clipped by
   their most frequent reference, take the brevity penalty
   exp(1 - ref_len / hyp_len) when hyp_len < ref_len (the closest reference
   length, the shorter on a tie), and give 0 when
   some n-gram order has no match (multi-bleu: log(0) floored to -9999999999;
   sacreBLEU: the same floor). tests/test_bleu.py checks this against a
   direct implementation of multi-bleu.perl's counting.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import sacrebleu

from t2t_revival.errors import UserError
from t2t_revival.files.text_lines import read_text_lines
from t2t_revival.metrics.bleu_score import BleuScore
from t2t_revival.metrics.metric_score import MetricScore
from t2t_revival.metrics.t2t_bleu import t2t_bleu, t2t_line

SACREBLEU_LABEL = "sacreBLEU (cased, 13a)"
TOKENIZED_LABEL = ("tokenized BLEU (Moses tokenizer -l {lang} + compound splitting, "
                   "multi-bleu; as the paper / t2t get_ende_bleu.sh)")

# get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
_COMPOUND = re.compile(r"(\S)-(\S)")


class BleuInputError(UserError):
    """A translation or reference file that cannot be scored."""


def reference_streams(hypotheses: Sequence[str], references) -> list[list[str]]:
    """`references` as sacreBLEU takes them, a list of reference streams, each
    aligned with `hypotheses`; a BleuInputError when a stream's line count
    differs or there is nothing to score.

    Args:
        hypotheses: the system outputs, one sentence each.
        references: one list of lines (one reference), or a list of such
            lists (several references).
    """
    streams = [list(references)] if not references or isinstance(references[0], str) \
        else [list(stream) for stream in references]
    for stream in streams:
        if len(hypotheses) != len(stream):
            raise BleuInputError(
                "the translation and the reference must have one line per sentence, "
                "aligned; their line counts differ. Received: "
                f"translation lines={len(hypotheses)}, reference lines={len(stream)}")
    if not hypotheses:
        raise BleuInputError("there is nothing to score: no lines. Received: lines=0")
    return streams


def _score(label: str, bleu: sacrebleu.BLEU, hypotheses, references) -> BleuScore:
    result = bleu.corpus_score(list(hypotheses), reference_streams(hypotheses, references))
    return BleuScore(label=label, score=float(result.score),
                     precisions=tuple(float(p) for p in result.precisions),
                     brevity_penalty=float(result.bp), hyp_len=int(result.sys_len),
                     ref_len=int(result.ref_len), signature=str(bleu.get_signature()))


def sacre_bleu(hypotheses: Sequence[str], references) -> BleuScore:
    """sacreBLEU, cased, tokenize 13a, exp smoothing (the `sacrebleu` CLI default).

    Args:
        hypotheses: detokenized system outputs, one sentence each.
        references: detokenized references, aligned with `hypotheses`: one
            list of lines, or a list of such lists (several references).
    """
    return _score(SACREBLEU_LABEL, sacrebleu.BLEU(), hypotheses, references)


def check_language(language: str) -> str:
    """`language` if the Moses tokenizer knows it, else a BleuInputError listing those it knows.

    (sacremoses silently tokenizes an unknown language with no nonbreaking
    prefixes, which gives a score that compares with nothing.)
    """
    from sacremoses.corpus import NonbreakingPrefixes

    known = sorted(set(NonbreakingPrefixes().available_langs.values()))
    if language not in known:
        raise BleuInputError(f"the Moses tokenizer has no rules for language "
                             f"{language!r}; use one of {', '.join(known)}. "
                             f"Received: language={language!r}")
    return language


def moses_language(code: str) -> str:
    """The Moses tokenizer's language of a language code: `code` where it
    knows it ("de"), else its first two letters where it knows those (ISO
    639-3 "deu" -> "de", "fra" -> "fr"), else "en" (its generic rules)."""
    from sacremoses.corpus import NonbreakingPrefixes

    known = set(NonbreakingPrefixes().available_langs.values())
    return next((c for c in (code, code[:2].lower()) if c in known), "en")


def moses_tokenize(lines: Sequence[str], language: str = "de") -> list[str]:
    """`perl tokenizer.perl -l language` (escaping on, no -a), via sacremoses."""
    from sacremoses import MosesTokenizer

    check_language(language)
    tokenizer = MosesTokenizer(lang=language)
    return [tokenizer.tokenize(line, return_str=True, escape=True,
                               aggressive_dash_splits=False) for line in lines]


def split_compounds(line: str) -> str:
    """`rich-text` -> `rich ##AT##-##AT## text`, as get_ende_bleu.sh's perl -ple."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def tokenized_bleu(hypotheses: Sequence[str], references,
                   language: str = "de") -> BleuScore:
    """The paper's BLEU: Moses-tokenize and compound-split both sides, multi-bleu
    (with several references, as multi-bleu.perl takes them: n-grams clipped
    by their most frequent reference, the closest reference length, the
    shorter on a tie).

    Args:
        hypotheses: detokenized system outputs, one sentence each.
        references: detokenized references, aligned with `hypotheses`: one
            list of lines, or a list of such lists (several references).
        language: the target language for the Moses tokenizer (-l).
    """
    streams = reference_streams(hypotheses, references)
    hyp = [split_compounds(line) for line in moses_tokenize(hypotheses, language)]
    ref = [[split_compounds(line) for line in moses_tokenize(stream, language)]
           for stream in streams]
    multi_bleu = sacrebleu.BLEU(tokenize="none", smooth_method="none", force=True)
    return _score(TOKENIZED_LABEL.format(lang=language), multi_bleu, hyp, ref)


def read_lines(path: str, what: str) -> list[str]:
    """The lines of a UTF-8 text file; BleuInputError on bad input (see read_text_lines)."""
    return read_text_lines(path, what, error=BleuInputError)


def read_references(paths: str | Sequence[str], translation: str,
                    lines: int) -> list[list[str]]:
    """The lines of each reference file of `paths`; a BleuInputError naming the
    first whose line count is not the translation's `lines`."""
    streams = []
    for path in [paths] if isinstance(paths, str) else paths:
        stream = read_lines(path, "reference")
        if len(stream) != lines:
            raise BleuInputError(
                f"the translation {translation} and the reference {path} must have one "
                f"line per sentence, aligned; their line counts differ. Received: "
                f"translation lines={lines}, reference lines={len(stream)}")
        streams.append(stream)
    return streams


def bleu_files(translation: str, reference: str | Sequence[str], language: str = "de",
               t2t_cases: Sequence[bool] = ()) -> list[BleuScore]:
    """Both figures for a translation file against one reference file or
    several, and tensor2tensor's (`t2t_bleu`) for each of `t2t_cases` (False:
    BLEU_uncased, True: BLEU_cased).

    Returns [sacreBLEU (cased, 13a), tokenized BLEU as the paper, T2T's...].
    """
    hypotheses = read_lines(translation, "translation")
    return bleu_scores(hypotheses, read_references(reference, translation, len(hypotheses)),
                       language, t2t_cases)


def bleu_scores(hypotheses: Sequence[str], references, language: str = "de",
                t2t_cases: Sequence[bool] = ()) -> list[BleuScore]:
    """`bleu_files`'s figures of lines: [sacreBLEU, tokenized BLEU, T2T's...].

    tensor2tensor's bleu_hook takes one reference: with several, T2T's
    figures are against the first (their signature says so).
    """
    streams = reference_streams(hypotheses, references)
    t2t = [t2t_bleu(hypotheses, streams[0], case_sensitive) for case_sensitive in t2t_cases]
    if len(streams) > 1:
        t2t = [dataclasses.replace(score, signature=f"{score.signature}, the first of "
                                                    f"{len(streams)} references only")
               for score in t2t]
    return [sacre_bleu(hypotheses, streams),
            tokenized_bleu(hypotheses, streams, language), *t2t]


def format_scores(scores: Sequence[BleuScore], as_json: bool = False,
                  others: dict[str, MetricScore] | None = None) -> str:
    """[sacreBLEU, tokenized BLEU, tensor2tensor's...] as labelled lines
    (T2T's as its t2t-bleu printed them, `BLEU_cased =  27.31`), then each of
    `others` (chrF, TER: `chrf_ter.chrf_ter_scores`) on a line; or one JSON
    object (T2T's under their labels, `others` under their keys)."""
    others = others or {}
    if as_json:
        import json

        return json.dumps({"sacrebleu": scores[0].to_dict(),
                           "tokenized_bleu": scores[1].to_dict(),
                           **{score.label: score.to_dict() for score in scores[2:]},
                           **{key: score.to_dict() for key, score in others.items()}},
                          indent=2)
    return "\n".join([score.format() for score in scores[:2]]
                     + [t2t_line(score) for score in scores[2:]]
                     + [score.format() for score in others.values()])
