"""`SharedSides`: the target side of a vocabulary that source and target share."""

from __future__ import annotations

from typing import Sequence


class SharedSides:
    """The target-side methods of a vocabulary with one tokenizer for both
    sides (`SubwordVocabulary`, `T2TSubwordVocabulary`): `encode`'s. A
    Marian model's vocabulary has two (`MarianVocabulary`), so every caller
    encodes target text (references, prefixes, constraints, datagen's
    targets) with `encode_target`."""

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size

    def encode_target(self, text: str) -> list[int]:
        """Ids of target text: `encode`'s."""
        return self.encode(text)

    def encode_target_pieces(self, text: str) -> list[str]:
        """Pieces of target text: `encode_pieces`'."""
        return self.encode_pieces(text)

    def source_id_to_piece(self, i: int) -> str:
        """The source piece of id `i`: `id_to_piece`'s."""
        return self.id_to_piece(i)

    def encode_target_batch(self, texts: Sequence[str],
                            num_threads: int = -1) -> list[list[int]]:
        return self.encode_batch(texts, num_threads)

    def tf_target_tokenizer(self, source_tokenizer=None):
        """The target side in the graph: `source_tokenizer` (this vocabulary's
        `tf_tokenizer()`, held once) where given, else a new one."""
        return source_tokenizer if source_tokenizer is not None else self.tf_tokenizer()
