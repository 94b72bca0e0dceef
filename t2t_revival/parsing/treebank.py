"""Reading Penn Treebank bracketed trees (`.mrg` files, one-tree-per-line files).

The `.mrg` files of the WSJ treebank hold trees over several lines, each
wrapped in an empty outer bracket:

    ( (S
        (NP-SBJ (NNP Mr.) (NNP Vinken) )
        (VP (VBZ is) ...)
        (. .) ))

`parse_trees` reads any number of such trees from text, whatever the layout
(newlines, indentation, one tree per line); `read_treebank` reads a file or
every `.mrg` file under a folder. A corrupt file raises `TreebankError`
naming the file and the line.

`normalize_tree` gives the tree the parser is trained on and scored against
(the usual preprocessing of Vinyals et al. 2015 and of EVALB):
  1. the empty outer bracket (label `""`, or `TOP`/`ROOT`) over a single
     constituent is removed, so the sentence's own top bracket (`S`) is the root;
  2. empty elements (`-NONE-` preterminals: traces such as `*T*-1`, `0`, `*U*`)
     are removed, and so is every constituent left with no words;
  3. function tags and indices are stripped from constituent labels
     (`NP-SBJ-1` -> `NP`, `PP-LOC=2` -> `PP`, `S-TPC-1` -> `S`); POS tags and
     labels that begin with `-` (`-NONE-`, `-LRB-`) are kept as they are.
"""

from __future__ import annotations

import os
import pathlib
import re

from t2t_revival.parsing.tree import Tree
from t2t_revival.parsing.treebank_error import TreebankError

TOKEN = re.compile(r"\(|\)|[^\s()]+")
"""A token of a bracketed tree: `(`, `)`, or a label or word (no white space or bracket)."""
_FUNCTION_TAG = re.compile(r"[-=]")

NONE_TAG = "-NONE-"
OUTER_LABELS = ("", "TOP", "ROOT")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def parse_trees(text: str, source: str = "<string>") -> list[Tree]:
    """Every bracketed tree in `text`, in order; whitespace and newlines are free.

    Args:
        text: bracketed trees, e.g. the contents of a `.mrg` file.
        source: where the text came from (a path), for error messages.

    Returns:
        The trees as read (outer empty bracket and function tags kept).

    Raises:
        TreebankError: unbalanced brackets, text outside any bracket, an empty
            bracket, or a bracket holding both words and brackets.
    """
    trees: list[Tree] = []
    stack: list[tuple[Tree, int]] = []  # (open node, offset of its "(")
    tokens = list(TOKEN.finditer(text))
    i = 0
    while i < len(tokens):
        match = tokens[i]
        tok = match.group()
        if tok == "(":
            label = ""
            if i + 1 < len(tokens) and tokens[i + 1].group() not in ("(", ")"):
                label = tokens[i + 1].group()
                i += 1
            stack.append((Tree(label, []), match.start()))
        elif tok == ")":
            if not stack:
                _fail(source, text, match.start(),
                      "a ')' closes a bracket that was never opened")
            node, start = stack.pop()
            _check_node(node, source, text, start)
            if stack:
                stack[-1][0].children.append(node)
            else:
                trees.append(node)
        else:
            if not stack:
                _fail(source, text, match.start(),
                      f"the text {tok!r} is outside any bracket")
            stack[-1][0].children.append(tok)
        i += 1
    if stack:
        _fail(source, text, stack[-1][1],
              "a '(' opened here is never closed (the file may be truncated)")
    return trees


def _check_node(node: Tree, source: str, text: str, start: int) -> None:
    words = [c for c in node.children if isinstance(c, str)]
    if not node.children:
        _fail(source, text, start, f"the bracket ({node.label} ) is empty")
    if words and (len(node.children) != 1):
        _fail(source, text, start,
              f"the bracket ({node.label} ...) mixes words and brackets or holds "
              f"several words; a POS bracket holds exactly one word, e.g. (NN board)")


def _fail(source: str, text: str, offset: int, what: str) -> None:
    raise TreebankError(
        f"Could not read bracketed trees from {source}: {what} (line "
        f"{_line_of(text, offset)}). Check that it is a Penn Treebank .mrg file "
        f"or a file of one bracketed tree per line, and not truncated. "
        f"Received: source={source}")


def parse_tree(text: str, source: str = "<string>") -> Tree:
    """Exactly one bracketed tree from `text` (raises `TreebankError` otherwise)."""
    trees = parse_trees(text, source)
    if len(trees) != 1:
        raise TreebankError(
            f"Expected exactly one bracketed tree in {source}, found {len(trees)}. "
            f"Received: text={text[:80]!r}")
    return trees[0]


def read_treebank_file(path: str | os.PathLike) -> list[Tree]:
    """Every tree of one `.mrg` (or one-tree-per-line) file, as read."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except FileNotFoundError:
        raise TreebankError(f"The treebank file {path} does not exist; check the "
                            f"path. Received: path={path}") from None
    except IsADirectoryError:
        raise TreebankError(f"{path} is a folder; pass a file. Received: path={path}"
                            ) from None
    except UnicodeDecodeError as e:
        raise TreebankError(f"Could not read bracketed trees from {path}: it is not "
                            f"UTF-8 text ({e.reason} at byte {e.start}); is it a "
                            f"compressed or binary file? Received: path={path}") from None
    return parse_trees(text, source=str(path))


def treebank_files(path: str | os.PathLike) -> list[pathlib.Path]:
    """`path` itself if a file, else every `*.mrg` under the folder, sorted."""
    path = pathlib.Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TreebankError(f"The treebank path {path} does not exist; pass a .mrg "
                            f"file or a folder of them. Received: path={path}")
    files = sorted(p for p in path.rglob("*.mrg") if p.is_file())
    if not files:
        raise TreebankError(f"The folder {path} holds no .mrg files; pass the folder "
                            f"of Penn Treebank .mrg files (e.g. combined/ or wsj/02). "
                            f"Received: path={path}")
    return files


def read_treebank(path: str | os.PathLike) -> list[Tree]:
    """Every tree of a `.mrg` file, or of every `*.mrg` under a folder (sorted)."""
    trees: list[Tree] = []
    for file in treebank_files(path):
        trees.extend(read_treebank_file(file))
    return trees


def cut_at_function_tag(label: str) -> str:
    """`label` up to its first `-` or `=`: `NP-SBJ-1` -> `NP`, `PP-LOC=2` -> `PP`
    (and `-NONE-` -> ``: see `strip_function_tags`)."""
    return _FUNCTION_TAG.split(label, maxsplit=1)[0]


def strip_function_tags(label: str) -> str:
    """`NP-SBJ-1` -> `NP`, `PP-LOC=2` -> `PP`; `-NONE-`, `-LRB-` unchanged."""
    if not label or label[0] in "-=":
        return label
    return cut_at_function_tag(label)


def normalize_tree(tree: Tree) -> Tree | None:
    """The tree the parser learns and is scored on (see the module docstring).

    Returns a new tree (the input is not changed), or None when no word is
    left once empty elements are removed.
    """
    while (tree.label in OUTER_LABELS and len(tree.children) == 1
           and isinstance(tree.children[0], Tree)
           and not tree.children[0].is_preterminal):
        tree = tree.children[0]
    result = _normalize(tree)
    if result is not None and result.label == "":
        result.label = "TOP"  # an outer bracket over several constituents
    return result


def _normalize(node: Tree) -> Tree | None:
    if node.is_preterminal:
        return None if node.label == NONE_TAG else Tree(node.label, list(node.children))
    children = [c for c in (_normalize(child) for child in node.children
                            if isinstance(child, Tree)) if c is not None]
    if not children:
        return None
    return Tree(strip_function_tags(node.label), children)
