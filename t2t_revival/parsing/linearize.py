"""Trees as token sequences for a sequence-to-sequence parser, and back.

The representation is Vinyals et al. 2015 ("Grammar as a Foreign Language"),
the one "Attention Is All You Need" (section 6.3) trained on:

* source: the sentence's words, space-separated, as in the treebank
  (`Pierre Vinken , 61 years old , will join the board ...`);
* target: the tree, depth first, one token per bracket or leaf, separated by
  single spaces: an opening bracket fused with its label (`(NP`), a closing
  bracket fused with the same label (`)NP`), and each word replaced by its
  POS tag (`NNP`); the words themselves are only in the source.

For wsj_0001's first sentence, after `normalize_tree`:

    (S (NP (NP NNP NNP )NP , (ADJP (NP CD NNS )NP JJ )ADJP , )NP (VP MD (VP VB
    (NP DT NN )NP (PP IN (NP DT JJ NN )NP )PP (NP NNP CD )NP )VP )VP . )S

(one line in practice). POS tags are kept (Vinyals et al. also tried `XX` for
every tag); keeping them lets EVALB delete punctuation in the parser's output
exactly as in the gold tree. Tags and labels never start with `(` or `)`, so
every token's kind is plain from its first character.

`delinearize(target, words)` is the exact inverse on well-formed output:
`delinearize(*reversed(linearize(t)))` rebuilds `t` (words re-inserted at the
POS leaves, in order); for every tree `t == normalize_tree(raw)` of the
treebank. For model output that may be malformed, use `repair_linearized`
(repair.py), which never fails.
"""

from __future__ import annotations

import os
from typing import Sequence

from t2t_revival.parsing.repair import repair_linearized
from t2t_revival.parsing.tree import Tree
from t2t_revival.parsing.treebank import normalize_tree, read_treebank
from t2t_revival.parsing.treebank_error import TreebankError


def linearize_tokens(tree: Tree) -> list[str]:
    """The target tokens of `tree`: `["(S", "(NP", "NNP", ")NP", ..., ")S"]`."""
    tokens: list[str] = []
    _linearize(tree, tokens)
    return tokens


def _linearize(node: Tree, tokens: list[str]) -> None:
    if node.is_preterminal:
        tokens.append(node.label)
        return
    if not node.children or any(not isinstance(c, Tree) for c in node.children):
        raise ValueError(f"cannot linearize a bracket with no words or with bare "
                         f"words; normalize the tree first: {node}")
    tokens.append("(" + node.label)
    for child in node.children:
        _linearize(child, tokens)
    tokens.append(")" + node.label)


def linearize(tree: Tree) -> tuple[str, str]:
    """`(source_text, target_text)` of a tree, usually a `normalize_tree` result.

    Returns:
        source_text: the words joined by single spaces.
        target_text: the linearized tree joined by single spaces.
    """
    return " ".join(tree.words()), " ".join(linearize_tokens(tree))


def delinearize(target: str | Sequence[str], words: str | Sequence[str]) -> Tree:
    """The tree of a well-formed linearized target, with `words` at its POS leaves.

    Args:
        target: target text (`"(S (NP NNP )NP . )S"`) or its tokens.
        words: the source sentence, a string or a list of words.

    Raises:
        TreebankError: the target is not one balanced bracket with matching
            close labels and one POS leaf per word. Use `repair_linearized` to
            rebuild a tree from such output instead.
    """
    result = repair_linearized(target, words)
    if result.repaired:
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.repairs.items()))
        shown = target if isinstance(target, str) else " ".join(target)
        raise TreebankError(
            f"The linearized tree is malformed for its {len(_split(words))} words "
            f"({kinds}); use repair_linearized to repair it. "
            f"Received: target={shown[:200]!r}")
    return result.tree


def _split(words: str | Sequence[str]) -> list[str]:
    return words.split() if isinstance(words, str) else list(words)


def read_parsing_examples(path: str | os.PathLike) -> list[tuple[str, str]]:
    """`(source_text, target_text)` pairs of every tree of a `.mrg` file or folder.

    Each tree is read, normalized (`normalize_tree`) and linearized; a tree
    left with no words (only empty elements) is skipped.
    """
    examples = []
    for raw in read_treebank(path):
        tree = normalize_tree(raw)
        if tree is not None:
            examples.append(linearize(tree))
    return examples
