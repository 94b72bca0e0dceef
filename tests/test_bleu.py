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

from conftest import one_line_error, run_cli
from t2t_revival.metrics import (BleuInputError, bleu_tokenize, moses_tokenize, read_lines,
                                 sacre_bleu, split_compounds, tokenized_bleu)
from t2t_revival.metrics.t2t_bleu import t2t_bleu as t2t_figure

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


def t2t_bleu(*args):
    """`t2t-bleu ARGS`, run in this process (`run_cli`: its output, files and
    exit status are the subject here, not a fresh process's start)."""
    return run_cli("bleu", *args)


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


def test_cli_paths_may_start_with_a_tilde(tmp_path, monkeypatch):
    """`--translation=~/x`: the shell leaves a `~` after `=` as it is; the CLI
    reads it as the home folder, as t2t-trainer always did."""
    # (Four words at least: a text without a 4-gram scores 0.)
    sentence = "Ein Hund läuft über die Wiese.\n"
    (tmp_path / "hyp.txt").write_text(sentence, encoding="utf-8")
    (tmp_path / "ref.txt").write_text(sentence, encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path))
    out = t2t_bleu("--translation=~/hyp.txt", "--reference=~/ref.txt", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sacrebleu"]["score"] == pytest.approx(100.0)


def test_cli_prints_both_labelled_figures(multi30k):
    hyp_path, ref_path, hypotheses, references = multi30k
    out = t2t_bleu(f"--translation={hyp_path}", f"--reference={ref_path}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # tensor2tensor's two (below) on lines 3 and 4, then chrF2, chrF2++ and TER
    # (test_chrf_and_ter_equal_the_sacrebleu_command_line_with_2_references).
    assert len(lines) == 7
    assert [line.split(":")[0] for line in lines[4:]] == [
        "chrF2 (sacreBLEU)", "chrF2++ (sacreBLEU)", "TER (sacreBLEU, lower is better)"]
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
    # A second reference (--reference repeated or comma-separated): named.
    ("second_mismatch", "the translation {hyp} and the reference {ref2} must have one line "
                        "per sentence, aligned; their line counts differ. Received: "
                        "translation lines=2, reference lines=1"),
    ("second_missing", "the reference file does not exist; pass the path of a text file, "
                       "one sentence a line. Received: reference='{nope}'"),
    ("second_not_utf8", "the reference file is not UTF-8 text: byte 0xe4 at line 2 cannot be "
                        "decoded; convert it (e.g. iconv -t UTF-8). Received: "
                        "reference='{ref2}'"),
    ("two_references_t2t_mode", "--translations_dir gives tensor2tensor's BLEU, which takes "
                                "one reference"),
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
    elif case.startswith("second_"):
        ref.write_text("ein Hund\nzwei Katzen\n", encoding="utf-8")
        ref2 = tmp_path / "ref2.txt"
        ref2.write_bytes({"second_mismatch": b"ein Hund\n", "second_missing": b"",
                          "second_not_utf8": b"ein Hund\nzwei K\xe4tzchen\n"}[case])
        second = str(tmp_path / "nope.txt") if case == "second_missing" else str(ref2)
        args += [f"--reference={second}"] if case == "second_mismatch" else []
        args[1] += "" if case == "second_mismatch" else f",{second}"
    elif case == "two_references_t2t_mode":
        args = [f"--translations_dir={tmp_path}", f"--event_dir={tmp_path / 'events'}",
                f"--reference={ref},{ref}"]
    elif case in ("corrupt_gz", "truncated_gz"):
        data = gzip.compress(b"ein Hund\nzwei Katzen\n" * 200)
        data = data[:10] + b"\xff" * 8 + data[18:] if case == "corrupt_gz" else data[:-30]
        (tmp_path / "ref.txt.gz").write_bytes(data)
        args[1] = f"--reference={tmp_path / 'ref.txt.gz'}"
    out = t2t_bleu(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("t2t-bleu: error: "), out.stderr
    assert message.format(hyp=hyp, ref2=tmp_path / "ref2.txt",
                          nope=tmp_path / "nope.txt") in lines[0], lines[0]
    assert "Traceback" not in out.stderr


# ---- tensor2tensor's BLEU_uncased / BLEU_cased (its own bleu_hook, test-only) ----

def second_system(lines):
    """Another imperfect "translation": case changed, punctuation and numbers touched."""
    out = []
    for i, line in enumerate(lines):
        if i % 3 == 0:
            line = line.lower()
        if i % 4 == 1:
            line = line.replace(",", "").replace("-", " - ")
        if i % 6 == 2:
            line = line.replace("1", "7").replace(".", " .")
        if i % 9 == 4:
            line = line.upper()
        out.append(line)
    return out


def newstest_systems(shared_data, folder, lines=None):
    """[(translation path, reference path)]: two systems each on newstest2014 De
    and Fr (its first `lines` lines, or all)."""
    pairs = []
    for pair, language in (("en-de", "de"), ("en-fr", "fr")):
        reference = shared_data / "wmt14" / f"newstest2014.{pair}" / f"newstest2014.{language}"
        references = reference.read_text(encoding="utf-8").splitlines()[:lines]
        if lines:
            reference = folder / f"reference.{language}"
            reference.write_text("\n".join(references) + "\n", encoding="utf-8")
        for name, system in (("perturbed", perturb), ("recased", second_system)):
            path = folder / f"{name}.{language}"
            path.write_text("\n".join(system(references)) + "\n", encoding="utf-8")
            pairs.append((str(path), str(reference)))
    return pairs


@pytest.fixture(scope="module")
def newstest(shared_data, tmp_path_factory):
    """The systems on newstest2014's first 400 lines (tensor2tensor's own
    bleu_hook takes about 7 s a thousand lines on a slow CPU)."""
    return newstest_systems(shared_data, tmp_path_factory.mktemp("newstest"), 400)


def test_t2t_figures_equal_tensor2tensors_bleu_hook(newstest):
    assert_t2t_figures_equal_bleu_hook(newstest)


@pytest.mark.slow
def test_t2t_figures_equal_tensor2tensors_bleu_hook_on_whole_newstest(shared_data, tmp_path):
    assert_t2t_figures_equal_bleu_hook(newstest_systems(shared_data, tmp_path))


def assert_t2t_figures_equal_bleu_hook(systems):
    from t2t_reference import bleu_hook

    hook = bleu_hook()
    for translation, reference in systems:
        hypotheses, references = read_lines(translation, "t"), read_lines(reference, "r")
        for case_sensitive in (False, True):
            ours = t2t_figure(hypotheses, references, case_sensitive)
            theirs = 100 * hook.bleu_wrapper(reference, translation, case_sensitive)
            assert ours.score == float(theirs), (translation, case_sensitive)
            assert 10 < ours.score < 99
        if "recased" in translation:
            assert (t2t_figure(hypotheses, references, False).score
                    > t2t_figure(hypotheses, references, True).score)
    # Orders with no match (its smoothing), an empty translation, a longer one.
    for hyp, ref in ((["a b c d"], ["a b x d"]), ([""], ["a b"]),
                     (["1,000.5 $ Ünïcode—dash"], ["1,000.5$ ünïcode - dash"])):
        theirs = hook.compute_bleu([hook.bleu_tokenize(r) for r in ref],
                                   [hook.bleu_tokenize(h) for h in hyp])
        assert t2t_figure(hyp, ref, True).score == float(100 * theirs)
    for line in ("Hello, world 3.5.", "«Ça» coûte 5€, n'est-ce pas?", "x^2 + y_1 = 10%"):
        assert bleu_tokenize(line) == hook.bleu_tokenize(line)


def test_cli_prints_t2t_lines_as_t2t_bleu_did(newstest):
    translation, reference = newstest[0]
    hypotheses, references = read_lines(translation, "t"), read_lines(reference, "r")
    out = t2t_bleu(f"--translation={translation}", f"--reference={reference}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[2:4] == ["BLEU_uncased = %6.2f" % t2t_figure(hypotheses, references, False).score,
                          "BLEU_cased = %6.2f" % t2t_figure(hypotheses, references, True).score]
    out = t2t_bleu(f"--translation={translation}", f"--reference={reference}",
                   "--bleu_variant=cased", "--json")
    assert set(json.loads(out.stdout)) == {"sacrebleu", "tokenized_bleu", "BLEU_cased",
                                           "chrf", "chrf++", "ter"}


def test_cli_translations_dir_writes_t2t_events(tmp_path, multi30k):
    import tensorflow as tf

    hyp_path, ref_path, hypotheses, references = multi30k
    folder, events = tmp_path / "translations", tmp_path / "events"
    folder.mkdir()
    for steps, system in ((1000, second_system), (2000, perturb)):
        (folder / f"test.de-{steps}").write_text("\n".join(system(references)) + "\n",
                                                 encoding="utf-8")
    (folder / "notes-x").write_text("not a step file\n")
    out = t2t_bleu(f"--translations_dir={folder}", f"--reference={ref_path}",
                   f"--event_dir={events}", "--tag_suffix=_beam4")
    assert out.returncode == 0, out.stderr
    assert [line.split(":")[0] for line in out.stdout.splitlines()] == ["step 1000", "step 2000"]
    assert (events / "last_evaluated_step.txt").read_text() == "2000\n"
    logged = {}
    for path in events.glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                logged[(event.step, value.tag)] = value.simple_value
    expected = t2t_figure(perturb(references), references, True).score
    assert logged[(2000, "BLEU_cased_beam4")] == pytest.approx(expected, abs=1e-4)
    assert logged[(0, "BLEU_uncased_beam4")] == 0.0
    assert set(logged) == {(s, t + "_beam4") for s in (0, 1000, 2000)
                           for t in ("BLEU_uncased", "BLEU_cased")}
    # Again: it starts at the last evaluated step (as tensor2tensor's: steps >= it).
    again = t2t_bleu(f"--translations_dir={folder}", f"--reference={ref_path}",
                     f"--event_dir={events}")
    assert again.returncode == 0 and again.stdout.startswith("step 2000: "), again.stderr
    missing = t2t_bleu(f"--translations_dir={folder}", f"--reference={ref_path}")
    assert missing.returncode == 2 and "needs --event_dir" in missing.stderr


def test_cli_translations_dir_with_nothing_to_score_is_one_error(tmp_path):
    """Issue 77, part 6: a --translations_dir without translations exited 0
    saying nothing; now one line, exit status 2, and no event file."""
    folder, events, ref = tmp_path / "translations", tmp_path / "events", tmp_path / "ref.de"
    folder.mkdir()
    ref.write_text("ein Hund\n", encoding="utf-8")
    (folder / "notes.txt").write_text("not a step file\n")
    out = t2t_bleu(f"--translations_dir={folder}", f"--reference={ref}", f"--event_dir={events}")
    one_line_error(out, "t2t-bleu", f"no translations to score in {folder}: tensor2tensor's "
                                    "mode scores the files named <name>-<steps> there")
    assert not events.exists() or not list(events.iterdir())
    (folder / "test.de-1000").write_text("ein Hund\n", encoding="utf-8")
    out = t2t_bleu(f"--translations_dir={folder}", f"--reference={ref}",
                   f"--event_dir={events}", "--min_steps=2000")
    one_line_error(out, "t2t-bleu", f"no translation of 2000 steps or more in {folder}: its "
                                    "step files go up to step 1000")
    assert not events.exists() or not list(events.iterdir())


# ---- chrF, chrF++, TER and several references (sacreBLEU's own CLI the oracle) ----

def two_reference_files(systems):
    """(translation, [reference 1, reference 2]) of the newstest2014 German
    files of `newstest_systems`: the human reference scored as the
    translation, against the two systems made from it (perturbed, recased)
    as the references. All real newstest text; each system changes other
    sentences, so either reference matches a sentence best, and a figure
    that took only one reference would differ."""
    reference, perturbed, recased = (next(r for _, r in systems if r.endswith(".de")),
                                     *[p for p, _ in systems if p.endswith(".de")])
    return reference, [perturbed, recased]


def sacrebleu_cli(translation, references, *options):
    """{metric name: its JSON} as the `sacrebleu` command line prints them."""
    out = subprocess.run([SACREBLEU_CLI, *references, "-i", translation, "-w", "4", *options],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    return {r["name"]: r for r in (results if isinstance(results, list) else [results])}


def multi_bleu_perl_references(hypotheses, streams):
    """multi-bleu.perl's counting with several references: each n-gram clipped
    by its count in the reference that has most of it; the closest reference
    length, the shorter on a tie (its $closest_length)."""
    correct, total, hyp_len, ref_len = [0] * 5, [0] * 5, 0, 0
    for hyp, refs in zip(hypotheses, zip(*streams)):
        words, ref_words = hyp.split(), [r.split() for r in refs]
        hyp_len += len(words)
        ref_len += min((abs(len(r) - len(words)), len(r)) for r in ref_words)[1]
        for n in range(1, 5):
            ngrams = collections.Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
            most = collections.Counter()
            for r in ref_words:
                most |= collections.Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            total[n] += sum(ngrams.values())
            correct[n] += sum(min(c, most[g]) for g, c in ngrams.items())
    bp = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    return 100 * bp * math.exp(sum(math.log(correct[n] / total[n]) for n in range(1, 5)) / 4)


def assert_figures_equal_the_sacrebleu_cli(translation, references):
    """t2t-bleu's sacreBLEU, chrF2, chrF2++ and TER with 2 references, the
    flag repeated and comma-separated, equal `sacrebleu REF1 REF2 -i HYP -m
    bleu chrf ter` (and `--chrf-word-order 2`), signatures included."""
    from t2t_revival.metrics import chrf, ter

    expected = sacrebleu_cli(translation, references, "-m", "bleu", "chrf", "ter")
    expected.update(sacrebleu_cli(translation, references, "-m", "chrf",
                                  "--chrf-word-order", "2"))
    repeated = t2t_bleu(f"--translation={translation}",
                        *[f"--reference={r}" for r in references], "--json")
    assert repeated.returncode == 0, repeated.stderr
    ours = json.loads(repeated.stdout)
    for key, name in (("chrf", "chrF2"), ("chrf++", "chrF2++"), ("ter", "TER"),
                      ("sacrebleu", "BLEU")):
        assert round(ours[key]["score"], 4) == pytest.approx(expected[name]["score"],
                                                             abs=1e-4), key
        assert ours[key]["signature"] == expected[name]["signature"], key
        assert "nrefs:2|" in ours[key]["signature"]
    assert ours["chrf"]["name"] == "chrF2" and ours["ter"]["name"] == "TER"
    assert 0 < ours["ter"]["score"] and 0 < ours["chrf++"]["score"] < ours["chrf"]["score"] < 100
    # Both references count: each alone gives a worse figure than the two.
    hypotheses = read_lines(translation, "t")
    streams = [read_lines(r, "r") for r in references]
    for stream in streams:
        assert chrf(hypotheses, stream).score < ours["chrf"]["score"] - 0.1
        assert ter(hypotheses, stream).score > ours["ter"]["score"] + 0.1
    # The paper's tokenized BLEU takes them as multi-bleu.perl does.
    hyp = [split_compounds(line) for line in moses_tokenize(hypotheses, "de")]
    refs = [[split_compounds(line) for line in moses_tokenize(s, "de")] for s in streams]
    assert ours["tokenized_bleu"]["score"] == pytest.approx(
        multi_bleu_perl_references(hyp, refs), abs=1e-9)
    # tensor2tensor's figure takes one reference: the first, and says so.
    assert ours["BLEU_cased"]["score"] == t2t_figure(hypotheses, streams[0], True).score
    assert ours["BLEU_cased"]["signature"].endswith("the first of 2 references only")
    # Comma-separated, as text: the same figures on the lines t2t-bleu adds.
    text = t2t_bleu(f"--translation={translation}", f"--reference={','.join(references)}")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[4:] == [
        f"chrF2 (sacreBLEU): {ours['chrf']['score']:.2f} | {expected['chrF2']['signature']}",
        f"chrF2++ (sacreBLEU): {ours['chrf++']['score']:.2f} | "
        f"{expected['chrF2++']['signature']}",
        f"TER (sacreBLEU, lower is better): {ours['ter']['score']:.2f} | "
        f"{expected['TER']['signature']}"]


def test_chrf_and_ter_equal_the_sacrebleu_command_line_with_2_references(newstest):
    assert_figures_equal_the_sacrebleu_cli(*two_reference_files(newstest))


@pytest.mark.slow
def test_chrf_and_ter_equal_the_sacrebleu_command_line_on_whole_newstest(shared_data,
                                                                         tmp_path):
    assert_figures_equal_the_sacrebleu_cli(
        *two_reference_files(newstest_systems(shared_data, tmp_path)))


def test_one_reference_gives_the_same_chrf_as_the_sacrebleu_command_line(multi30k):
    hyp_path, ref_path, hypotheses, references = multi30k
    from t2t_revival.metrics import chrf_ter_scores

    expected = sacrebleu_cli(hyp_path, [ref_path], "-m", "chrf", "ter")
    ours = chrf_ter_scores(hypotheses, references)
    assert round(ours["chrf"].score, 4) == pytest.approx(expected["chrF2"]["score"], abs=1e-4)
    assert round(ours["ter"].score, 4) == pytest.approx(expected["TER"]["score"], abs=1e-4)
    assert "nrefs:1|" in ours["chrf"].signature
