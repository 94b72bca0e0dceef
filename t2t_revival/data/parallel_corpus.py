"""`ParallelCorpus`: one pair of line-aligned files and its training weight."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ParallelCorpus:
    """Aligned source and target files (plain text or .gz, one sentence a line).

    Attributes:
        source: the absolute path of the source-language file.
        target: the absolute path of the target-language file.
        weight: the corpus's share of the training examples relative to the
            other training corpora (3 against 1: three of every four
            examples come from it); dev and test corpora ignore it.
        target_lang: the target language's code (corpora.json's, the
            corpus's own or the top-level one; "" when unset).
    """

    source: str
    target: str
    weight: float = 1.0
    target_lang: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
