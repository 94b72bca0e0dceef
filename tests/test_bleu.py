"""BLEU: sacreBLEU as its CLI, the paper's tokenized BLEU, and `t2t-bleu`.

Real text: the Multi30k 2016 test references (German), scored against a
deterministically perturbed copy of themselves as the "translation".
"""

import collections
import gzip
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from t2t_revival.metrics import (BleuInputError, moses_tokenize, read_lines, sacre_bleu,
                                 split_compounds, tokenized_bleu)

SACREBLEU_CLI = os.path.join(os.path.dirname(sys.executable), "sacrebleu")


def perturb(lines):
    """A plausible, imperfect "translation": drop, swap and change some words."""
    out = []
    for i, line in enumerate(lines):
        words = line.split()
        if i % 3 == 0 and len(words) > 4:
            del words[len(words) // 2]
        if i % 4 == 1 and len(words) > 3:
            words[1], words[2] = words[2], words[1]
        if i % 5 == 2:
            words = [{"ein": "eine", "Ein": "Eine", "Mann": "Herr"}.get(w, w) for w in words]
        if i % 7 == 3 and words:
            words[-1] = words[-1].rstrip(".")
        out.append(" ".join(words))
    return out


@pytest.fixture(scope="module")
def multi30k(shared_data, tmp_path_factory):
    """(translation path, reference path, hypotheses, references)."""
    with gzip.open(shared_data / "multi30k" / "test_2016_flickr.de.gz", "rt",
                   encoding="utf-8") as f:
        references = [line.rstrip("\n") for line in f]
    assert len(references) == 1000
    hypotheses = perturb(references)
    folder = tmp_path_factory.mktemp("bleu")
    ref, hyp = folder / "ref.de", folder / "hyp.de"
    ref.write_text("\n".join(references) + "\n", encoding="utf-8")
    hyp.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    return str(hyp), str(ref), hypotheses, references


def t2t_bleu(*args, **env):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "t2t_revival.cli.bleu", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def multi_bleu_perl(hypotheses, references):
    """A direct transcription of multi-bleu.perl's counting (one reference, cased)."""
    correct, total = [0] * 5, [0] * 5
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references):
        hyp_words, ref_words = hyp.split(), ref.split()
        hyp_len += len(hyp_words)
        ref_len += len(ref_words)
        for n in range(1, 5):
            ref_ngrams = collections.Counter(
                tuple(ref_words[i:i + n]) for i in range(len(ref_words) - n + 1))
            hyp_ngrams = collections.Counter(
                tuple(hyp_words[i:i + n]) for i in range(len(hyp_words) - n + 1))
            for ngram, count in hyp_ngrams.items():
                total[n] += count
                correct[n] += min(count, ref_ngrams.get(ngram, 0))
    precisions = [correct[n] / total[n] if total[n] else 0.0 for n in range(1, 5)]
    bp = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    log = lambda p: math.log(p) if p else -9999999999  # noqa: E731  (perl's my_log)
    return 100 * bp * math.exp(sum(log(p) for p in precisions) / 4)


def test_sacrebleu_figure_equals_the_sacrebleu_command_line(multi30k):
    hyp_path, ref_path, hypotheses, references = multi30k
    cli = subprocess.run([SACREBLEU_CLI, ref_path, "-i", hyp_path, "-w", "4"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    ours = sacre_bleu(hypotheses, references)
    assert 20 < ours.score < 95  # a real, imperfect translation
    assert round(ours.score, 4) == pytest.approx(expected["score"], abs=1e-4)
    assert ours.signature == expected["signature"]
    assert "tok:13a" in ours.signature and "case:mixed" in ours.signature

    out = t2t_bleu(f"--translation={hyp_path}", f"--reference={ref_path}", "--json")
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["sacrebleu"]["score"] == pytest.approx(expected["score"], abs=1e-4)
    assert figures["sacrebleu"]["label"] == "sacreBLEU (cased, 13a)"
    assert figures["tokenized_bleu"]["label"].startswith("tokenized BLEU (Moses")


def test_tokenized_bleu_is_multi_bleu_on_moses_tokenized_compound_split_text(multi30k):
    _, _, hypotheses, references = multi30k
    ours = tokenized_bleu(hypotheses, references, "de")
    hyp = [split_compounds(line) for line in moses_tokenize(hypotheses, "de")]
    ref = [split_compounds(line) for line in moses_tokenize(references, "de")]
    assert ours.score == pytest.approx(multi_bleu_perl(hyp, ref), abs=1e-9)
    assert ours.hyp_len == sum(len(line.split()) for line in hyp)
    # Tokenization separates the final period that the perturbation removed
    # from some lines, so the two recipes really differ.
    assert ours.score != pytest.approx(sacre_bleu(hypotheses, references).score, abs=1e-3)


def test_multi_bleu_equivalence_holds_when_an_ngram_order_has_no_match():
    # No 4-gram matches: multi-bleu gives 0 (no smoothing), as must we.
    hyps, refs = ["Ein Hund läuft schnell weg ."], ["Ein Hund rennt schnell weg ."]
    assert multi_bleu_perl(hyps, refs) < 1e-6
    assert tokenized_bleu(hyps, refs).score == pytest.approx(0.0, abs=1e-6)


def test_moses_tokenization_escapes_like_tokenizer_perl():
    assert moses_tokenize(['Er sagte: "Das kostet 3,5 Mio. & mehr."'], "de") == [
        "Er sagte : &quot; Das kostet 3,5 Mio. &amp; mehr . &quot;"]


def test_compound_splitting_is_the_perl_one_liner():
    assert split_compounds("das Rich-Text-Format") == (
        "das Rich ##AT##-##AT## Text ##AT##-##AT## Format")
    assert split_compounds("a-b-c - x") == "a ##AT##-##AT## b-c - x"  # s///g, no overlap
    perl = shutil.which("perl")
    if perl:
        lines = ["das Rich-Text-Format", "a-b-c - x", "E-Mail-Adresse -- 3-4 Mal-"]
        out = subprocess.run([perl, "-ple", r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"],
                             input="\n".join(lines) + "\n", capture_output=True,
                             text=True, check=True)
        assert out.stdout.splitlines() == [split_compounds(line) for line in lines]


def test_compound_splitting_applies_to_both_sides():
    # The hypothesis's "E-Mail" matches the reference's "E-Mail-Adresse" only
    # once both are split into E ##AT##-##AT## Mail ...
    hyps = ["Sie schreibt ihm eine E-Mail an seine Adresse ."]
    refs = ["Sie schreibt ihm eine E-Mail-Adresse an seine Adresse ."]
    split_both = tokenized_bleu(hyps, refs).score
    hyp_tok, ref_tok = moses_tokenize(hyps), moses_tokenize(refs)
    no_split = multi_bleu_perl(hyp_tok, ref_tok)
    only_ref_split = multi_bleu_perl(hyp_tok, [split_compounds(r) for r in ref_tok])
    assert split_both == pytest.approx(
        multi_bleu_perl([split_compounds(h) for h in hyp_tok],
                        [split_compounds(r) for r in ref_tok]), abs=1e-9)
    assert split_both > no_split > 0
    assert split_both > only_ref_split
    # Identical hyphenated text scores 100.
    assert tokenized_bleu(refs * 2, refs * 2).score == pytest.approx(100.0)


def test_read_lines_and_library_errors(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"eins\r\nzwei\nDrei \xc3\xa4\n")
    assert read_lines(str(path), "translation") == ["eins", "zwei", "Drei ä"]
    with pytest.raises(BleuInputError, match="line counts differ"):
        sacre_bleu(["a"], ["a", "b"])
    with pytest.raises(BleuInputError, match="no lines"):
        tokenized_bleu([], [])


def test_cli_paths_may_start_with_a_tilde(tmp_path):
    """`--translation=~/x`: the shell leaves a `~` after `=` as it is; the CLI
    reads it as the home folder, as t2t-trainer always did."""
    # (Four words at least: a text without a 4-gram scores 0.)
    sentence = "Ein Hund läuft über die Wiese.\n"
    (tmp_path / "hyp.txt").write_text(sentence, encoding="utf-8")
    (tmp_path / "ref.txt").write_text(sentence, encoding="utf-8")
    out = t2t_bleu("--translation=~/hyp.txt", "--reference=~/ref.txt", "--json",
                   HOME=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sacrebleu"]["score"] == pytest.approx(100.0)


def test_cli_prints_both_labelled_figures(multi30k):
    hyp_path, ref_path, hypotheses, references = multi30k
    out = t2t_bleu(f"--translation={hyp_path}", f"--reference={ref_path}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"sacreBLEU (cased, 13a): {sacre_bleu(hypotheses, references).score:.2f} (")
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in lines[0]
    assert lines[1].startswith("tokenized BLEU (Moses tokenizer -l de + compound "
                               f"splitting, multi-bleu; as the paper / t2t get_ende_bleu.sh): "
                               f"{tokenized_bleu(hypotheses, references).score:.2f} (")


@pytest.mark.parametrize("case, message", [
    ("missing", "the translation file does not exist"),
    ("mismatch", "line counts differ. Received: translation lines=2, reference lines=3"),
    ("not_utf8", "the reference file is not UTF-8 text: byte 0xe4 at line 2"),
    ("no_reference_flag", "--reference=FILE is required"),
    ("directory", "cannot read the translation file"),
    # A damaged deflate stream: zlib.error, which is not an OSError.
    ("corrupt_gz", "cannot read the reference file (zlib.error: Error -3 while decompressing"),
    ("truncated_gz", "cannot read the reference file (EOFError: Compressed file ended"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, case, message):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("ein Hund\nzwei Katzen\n", encoding="utf-8")
    ref.write_text("ein Hund\nzwei Katzen\ndrei\n", encoding="utf-8")
    args = [f"--translation={hyp}", f"--reference={ref}"]
    if case == "missing":
        args[0] = f"--translation={tmp_path / 'nope.txt'}"
    elif case == "not_utf8":
        ref.write_bytes(b"ein Hund\nzwei K\xe4tzchen\n")
    elif case == "no_reference_flag":
        args = args[:1]
    elif case == "directory":
        args[0] = f"--translation={tmp_path}"
    elif case in ("corrupt_gz", "truncated_gz"):
        data = gzip.compress(b"ein Hund\nzwei Katzen\n" * 200)
        data = data[:10] + b"\xff" * 8 + data[18:] if case == "corrupt_gz" else data[:-30]
        (tmp_path / "ref.txt.gz").write_bytes(data)
        args[1] = f"--reference={tmp_path / 'ref.txt.gz'}"
    out = t2t_bleu(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("t2t-bleu: error: "), out.stderr
    assert message in lines[0], lines[0]
    assert "Traceback" not in out.stderr
