"""Labelled bracketing precision, recall and F1 with EVALB's COLLINS.prm rules.

A pure-Python EVALB (Sekine and Collins 1997) for the settings every parsing
paper reports, those of `COLLINS.prm`:

* `LABELED 1`: a test bracket matches a gold bracket with the same label and
  the same span;
* `DELETE_LABEL TOP -NONE- , : `` '' .`: preterminals with these tags are
  deleted with their words (punctuation and empty elements do not count as
  words, so spans are over the remaining words); brackets with these labels
  are not scored; a bracket left over no word is not scored;
* function tags and indices are cut from labels at the first `-` or `=`
  (`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`), as EVALB's `modify_label` does;
* `EQ_LABEL ADVP PRT`: ADVP and PRT are the same label;
* preterminals (POS brackets) are not brackets; brackets are matched as a
  multiset of `(label, start, end)`, so `(NP (NP the man))` against
  `(NP the man)` matches one of the two NPs;
* a sentence whose gold and test differ in word count (after deletion) is an
  error ("Length unmatch"), one whose words differ is an error ("Words
  unmatch"), one whose test tree has no word is skipped; none of them counts
  in the totals;
* precision, recall and F1 are corpus-level: total matched brackets over total
  test (gold) brackets, F1 = 2PR / (P + R), in percent, like EVALB's summary.

One deliberate difference: the label-less outer bracket of `.mrg` trees,
`( (S ...) )`, is not scored (as if labelled `TOP`); EVALB as distributed would
count it as a bracket of label "" in both files. The sentence's own top
bracket (`S`) is scored.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import re
from typing import Sequence

from t2t_revival.parsing.evalb_score import EvalbScore
from t2t_revival.parsing.repair import (
    flat_tree, repair_bracketed, repair_linearized, restore_gold_tags)
from t2t_revival.parsing.repaired_tree import RepairedTree
from t2t_revival.parsing.tree import Tree
from t2t_revival.parsing.treebank import (
    cut_at_function_tag, normalize_tree, parse_tree, parse_trees, read_treebank_file)
from t2t_revival.parsing.treebank_error import TreebankError

DELETE_LABELS = frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."})
EQUIVALENT_LABELS = {"PRT": "ADVP"}  # EQ_LABEL ADVP PRT, as one canonical label

Bracket = tuple[str, int, int]  # (label, start word, end word), end exclusive


def evalb_label(label: str) -> str:
    """The label EVALB scores: cut at the first `-` or `=`, PRT read as ADVP."""
    label = cut_at_function_tag(label)
    return EQUIVALENT_LABELS.get(label, label)


def sentence_brackets(tree: Tree) -> tuple[list[str], collections.Counter]:
    """The words and the scored brackets of one tree, as EVALB sees them.

    Returns:
        words: the words left once deleted labels (punctuation, `-NONE-`) are
            removed.
        brackets: a multiset (Counter) of `(label, start, end)` over those
            words, `end` exclusive; labels through `evalb_label`.
    """
    words: list[str] = []
    brackets: collections.Counter = collections.Counter()

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            if node.label not in DELETE_LABELS:
                words.append(node.children[0])
            return
        start = len(words)
        for child in node.children:
            if isinstance(child, Tree):
                visit(child)
            else:
                words.append(child)  # a bare word: only in hand-built trees
        label = evalb_label(node.label)
        if len(words) > start and label and label not in DELETE_LABELS:
            brackets[(label, start, len(words))] += 1

    visit(tree)
    return words, brackets


def score_trees(gold: Sequence[Tree], test: Sequence[Tree]) -> EvalbScore:
    """EVALB over aligned lists of gold and test trees.

    Raises:
        TreebankError: the lists differ in length.
    """
    if len(gold) != len(test):
        raise TreebankError(
            f"There are {len(test)} test trees for {len(gold)} gold trees; pass one "
            f"test tree per gold tree, in the same order. "
            f"Received: len(gold)={len(gold)}, len(test)={len(test)}")
    counts: collections.Counter = collections.Counter()
    for gold_tree, test_tree in zip(gold, test):
        counts["sentences"] += 1
        gold_words, gold_brackets = sentence_brackets(gold_tree)
        test_words, test_brackets = sentence_brackets(test_tree)
        if not test_words:
            counts["empty_test"] += 1
        elif len(gold_words) != len(test_words):
            counts["length_mismatch"] += 1
        elif gold_words != test_words:
            counts["word_mismatch"] += 1
        else:
            matched = sum((gold_brackets & test_brackets).values())
            n_gold, n_test = sum(gold_brackets.values()), sum(test_brackets.values())
            counts["matched"] += matched
            counts["gold_brackets"] += n_gold
            counts["test_brackets"] += n_test
            counts["complete_match"] += int(matched == n_gold == n_test)
    return EvalbScore(**counts)


_LINEARIZED_CLOSE = re.compile(r"(?:^|\s)\)[^\s()]")
# A preterminal with its word, `(NN board)`: only bracketed trees with words
# have one; linearized output (even cut before its first close) has none.
_PRETERMINAL_WITH_WORD = re.compile(r"\([^\s()]+\s+[^\s()]+\)")


def predicted_tree(line: str, words: Sequence[str],
                   gold_tags: Sequence[str] | None = None) -> RepairedTree:
    """One line of predicted output as a tree, repaired if malformed.

    Args:
        line: a bracketed tree with words (`(S (NP (NNP Ms.) ...))`), or a
            linearized tree (`(S (NP NNP NNP )NP ... )S`, recognised by its
            labelled close brackets, or, when cut before any, by having no
            `(TAG word)` preterminal), or empty.
        words: the sentence's words (the source), to rebuild linearized output
            and to build a flat tree when nothing is usable.
        gold_tags: the gold POS tags of `words`; a tree rebuilt from
            linearized (seq2seq) or empty output takes them
            (`restore_gold_tags`). A bracketed tree with words keeps its own.
    """
    if not line.strip():
        tree = flat_tree(words)
        if gold_tags is not None:
            restore_gold_tags(tree, gold_tags)
        return RepairedTree(tree, {"flat": 1})
    if _LINEARIZED_CLOSE.search(line) or not _PRETERMINAL_WITH_WORD.search(line):
        result = repair_linearized(line, words)
        if gold_tags is not None:
            restore_gold_tags(result.tree, gold_tags)
        return result
    try:
        return RepairedTree(parse_tree(line))
    except TreebankError:
        return repair_bracketed(line, words)


def _read_text(path: pathlib.Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TreebankError(f"The {what} file {path} does not exist; check the path. "
                            f"Received: {what}={path}") from None
    except IsADirectoryError:
        raise TreebankError(f"The {what} path {path} is a folder; pass a file of "
                            f"trees. Received: {what}={path}") from None
    except UnicodeDecodeError as e:
        raise TreebankError(f"The {what} file {path} is not UTF-8 text ({e.reason} at "
                            f"byte {e.start}). Received: {what}={path}") from None


def evaluate_files(gold_path: str | os.PathLike,
                   predicted_path: str | os.PathLike) -> EvalbScore:
    """EVALB of a file of predicted trees against a file of gold trees.

    Both files may be `.mrg` files (trees over several lines) or hold one
    bracketed tree per line; the format is detected. The gold file must be
    well formed. When the predicted file does not read as exactly one
    well-formed tree per gold tree, it is read one tree per line: a malformed
    line is repaired (`repair_bracketed`), a linearized line is rebuilt over
    the gold sentence's words (`repair_linearized`), an empty line is a flat
    tree; each is counted in `repaired` (and `flat`).

    Raises:
        TreebankError: a missing or unreadable file, a gold file that is not
            well formed or holds no tree, or a different number of trees.
    """
    gold_path, predicted_path = pathlib.Path(gold_path), pathlib.Path(predicted_path)
    gold = read_treebank_file(gold_path)
    if not gold:
        raise TreebankError(f"The gold file {gold_path} holds no tree; pass a file of "
                            f"bracketed trees. Received: gold={gold_path}")
    text = _read_text(predicted_path, "predicted")
    try:
        test = parse_trees(text, source=str(predicted_path))
    except TreebankError:
        test = None
    if test is not None and len(test) == len(gold):
        return score_trees(gold, test)

    lines = text.splitlines()
    while len(lines) > len(gold) and not lines[-1].strip():
        lines.pop()  # blank lines at the end; an empty last prediction is kept
    if len(lines) != len(gold):
        found = (f"{len(test)} trees" if test is not None
                 else f"{len(lines)} lines (it is not well formed, so it is read one "
                      f"tree per line)")
        raise TreebankError(
            f"The predicted file {predicted_path} has {found} but the gold file "
            f"{gold_path} has {len(gold)} trees; write one predicted tree per gold "
            f"tree, in order. Received: predicted={predicted_path}")
    repaired = flat = 0
    test = []
    for line, gold_tree in zip(lines, gold):
        normalized = normalize_tree(gold_tree)
        words = normalized.words() if normalized is not None else []
        tags = normalized.tags() if normalized is not None else []
        result = predicted_tree(line, words, gold_tags=tags)
        repaired += int(result.repaired)
        flat += int("flat" in result.repairs)
        test.append(result.tree)
    return dataclasses.replace(score_trees(gold, test), repaired=repaired, flat=flat)
