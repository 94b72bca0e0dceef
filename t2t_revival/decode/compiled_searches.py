"""`CompiledSearches`: the XLA searches of one model copy, by batch bucket."""

from __future__ import annotations

import threading
from typing import Callable

import tensorflow as tf

from t2t_revival.decode.search_guides import guide_specs


class CompiledSearches:
    """The XLA search of each batch bucket (and guide kinds) of one model
    copy, made on first use (`Decoder.compiled_search`), and the programs
    they have run.

    Each search is traced once, for any input length S (the length limit
    follows from S in the graph, as in the SavedModel's search), and XLA
    compiles a program per padded length S: tracing costs seconds, so a file
    of many input lengths traces once per batch bucket, not once per length.

    Args:
        search_padded: (inputs int32 [rows, S], guides?) -> the search's outputs.
        max_constraint_tokens: the guides' constraint width (`guide_specs`).
    """

    def __init__(self, search_padded: Callable, max_constraint_tokens: int):
        self._search_padded = search_padded
        self._max_constraint_tokens = max_constraint_tokens
        self.searches: dict = {}
        """{rows (or (rows, guide kinds)): its tf.function}, made so far."""
        self.programs: set[tuple[int, int]] = set()
        """(rows, padded length) of every program run (`ran`)."""
        self._lock = threading.Lock()

    def get(self, rows: int, guided: tuple[str, ...] = ()):
        """The XLA search of batches of `rows` inputs: inputs int32 [rows, S]
        (and the guides of `guided`, `SearchGuides.kinds`) -> outputs."""
        key = (rows, guided) if guided else rows
        with self._lock:   # batches of several threads ask at once
            search = self.searches.get(key)
            if search is None:
                search = tf.function(
                    self._search_padded, jit_compile=True, autograph=False,
                    input_signature=[tf.TensorSpec([rows, None], tf.int32)] + ([guide_specs(
                        rows, guided, self._max_constraint_tokens)] if guided else []))
                self.searches[key] = search
        return search

    def ran(self, rows: int, length: int) -> None:
        """Note that the program of (rows, padded length) has run."""
        self.programs.add((rows, length))
