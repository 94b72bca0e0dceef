"""EVALB (COLLINS.prm) labelled bracketing scores, and the t2t-parse-eval CLI."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from t2t_revival.parsing import (
    EvalbScore, evaluate_files, normalize_tree, parse_tree, read_treebank,
    score_trees, sentence_brackets)


def _score(gold, test):
    """EVALB of one-line bracketed trees (single strings or lists)."""
    gold = [gold] if isinstance(gold, str) else gold
    test = [test] if isinstance(test, str) else test
    return score_trees([parse_tree(g) for g in gold], [parse_tree(t) for t in test])


def _f1(p, r):
    return 2 * p * r / (p + r)


# ---------------------------------------------------------------- gold vs gold


@pytest.fixture(scope="module")
def sample_trees(shared_data):
    return read_treebank(shared_data / "ptb_sample" / "combined")


def test_gold_against_gold_is_100_on_the_sample(sample_trees):
    score = score_trees(sample_trees, sample_trees)
    assert score.sentences == score.scored == 3914 and score.skipped == 0
    assert score.precision == score.recall == score.f1 == 100.0
    assert score.complete_match == 3914
    assert score.gold_brackets > 3914 * 5  # real brackets were counted


def test_raw_and_normalized_gold_have_the_same_brackets(sample_trees):
    # EVALB's own deletions (traces, function tags, outer bracket) are the
    # normalization the parser is trained on
    for raw in sample_trees:
        assert sentence_brackets(raw) == sentence_brackets(normalize_tree(raw))
    score = score_trees(sample_trees, [normalize_tree(t) for t in sample_trees])
    assert score.f1 == 100.0 and score.scored == 3914


# ---------------------------------------------------------------- hand-made pairs

THE_CAT = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"


def test_five_gold_four_test_three_match():
    # gold: S[0,6) NP[0,2) VP[2,6) PP[3,6) NP[4,6)            -> 5 brackets
    # test: S[0,6) NP[0,2) ADVP[3,6) NP[4,6)                  -> 4 brackets
    # matched: S, NP[0,2), NP[4,6)                            -> 3
    test = "(S (NP (DT The) (NN cat)) (VBD sat) (ADVP (IN on) (NP (DT the) (NN mat))) (. .))"
    score = _score(THE_CAT, test)
    assert (score.matched, score.gold_brackets, score.test_brackets) == (3, 5, 4)
    p, r = 3 / 4, 3 / 5
    assert score.precision == pytest.approx(100 * p)
    assert score.recall == pytest.approx(100 * r)
    assert score.f1 == pytest.approx(100 * _f1(p, r))  # 66.67
    assert round(score.f1, 2) == 66.67
    assert score.complete_match == 0


def test_punctuation_is_ignored():
    gold = "(S (NP (NNP John)) (VP (VBD left)) (. .))"
    # the VP takes in the final "." here: after deleting punctuation both VPs
    # span word 1 only, so S, NP, VP all match: P = R = 3/3
    score = _score(gold, "(S (NP (NNP John)) (VP (VBD left) (. .)))")
    assert (score.matched, score.gold_brackets, score.test_brackets) == (3, 3, 3)
    assert score.f1 == 100.0
    # a bracket over punctuation only spans no word: not counted at all
    score = _score(gold, "(S (NP (NNP John)) (VP (VBD left)) (X (. .) (, ,)))")
    assert (score.matched, score.test_brackets) == (3, 3)
    # quotes and colons too
    gold_q = "(S (`` ``) (NP (PRP We)) (VP (VBP win) (: --)) ('' ''))"
    score = _score(gold_q, "(S (`` ``) (NP (PRP We)) (VP (VBP win)) (: --) ('' ''))")
    assert score.f1 == 100.0


def test_advp_and_prt_are_the_same_label():
    gold = "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))"
    # S, NP, VP and PRT[2,3) = ADVP[2,3): 4 of 4
    score = _score(gold, "(S (NP (PRP He)) (VP (VBD gave) (ADVP (RP up))))")
    assert (score.matched, score.gold_brackets, score.test_brackets) == (4, 4, 4)
    # a really different label does not match: P = R = 3/4
    score = _score(gold, "(S (NP (PRP He)) (VP (VBD gave) (NP (RP up))))")
    assert score.matched == 3
    assert score.f1 == pytest.approx(100 * _f1(3 / 4, 3 / 4))


def test_function_tags_and_indices_are_stripped():
    gold = "(S-1 (NP-SBJ-2 (PRP He)) (VP (VBD left) (NP-TMP=3 (NN today))))"
    score = _score(gold, "(S (NP (PRP He)) (VP (VBD left) (NP (NN today))))")
    assert (score.matched, score.gold_brackets, score.test_brackets) == (4, 4, 4)


def test_outer_empty_bracket_is_removed_but_top_s_is_scored():
    gold = "( (S (NP (PRP He)) (VP (VBD left))) )"
    # gold brackets: S[0,2) NP[0,1) VP[1,2) -> 3 (not the label-less outer one)
    score = _score(gold, "(S (NP (PRP He)) (VP (VBD left)))")
    assert (score.matched, score.gold_brackets, score.test_brackets) == (3, 3, 3)
    # TOP is deleted as well
    assert _score(gold, "(TOP (S (NP (PRP He)) (VP (VBD left))))").f1 == 100.0
    # the S itself is scored: calling it SINV loses one bracket, P = R = 2/3
    score = _score(gold, "(SINV (NP (PRP He)) (VP (VBD left)))")
    assert score.matched == 2
    assert score.precision == pytest.approx(100 * 2 / 3)


def test_traces_and_brackets_over_only_traces_are_deleted():
    gold = ("( (S (NP-SBJ (PRP He)) (VP (VBD said) (SBAR (-NONE- 0) "
            "(S (-NONE- *T*-1)))) (. .)) )")
    score = _score(gold, "(S (NP (PRP He)) (VP (VBD said)) (. .))")
    assert (score.matched, score.gold_brackets, score.test_brackets) == (3, 3, 3)


def test_brackets_are_a_multiset():
    # gold NP[0,2) twice, test once: P = 1/1, R = 1/2
    score = _score("(NP (NP (DT the) (NN man)))", "(NP (DT the) (NN man))")
    assert (score.matched, score.gold_brackets, score.test_brackets) == (1, 2, 1)
    assert score.precision == 100.0 and score.recall == 50.0
    # and the other way: P = 1/2, R = 1/1
    score = _score("(NP (DT the) (NN man))", "(NP (NP (DT the) (NN man)))")
    assert (score.precision, score.recall) == (50.0, 100.0)


def test_length_mismatch_is_skipped_and_counted():
    first = "(S (NP (PRP He)) (VP (VBD left)))"
    second = "(S (NP (PRP She)) (VP (VBD stayed)) (. .))"
    gold, test = [first, second], [first, "(S (NP (PRP She)) (VP (VBD stayed) (RB home)))"]
    score = _score(gold, test)
    assert score.sentences == 2 and score.scored == 1
    assert score.length_mismatch == 1 and score.skipped == 1
    # only the first sentence counts: 3 of 3
    assert (score.matched, score.gold_brackets, score.test_brackets) == (3, 3, 3)
    # punctuation tagged as a word makes the lengths differ too (EVALB's rule)
    score = _score(second, "(S (NP (PRP She)) (VP (VBD stayed)) (NN .))")
    assert score.length_mismatch == 1 and score.scored == 0 and score.f1 == 0.0


def test_word_mismatch_and_empty_test_are_skipped():
    score = _score("(S (NP (PRP He)) (VP (VBD left)))", "(S (NP (PRP She)) (VP (VBD left)))")
    assert score.word_mismatch == 1 and score.scored == 0
    score = _score("(S (NP (PRP He)) (VP (VBD left)))", "(S (. .))")
    assert score.empty_test == 1 and score.scored == 0


def test_scores_are_corpus_level():
    # sentence 1: 3 of 5 gold, 4 test (above); sentence 2: 2 of 2, 2 test
    # P = (3+2)/(4+2) = 5/6, R = (3+2)/(5+2) = 5/7 (not the mean of sentence scores)
    test1 = "(S (NP (DT The) (NN cat)) (VBD sat) (ADVP (IN on) (NP (DT the) (NN mat))) (. .))"
    two = "(S (NP (PRP He)) (VBD left))"
    score = _score([THE_CAT, two], [test1, two])
    assert score.precision == pytest.approx(100 * 5 / 6)
    assert score.recall == pytest.approx(100 * 5 / 7)
    assert score.f1 == pytest.approx(100 * _f1(5 / 6, 5 / 7))


def test_score_object_reports_everything():
    score = EvalbScore(sentences=3, matched=3, gold_brackets=5, test_brackets=4,
                       length_mismatch=1, repaired=2, flat=1)
    d = score.to_dict()
    assert d["scored"] == 2 and d["skipped"] == 1 and d["repaired"] == 2
    assert d["f1"] == pytest.approx(100 * _f1(3 / 4, 3 / 5))
    assert "Bracketing FMeasure       =  66.67" in score.summary()
    assert EvalbScore().f1 == 0.0


# ---------------------------------------------------------------- files


def test_predicted_file_one_per_line_with_repairs(tmp_path, shared_data):
    gold = shared_data / "ptb_sample" / "combined" / "wsj_0001.mrg"
    trees = [normalize_tree(t) for t in read_treebank(gold)]
    predicted = tmp_path / "pred.txt"
    lines = [trees[0].to_string(), trees[1].to_string()]
    predicted.write_text("\n".join(lines) + "\n")
    assert evaluate_files(gold, predicted).f1 == 100.0
    # a missing close bracket is repaired, not an error: still 100
    predicted.write_text(lines[0][:-1] + "\n" + lines[1] + "\n")
    score = evaluate_files(gold, predicted)
    assert score.f1 == 100.0 and score.repaired == 1 and score.flat == 0
    # an empty line is a flat tree: its 9 gold brackets count against recall
    predicted.write_text(lines[0] + "\n\n")
    score = evaluate_files(gold, predicted)
    assert (score.matched, score.gold_brackets, score.test_brackets) == (11, 20, 11)
    assert score.flat == 1 and score.repaired == 1 and score.scored == 2


def test_predicted_file_of_linearized_trees(tmp_path, shared_data):
    from t2t_revival.parsing import linearize
    gold = shared_data / "ptb_sample" / "combined" / "wsj_0001.mrg"
    targets = [linearize(normalize_tree(t))[1] for t in read_treebank(gold)]
    predicted = tmp_path / "pred.txt"
    predicted.write_text("\n".join(targets) + "\n")
    score = evaluate_files(gold, predicted)
    assert score.f1 == 100.0 and score.repaired == 0 and score.scored == 2


# ---------------------------------------------------------------- the CLI


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "t2t_revival.cli.parse_eval", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_cli_prints_f1(tmp_path, shared_data):
    gold = shared_data / "ptb_sample" / "combined" / "wsj_0003.mrg"
    trees = [normalize_tree(t) for t in read_treebank(gold)]
    predicted = tmp_path / "pred.txt"
    predicted.write_text("\n".join(t.to_string() for t in trees) + "\n")
    out = _cli(f"--gold={gold}", f"--predicted={predicted}")
    assert out.returncode == 0, out.stderr
    assert "Bracketing FMeasure       = 100.00" in out.stdout
    assert f"Number of sentence        = {len(trees)}" in out.stdout
    out = _cli(f"--gold={gold}", f"--predicted={gold}", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["f1"] == 100.0 and result["sentences"] == len(trees) == result["scored"]


def test_cli_scores_a_worse_prediction_below_100(tmp_path, shared_data):
    gold = shared_data / "ptb_sample" / "combined" / "wsj_0001.mrg"
    predicted = tmp_path / "pred.txt"
    # sentence 1 flat (its 11 gold brackets lost), sentence 2 exact (9 of 9)
    predicted.write_text("\n" + normalize_tree(read_treebank(gold)[1]).to_string() + "\n")
    out = _cli(f"--gold={gold}", f"--predicted={predicted}", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["precision"] == 100.0
    assert result["recall"] == pytest.approx(100 * 9 / 20)
    assert result["flat"] == 1


@pytest.mark.parametrize("make_args, message", [
    (lambda d, g: [f"--gold={d}/nope.mrg", f"--predicted={g}"], "does not exist"),
    (lambda d, g: [f"--gold={g}", f"--predicted={d}/nope.txt"], "does not exist"),
    (lambda d, g: [f"--gold={g}", f"--predicted={d}/one.txt"], "has 1 trees but"),
    (lambda d, g: [f"--gold={d}/bad.mrg", f"--predicted={g}"], "never closed"),
    (lambda d, g: [f"--gold={g}"], "--predicted is required"),
    (lambda d, g: [f"--gold={g}", f"--predicted={g}", "--jsn"], "Unknown command line flag"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, shared_data, make_args, message):
    gold = shared_data / "ptb_sample" / "combined" / "wsj_0001.mrg"
    (tmp_path / "one.txt").write_text("(S (NP (NNP Pierre)) (VP (VBZ is)))\n")
    (tmp_path / "bad.mrg").write_text("( (S (NP (NNP Pierre)) (VP (VBZ is)) )\n")
    out = _cli(*make_args(tmp_path, gold))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("t2t-parse-eval: error:"), out.stderr
    assert message in lines[0]


def test_linearized_predictions_take_the_gold_tags(tmp_path):
    # The model tagged the full stop NN. With its own tags EVALB would keep
    # that word (only "." is deleted), the lengths would differ and the
    # sentence would be skipped; with the gold tags back, the brackets are
    # scored: S(0,3), NP(0,2), VP(2,3) on both sides -> P = R = F1 = 100.
    from t2t_revival.parsing import evaluate_files

    gold = tmp_path / "gold.trees"
    gold.write_text("(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))\n")
    predicted = tmp_path / "pred.txt"
    predicted.write_text("(S (NP DT NN )NP (VP VBD )VP NN )S\n")
    score = evaluate_files(gold, predicted)
    assert (score.scored, score.skipped, score.matched) == (1, 0, 3)
    assert score.f1 == 100.0
    # Output cut at the length limit, before any close bracket, is still
    # linearized: rebuilt over the gold words with the gold tags, and scored.
    predicted.write_text("(S (NP DT NN NN\n")
    cut = evaluate_files(gold, predicted)
    assert (cut.scored, cut.skipped, cut.repaired) == (1, 0, 1)
    # A bracketed prediction with words keeps its own tags, as in EVALB.
    predicted.write_text("(S (NP (DT The) (NN cat)) (VP (VBD sat)) (NN .))\n")
    assert evaluate_files(gold, predicted).skipped == 1
