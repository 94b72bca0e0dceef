"""The user error for unreadable treebank files and tree strings."""

from __future__ import annotations

from t2t_revival.errors import UserError


class TreebankError(UserError):
    """A treebank file or bracketed tree that cannot be read (names the file)."""
