"""Treebank reading, Vinyals linearization and the repair of malformed parser output."""

import random

import pytest

from t2t_revival.parsing import (
    Tree, TreebankError, delinearize, linearize, normalize_tree, parse_tree,
    parse_trees, read_parsing_examples, read_treebank, read_treebank_file,
    repair_bracketed, repair_linearized, strip_function_tags, treebank_files)

WSJ_0001_FIRST = (
    "(S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) "
    "(JJ old)) (, ,)) (VP (MD will) (VP (VB join) (NP (DT the) (NN board)) "
    "(PP (IN as) (NP (DT a) (JJ nonexecutive) (NN director))) "
    "(NP (NNP Nov.) (CD 29)))) (. .))")


def _well_formed(tree):
    """Every node is a POS node over one word or a non-empty bracket of brackets."""
    for node in tree.subtrees():
        if node.is_preterminal:
            continue
        if not node.children or not all(isinstance(c, Tree) for c in node.children):
            return False
    return True


# ---------------------------------------------------------------- the sample


@pytest.fixture(scope="module")
def sample_trees(shared_data):
    return read_treebank(shared_data / "ptb_sample" / "combined")


def test_sample_reads_3914_trees_from_199_files(shared_data, sample_trees):
    files = treebank_files(shared_data / "ptb_sample" / "combined")
    assert len(files) == 199 and files[0].name == "wsj_0001.mrg"
    assert len(sample_trees) == 3914
    # every tree has the empty outer bracket of .mrg files
    assert all(t.label == "" and len(t.children) == 1 for t in sample_trees)


def test_linearize_then_delinearize_gives_back_all_3914_trees(sample_trees):
    count = 0
    for raw in sample_trees:
        gold = normalize_tree(raw)
        source, target = linearize(gold)
        assert source.split() == gold.words()
        rebuilt = delinearize(target, source)
        assert rebuilt == gold, (gold, rebuilt)
        assert not repair_linearized(target, source).repaired
        count += 1
    assert count == 3914


def test_normalized_sample_has_no_traces_tags_or_empty_brackets(sample_trees):
    for raw in sample_trees[:500]:
        tree = normalize_tree(raw)
        assert _well_formed(tree)
        for node in tree.subtrees():
            assert node.label != "-NONE-"
            if not node.is_preterminal:
                assert node.label and "-" not in node.label and "=" not in node.label
        # the words are the treebank words minus the empty elements
        assert tree.words() == [w for w, t in zip(raw.words(), raw.tags()) if t != "-NONE-"]


def test_wsj_0001_first_sentence(shared_data):
    trees = read_treebank_file(shared_data / "ptb_sample" / "combined" / "wsj_0001.mrg")
    assert len(trees) == 2
    gold = normalize_tree(trees[0])
    assert gold.to_string() == WSJ_0001_FIRST
    source, target = linearize(gold)
    assert source == ("Pierre Vinken , 61 years old , will join the board as a "
                      "nonexecutive director Nov. 29 .")
    assert target == ("(S (NP (NP NNP NNP )NP , (ADJP (NP CD NNS )NP JJ )ADJP , )NP "
                      "(VP MD (VP VB (NP DT NN )NP (PP IN (NP DT JJ NN )NP )PP "
                      "(NP NNP CD )NP )VP )VP . )S")


def test_read_parsing_examples_of_a_file(shared_data):
    pairs = read_parsing_examples(shared_data / "ptb_sample" / "combined" / "wsj_0001.mrg")
    assert len(pairs) == 2
    assert pairs[1][0].startswith("Mr. Vinken is chairman of Elsevier N.V. ,")
    assert pairs[1][1].startswith("(S (NP NNP NNP )NP (VP VBZ (NP (NP NN )NP")


# ---------------------------------------------------------------- reading


def test_layout_does_not_matter():
    one_line = "( (S (NP-SBJ (NNP Mr.) (NNP Vinken)) (VP (VBZ is) (NP-PRD (NN chairman))) (. .)) )"
    spread = "\n( (S \n    (NP-SBJ (NNP Mr.)\t(NNP Vinken) )\r\n (VP (VBZ is)\n\n (NP-PRD (NN chairman) )) (. .) ))\n"
    assert parse_trees(one_line) == parse_trees(spread)
    assert parse_trees(one_line + "\n" + spread + one_line) == parse_trees(one_line) * 3


def test_normalize_removes_traces_tags_indices_and_outer_bracket():
    raw = parse_tree(
        "( (S (S-TPC-1 (NP-SBJ (PRP We)) (VP (VBP win))) (, ,) (NP-SBJ=2 (PRP he)) "
        "(VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) (. .)) )")
    assert normalize_tree(raw).to_string() == (
        "(S (S (NP (PRP We)) (VP (VBP win))) (, ,) (NP (PRP he)) (VP (VBD said)) (. .))")
    # the input is not changed
    assert raw.children[0].label == "S"
    assert raw.children[0].children[0].label == "S-TPC-1"


@pytest.mark.parametrize("label, stripped", [
    ("NP-SBJ-1", "NP"), ("PP-LOC=2", "PP"), ("NP=3", "NP"), ("S-TPC-1", "S"),
    ("NP", "NP"), ("-NONE-", "-NONE-"), ("-LRB-", "-LRB-"), ("PRP$", "PRP$"),
])
def test_strip_function_tags(label, stripped):
    assert strip_function_tags(label) == stripped


@pytest.mark.parametrize("text, what", [
    ("( (S (NP (NN a)) (VP (VBZ is))", "never closed"),
    ("( (S (NP (NN a)) ) ) )", "never opened"),
    ("( (S (NP (NN a)) ) )\nstray ( (S (NN b)) )", "'stray' is outside"),
    ("( (S (NP ) (NN a)) )", "empty"),
    ("( (S (NP the (NN man))) )", "mixes words and brackets"),
])
def test_corrupt_file_is_a_user_error_naming_the_file(tmp_path, text, what):
    path = tmp_path / "wsj_9999.mrg"
    path.write_text("( (S (NN ok)) )\n" + text)
    with pytest.raises(TreebankError) as e:
        read_treebank_file(path)
    message = str(e.value)
    assert str(path) in message and what in message and "line" in message
    assert message.endswith(f"Received: source={path}")


def test_missing_file_and_empty_folder_are_user_errors(tmp_path):
    with pytest.raises(TreebankError, match="does not exist"):
        read_treebank(tmp_path / "nope.mrg")
    with pytest.raises(TreebankError, match="holds no .mrg files"):
        read_treebank(tmp_path)


# ---------------------------------------------------------------- delinearize / repair

WORDS = "John runs .".split()
GOOD = "(S (NP NNP )NP (VP VBZ )VP . )S"
GOOD_TREE = "(S (NP (NNP John)) (VP (VBZ runs)) (. .))"


def test_delinearize_well_formed():
    assert delinearize(GOOD, WORDS).to_string() == GOOD_TREE
    assert delinearize(GOOD.split(), " ".join(WORDS)).to_string() == GOOD_TREE


@pytest.mark.parametrize("target", [
    GOOD + " )S", "(S (NP NNP )NP (VP VBZ )VP .", "(S (NP NNP )VP (VP VBZ )NP . )S",
    "(S (NP NNP )NP (VP VBZ )VP )S", "(S (NP NNP NNP )NP (VP VBZ )VP . )S", "",
])
def test_delinearize_refuses_malformed_output(target):
    with pytest.raises(TreebankError, match="repair_linearized"):
        delinearize(target, WORDS)


@pytest.mark.parametrize("target, words, tree, repairs", [
    # well formed: nothing to repair
    (GOOD, WORDS, GOOD_TREE, {}),
    # an extra close bracket is dropped
    (GOOD + " )S", WORDS, GOOD_TREE, {"extra_close": 1}),
    (")S " + GOOD, WORDS, GOOD_TREE, {"extra_close": 1}),
    # a missing close bracket is added at the end
    ("(S (NP NNP )NP (VP VBZ )VP .", WORDS, GOOD_TREE, {"missing_close": 1}),
    # a close closes the innermost open bracket, whatever its label
    ("(S (NP NNP )VP (VP VBZ )NP . )S", WORDS, GOOD_TREE, {"close_label": 2}),
    ("(S (NP NNP (VP VBZ )VP . )S", WORDS,
     "(S (NP (NNP John) (VP (VBZ runs)) (. .)))", {"close_label": 1, "missing_close": 1}),
    # too many POS leaves: the extra ones (from the end) are dropped ...
    ("(S (NP NNP NNP )NP (VP VBZ )VP . )S", WORDS,
     "(S (NP (NNP John) (NNP runs)) (VP (VBZ .)))",
     {"extra_leaves": 1}),
    # ... and a bracket left empty by that is removed
    ("(S (NP NNP )NP (VP VBZ )VP . (NP NN NNS )NP )S", WORDS, GOOD_TREE,
     {"extra_leaves": 2, "empty_constituent": 1}),
    # too few POS leaves: the words left get leaves at the end of the root
    ("(S (NP NNP )NP (VP VBZ )VP )S", "John runs fast".split(),
     "(S (NP (NNP John)) (VP (VBZ runs)) (XX fast))", {"missing_leaves": 1}),
    # ... punctuation gets its own tag, so EVALB still deletes it
    ("(S (NP NNP )NP (VP VBZ )VP )S", WORDS, GOOD_TREE, {"missing_leaves": 1}),
    # empty output: a flat tree over the words
    ("", WORDS, "(TOP (XX John) (XX runs) (. .))", {"flat": 1}),
    # brackets over nothing are removed
    ("(S (NP )NP (NP NNP )NP (VP VBZ (PP )PP )VP . )S", WORDS, GOOD_TREE,
     {"empty_constituent": 2}),
    # several top-level pieces are wrapped in TOP (which EVALB does not score)
    ("(NP NNP )NP (VP VBZ )VP .", WORDS,
     "(TOP (NP (NNP John)) (VP (VBZ runs)) (. .))", {"root_added": 1}),
    # nothing but closes
    (")S )NP", WORDS, "(TOP (XX John) (XX runs) (. .))",
     {"extra_close": 2, "root_added": 1, "missing_leaves": 3}),
    # an open bracket with no label is labelled X; a bare close closes it
    ("( NNP VBZ . )", WORDS, "(X (NNP John) (VBZ runs) (. .))", {"unlabelled_open": 1}),
    ("( NNP VBZ . )S", WORDS, "(X (NNP John) (VBZ runs) (. .))",
     {"unlabelled_open": 1, "close_label": 1}),
])
def test_repair_linearized(target, words, tree, repairs):
    result = repair_linearized(target, words)
    assert result.tree.to_string() == tree
    assert result.repairs == repairs
    assert result.repaired == bool(repairs)
    assert result.tree.words() == list(words)
    assert _well_formed(result.tree)


def test_repair_never_fails_and_keeps_exactly_the_words():
    rng = random.Random(0)
    alphabet = ["(S", ")S", "(NP", ")NP", "(VP", ")VP", "(", ")", "NN", "VBZ", ".", "DT"]
    for _ in range(2000):
        target = " ".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 15)))
        words = [f"w{i}" for i in range(rng.randrange(0, 6))]
        result = repair_linearized(target, words)
        assert result.tree.words() == words, target
        assert _well_formed(result.tree) or not words, target
        # a repaired tree linearizes to a well-formed target for the same words
        if words:
            _, fixed = linearize(result.tree)
            assert not repair_linearized(fixed, words).repaired


@pytest.mark.parametrize("text, tree, repairs", [
    ("(S (NP (NNP John)) (VP (VBZ runs)) (. .))", GOOD_TREE, {}),
    ("(S (NP (NNP John)) (VP (VBZ runs)) (. .)", GOOD_TREE, {"missing_close": 1}),
    ("(S (NP (NNP John))) (VP (VBZ runs)) (. .))",
     "(TOP (S (NP (NNP John))) (VP (VBZ runs)) (. .))", {"extra_close": 1, "root_added": 1}),
    ("(S (NP (NNP John)) runs (. .))",
     "(S (NP (NNP John)) (XX runs) (. .))", {"stray_words": 1}),
    ("(S (NP John runs) (. .))",
     "(S (NP (XX John) (XX runs)) (. .))", {"stray_words": 2}),
    ("(S (NP ) (NP (NNP John)) (VP (VBZ runs)) (. .))", GOOD_TREE, {"empty_constituent": 1}),
    (") ) (", "(TOP (XX John) (XX runs) (. .))", {"flat": 1}),
])
def test_repair_bracketed(text, tree, repairs):
    result = repair_bracketed(text, WORDS)
    assert result.tree.to_string() == tree
    assert result.repairs == repairs
