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
   reference: both count clipped n-grams over the corpus, take the brevity
   penalty exp(1 - ref_len / hyp_len) when hyp_len < ref_len, and give 0 when
   some n-gram order has no match (multi-bleu: log(0) floored to -9999999999;
   sacreBLEU: the same floor). tests/test_bleu.py checks this against a
   direct implementation of multi-bleu.perl's counting.
"""

from __future__ import annotations

import re
from typing import Sequence

import sacrebleu

from t2t_revival.errors import UserError
from t2t_revival.text_lines import read_text_lines
from t2t_revival.metrics.bleu_score import BleuScore
from t2t_revival.metrics.t2t_bleu import t2t_bleu, t2t_line

SACREBLEU_LABEL = "sacreBLEU (cased, 13a)"
TOKENIZED_LABEL = ("tokenized BLEU (Moses tokenizer -l {lang} + compound splitting, "
                   "multi-bleu; as the paper / t2t get_ende_bleu.sh)")

# get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
_COMPOUND = re.compile(r"(\S)-(\S)")


class BleuInputError(UserError):
    """A translation or reference file that cannot be scored."""


def _check(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise BleuInputError(
            "the translation and the reference must have one line per sentence, "
            "aligned; their line counts differ. Received: "
            f"translation lines={len(hypotheses)}, reference lines={len(references)}")
    if not hypotheses:
        raise BleuInputError("there is nothing to score: no lines. Received: lines=0")


def _score(label: str, bleu: sacrebleu.BLEU, hypotheses, references) -> BleuScore:
    result = bleu.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(label=label, score=float(result.score),
                     precisions=tuple(float(p) for p in result.precisions),
                     brevity_penalty=float(result.bp), hyp_len=int(result.sys_len),
                     ref_len=int(result.ref_len), signature=str(bleu.get_signature()))


def sacre_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """sacreBLEU, cased, tokenize 13a, exp smoothing (the `sacrebleu` CLI default).

    Args:
        hypotheses: detokenized system outputs, one sentence each.
        references: detokenized references, aligned with `hypotheses`.
    """
    _check(hypotheses, references)
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


def tokenized_bleu(hypotheses: Sequence[str], references: Sequence[str],
                   language: str = "de") -> BleuScore:
    """The paper's BLEU: Moses-tokenize and compound-split both sides, multi-bleu.

    Args:
        hypotheses: detokenized system outputs, one sentence each.
        references: detokenized references, aligned with `hypotheses`.
        language: the target language for the Moses tokenizer (-l).
    """
    _check(hypotheses, references)
    hyp = [split_compounds(line) for line in moses_tokenize(hypotheses, language)]
    ref = [split_compounds(line) for line in moses_tokenize(references, language)]
    multi_bleu = sacrebleu.BLEU(tokenize="none", smooth_method="none", force=True)
    return _score(TOKENIZED_LABEL.format(lang=language), multi_bleu, hyp, ref)


def read_lines(path: str, what: str) -> list[str]:
    """The lines of a UTF-8 text file; BleuInputError on bad input (see read_text_lines)."""
    return read_text_lines(path, what, error=BleuInputError)


def bleu_files(translation: str, reference: str, language: str = "de",
               t2t_cases: Sequence[bool] = ()) -> list[BleuScore]:
    """Both figures for a translation file against a reference file, and
    tensor2tensor's (`t2t_bleu`) for each of `t2t_cases` (False: BLEU_uncased,
    True: BLEU_cased).

    Returns [sacreBLEU (cased, 13a), tokenized BLEU as the paper, T2T's...].
    """
    hypotheses = read_lines(translation, "translation")
    references = read_lines(reference, "reference")
    _check(hypotheses, references)
    return [sacre_bleu(hypotheses, references),
            tokenized_bleu(hypotheses, references, language),
            *(t2t_bleu(hypotheses, references, case_sensitive) for case_sensitive in t2t_cases)]


def format_scores(scores: Sequence[BleuScore], as_json: bool = False) -> str:
    """[sacreBLEU, tokenized BLEU, tensor2tensor's...] as labelled lines
    (T2T's as its t2t-bleu printed them, `BLEU_cased =  27.31`), or one JSON
    object (T2T's under their labels)."""
    if as_json:
        import json

        return json.dumps({"sacrebleu": scores[0].to_dict(),
                           "tokenized_bleu": scores[1].to_dict(),
                           **{score.label: score.to_dict() for score in scores[2:]}},
                          indent=2)
    return "\n".join([score.format() for score in scores[:2]]
                     + [t2t_line(score) for score in scores[2:]])
