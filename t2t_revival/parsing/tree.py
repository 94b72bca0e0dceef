"""A constituency tree: a label and children, words at the leaves."""

from __future__ import annotations

from typing import Iterator, Union

Child = Union["Tree", str]


class Tree:
    """A node of a constituency (Penn Treebank style) tree.

    A node is either a *preterminal* (`Tree("NN", ["board"])`: a POS tag over
    exactly one word, a `str`) or a *constituent* whose children are all
    `Tree`s (`Tree("NP", [Tree("DT", ["the"]), Tree("NN", ["board"])])`).
    The readers in this package only build trees of that shape. The empty
    outer bracket of `.mrg` files, `( (S ...) )`, is a node with label `""`.

    Args:
        label: the node's label, e.g. `"NP-SBJ-1"`, `"NN"`, or `""`.
        children: `Tree`s, or a single word for a preterminal.
    """

    __slots__ = ("label", "children")

    def __init__(self, label: str, children: list[Child] | None = None):
        self.label = label
        self.children = list(children) if children is not None else []

    @property
    def is_preterminal(self) -> bool:
        """True for a POS node over one word, `(NN board)`."""
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def preterminals(self) -> Iterator["Tree"]:
        """The POS nodes, left to right."""
        if self.is_preterminal:
            yield self
            return
        for child in self.children:
            if isinstance(child, Tree):
                yield from child.preterminals()

    def words(self) -> list[str]:
        """The words at the leaves, left to right."""
        return [p.children[0] for p in self.preterminals()]

    def tags(self) -> list[str]:
        """The POS tags of the words, left to right."""
        return [p.label for p in self.preterminals()]

    def subtrees(self) -> Iterator["Tree"]:
        """Every node, pre-order (this one first)."""
        yield self
        for child in self.children:
            if isinstance(child, Tree):
                yield from child.subtrees()

    def copy(self) -> "Tree":
        """A deep copy."""
        return Tree(self.label, [c.copy() if isinstance(c, Tree) else c
                                 for c in self.children])

    def to_string(self) -> str:
        """One line in bracketed form: `(S (NP (NNP Ms.) (NNP Haag)) ...)`."""
        parts = []
        self._write(parts)
        return "".join(parts)

    def _write(self, parts: list[str]) -> None:
        parts.append("(" + self.label)
        for child in self.children:
            parts.append(" ")
            if isinstance(child, Tree):
                child._write(parts)
            else:
                parts.append(child)
        parts.append(")")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tree):
            return NotImplemented
        return self.label == other.label and self.children == other.children

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return f"Tree({self.to_string()!r})"

    def __str__(self) -> str:
        return self.to_string()
