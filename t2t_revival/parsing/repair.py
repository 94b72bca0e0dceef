"""Turning parser output, well-formed or not, into a tree over the input words.

Two kinds of output are read:

* linearized trees (`repair_linearized`), the model's target format:
  `(S (NP NNP NNP )NP (VP VBZ ... )VP . )S` (see `linearize.py`);
* bracketed trees with words (`repair_bracketed`), as in a file of predicted
  trees: `(S (NP (NNP Ms.) (NNP Haag)) (VP ...))`.

Neither function raises: malformed output is repaired, and each repair is
counted in the returned `RepairedTree.repairs` (the kinds are listed there).
The repairs, in order, for linearized output (empty output is a flat tree
over the words, `flat_tree`, counted as `flat`):

1. read left to right with a stack: `(L` opens a bracket, `)L` closes the
   innermost open one (a different `L` is a `close_label` repair; the open
   label is kept), a close with nothing open is dropped (`extra_close`),
   any other token is a POS leaf; brackets still open at the end are closed
   (`missing_close`);
2. POS leaves beyond the number of words are dropped, from the end
   (`extra_leaves`);
3. brackets over no POS leaf are removed (`empty_constituent`);
4. unless what is left is one bracket over everything, it is wrapped in a
   `TOP` bracket (`root_added`; EVALB deletes the label `TOP`, so the
   wrapper is never scored);
5. words without a leaf get one, attached at the end of the root
   (`missing_leaves`), tagged by `guess_tag`: punctuation gets its Penn
   Treebank tag (so EVALB deletes it as it does in the gold tree), any other
   word `XX`;
6. the words are put under the POS leaves, in order.
"""

from __future__ import annotations

import collections
from typing import Sequence

from t2t_revival.parsing.repaired_tree import RepairedTree
from t2t_revival.parsing.tree import Tree
from t2t_revival.parsing.treebank import TOKEN

UNKNOWN_TAG = "XX"
ADDED_ROOT = "TOP"
UNLABELLED = "X"

_PUNCTUATION_TAGS = {
    ",": ",", ".": ".", "?": ".", "!": ".", ":": ":", ";": ":", "--": ":",
    "-": ":", "...": ":", "``": "``", "`": "``", "''": "''",
    "-LRB-": "-LRB-", "-RRB-": "-RRB-", "-LCB-": "-LRB-", "-RCB-": "-RRB-",
    "$": "$", "#": "#",
}


def guess_tag(word: str) -> str:
    """A POS tag for a word the parser gave no leaf: punctuation's own tag, else `XX`."""
    return _PUNCTUATION_TAGS.get(word, UNKNOWN_TAG)


def flat_tree(words: Sequence[str]) -> Tree:
    """`(TOP (tag w1) (tag w2) ...)` with `guess_tag` tags: a parse with no brackets."""
    return Tree(ADDED_ROOT, [Tree(guess_tag(w), [w]) for w in words])


def _as_list(text_or_tokens: str | Sequence[str]) -> list[str]:
    if isinstance(text_or_tokens, str):
        return text_or_tokens.split()
    return list(text_or_tokens)


def repair_linearized(target: str | Sequence[str],
                      words: str | Sequence[str]) -> RepairedTree:
    """Rebuild the tree of a linearized parse over `words`, repairing as needed.

    Args:
        target: the decoded linearized tree, a string of space-separated tokens
            (`"(S (NP NNP )NP . )S"`) or the list of tokens.
        words: the sentence (the model's source), a string or list of words.

    Returns:
        A `RepairedTree` whose tree has exactly `words` as its words, in order;
        `repairs` is empty when `target` was well formed for `words`.
    """
    tokens = _as_list(target)
    words = _as_list(words)
    repairs: collections.Counter = collections.Counter()
    root = Tree("", [])  # a virtual bracket over everything
    stack = [root]
    leaves: list[Tree] = []  # the POS leaves, left to right
    for tok in tokens:
        if tok.startswith("("):
            label = tok[1:]
            if not label:
                label = UNLABELLED
                repairs["unlabelled_open"] += 1
            node = Tree(label, [])
            stack[-1].children.append(node)
            stack.append(node)
        elif tok.startswith(")"):
            if len(stack) == 1:
                repairs["extra_close"] += 1
                continue
            node = stack.pop()
            if len(tok) > 1 and tok[1:] != node.label:
                repairs["close_label"] += 1
        else:
            leaf = Tree(tok, [])
            stack[-1].children.append(leaf)
            leaves.append(leaf)
    repairs["missing_close"] += len(stack) - 1

    if len(leaves) > len(words):
        repairs["extra_leaves"] += len(leaves) - len(words)
    all_leaves = list(leaves)
    leaves = leaves[:len(words)]
    if not tokens:  # empty output: no brackets at all
        return RepairedTree(flat_tree(words), {"flat": 1} if words else {})
    leaf_ids = {id(leaf) for leaf in all_leaves}
    kept = {id(leaf) for leaf in leaves}
    _prune(root, leaf_ids, kept, repairs)

    if len(root.children) == 1 and id(root.children[0]) not in kept:
        tree = root.children[0]
    else:
        tree = Tree(ADDED_ROOT, root.children)
        repairs["root_added"] += 1
    for word in words[len(leaves):]:
        leaf = Tree(guess_tag(word), [])
        tree.children.append(leaf)
        leaves.append(leaf)
        repairs["missing_leaves"] += 1
    for leaf, word in zip(leaves, words):
        leaf.children = [word]
    return RepairedTree(tree, {k: v for k, v in repairs.items() if v})


def _prune(node: Tree, leaf_ids: set[int], kept: set[int],
           repairs: collections.Counter) -> None:
    """Drop leaves not in `kept` and brackets left over no kept leaf (post-order)."""
    children = []
    for child in node.children:
        if id(child) in leaf_ids:
            if id(child) in kept:
                children.append(child)
            continue
        _prune(child, leaf_ids, kept, repairs)
        if child.children:
            children.append(child)
        else:
            repairs["empty_constituent"] += 1
    node.children = children


def repair_bracketed(text: str, words: Sequence[str] | None = None) -> RepairedTree:
    """A tree from a possibly malformed bracketed tree with words, e.g. a predicted line.

    Unmatched `)` are dropped, unclosed `(` closed at the end, empty brackets
    removed, a word not alone under a POS bracket gets its own `(XX word)`,
    and several top-level trees are wrapped in `TOP`. When nothing with a
    word is left and `words` is given, the result is `flat_tree(words)`
    (counted as `flat`). The words of the result are the words found in
    `text`: they may differ from the gold words, which EVALB then reports.
    """
    repairs: collections.Counter = collections.Counter()
    root = Tree("", [])
    stack = [root]
    tokens = TOKEN.findall(text)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "(":
            label = ""
            if i + 1 < len(tokens) and tokens[i + 1] not in ("(", ")"):
                label = tokens[i + 1]
                i += 1
            node = Tree(label, [])
            stack[-1].children.append(node)
            stack.append(node)
        elif tok == ")":
            if len(stack) == 1:
                repairs["extra_close"] += 1
            else:
                stack.pop()
        else:
            stack[-1].children.append(tok)
        i += 1
    repairs["missing_close"] += len(stack) - 1
    _fix_bracketed(root, repairs)
    children = root.children
    if len(children) == 1 and not children[0].is_preterminal:
        tree = children[0]
    elif children:
        tree = Tree(ADDED_ROOT, children)
        repairs["root_added"] += 1
    elif words is not None:
        return RepairedTree(flat_tree(words), {"flat": 1})
    else:
        tree = Tree(ADDED_ROOT, [])
        repairs["flat"] += 1
    return RepairedTree(tree, {k: v for k, v in repairs.items() if v})


def _fix_bracketed(node: Tree, repairs: collections.Counter) -> None:
    """Make every bracket under `node` a POS bracket over one word or a bracket of brackets."""
    if node.is_preterminal and node.label:
        return
    children = []
    for child in node.children:
        if isinstance(child, str):
            repairs["stray_words"] += 1
            children.append(Tree(UNKNOWN_TAG, [child]))
            continue
        _fix_bracketed(child, repairs)
        if child.children:
            children.append(child)
        else:
            repairs["empty_constituent"] += 1
    node.children = children


def restore_gold_tags(tree: Tree, gold_tags: Sequence[str]) -> Tree:
    """Put the gold POS tags on a predicted tree over the same words, in place.

    For seq2seq output (linearized trees), as in Vinyals et al. 2015: EVALB
    counts no preterminal as a bracket, but deletes punctuation by tag, so a
    mis-tagged comma would turn the sentence into a "length unmatch" and drop
    it from the score. With the gold tags back, only the brackets are judged.
    """
    nodes = list(tree.preterminals())
    if len(nodes) != len(gold_tags):
        raise ValueError(f"the predicted tree has {len(nodes)} words, the gold "
                         f"tags {len(gold_tags)}")
    for node, tag in zip(nodes, gold_tags):
        node.label = tag
    return tree
