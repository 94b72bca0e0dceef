"""A tree rebuilt from model output, with the repairs that were needed."""

from __future__ import annotations

import dataclasses

from t2t_revival.parsing.tree import Tree


@dataclasses.dataclass(frozen=True)
class RepairedTree:
    """The result of turning (possibly malformed) parser output into a tree.

    Attributes:
        tree: a well-formed tree over exactly the sentence's words.
        repairs: how many repairs of each kind were made, only kinds with a
            non-zero count (empty for well-formed output). Kinds:
            `extra_close` (a close bracket with nothing open, dropped),
            `missing_close` (an open bracket never closed, closed at the end),
            `close_label` (a close label differing from its open label; the
            open label is kept), `unlabelled_open` (`(` with no label, labelled
            `X`), `extra_leaves` (POS leaves beyond the word count, dropped),
            `missing_leaves` (words without a POS leaf, attached at the end of
            the root), `empty_constituent` (a bracket over no words, removed),
            `root_added` (output that was not one bracket over everything,
            wrapped in `TOP`), `stray_words` (bracketed input only: a word not
            alone under a POS bracket, given the tag `XX`), `flat` (nothing
            usable, e.g. empty output: a flat tree `TOP` over the words).
    """

    tree: Tree
    repairs: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def num_repairs(self) -> int:
        """The total number of repairs (0 for well-formed output)."""
        return sum(self.repairs.values())

    @property
    def repaired(self) -> bool:
        """True when the output needed any repair."""
        return self.num_repairs > 0
