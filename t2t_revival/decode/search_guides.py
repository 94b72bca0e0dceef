"""`SearchGuides`: each input's target prefix and constraint phrases, as the
search takes them.

`t2t-decoder --decode_hparams constraints=true` reads lines
`source<TAB>phrase<TAB>phrase...`, `prefix=true` lines `source<TAB>prefix`,
both `source<TAB>prefix<TAB>phrase...` (`split_guided_line`). Prefixes and
phrases are encoded with the run's vocabulary (subword ids, no EOS); a line
whose guides cannot be met (an empty phrase, more constraint tokens than
`max_constraint_tokens`, or more prefix and constraint tokens than its
outputs may have) is refused alone: `problem(i)` says why, and the decoder
skips it (an empty output), counting it.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from t2t_revival.decode.lexical_constraints import (constraint_tokens, pack_constraints,
                                                    pack_prefixes)
from t2t_revival.errors import UserError


def split_guided_line(line: str, prefix: bool, constraints: bool
                      ) -> tuple[str, str, list[str]]:
    """(source, prefix text or "", phrases) of an input line whose fields are
    tab-separated: source, then the prefix (with `prefix`), then the phrases
    (with `constraints`). A line with no tab is its source alone. Too many
    fields for `prefix` alone is a UserError (tabs in a prefix are not text)."""
    fields = line.split("\t")
    source, rest = fields[0], fields[1:]
    prefix_text = rest.pop(0) if prefix and rest else ""
    if rest and not constraints:
        raise UserError(f"the line has {len(fields)} tab-separated fields; with prefix=true "
                        "a line is source<TAB>prefix (add constraints=true for phrases "
                        f"after it). Received: {line[:60]!r}")
    return source, prefix_text, rest


class SearchGuides:
    """The prefixes and constraint phrases of a list of inputs, encoded.

    Args:
        vocab: the run's vocabulary (its `encode(text) -> ids`).
        max_constraint_tokens: the width of the constraint tensors (a
            decode hparam).
        prefixes: None, or one text per input ("" for none).
        constraints: None, or one list of phrases (texts) per input.
    """

    def __init__(self, vocab, max_constraint_tokens: int,
                 prefixes: Sequence[str] | None = None,
                 constraints: Sequence[Sequence[str]] | None = None):
        self.width = max_constraint_tokens
        encode = vocab.encode_target   # target text: the decoder's side
        self.prefixes = None if prefixes is None else [encode(p) if p.strip() else []
                                                       for p in prefixes]
        self.phrases = None if constraints is None else [
            [encode(p) if p.strip() else [] for p in phrases] for phrases in constraints]

    @classmethod
    def of_inputs(cls, vocab, decode_hparams, prefixes: Sequence[str] | None,
                  constraints: Sequence[Sequence[str]] | None) -> "SearchGuides | None":
        """The guides of `Decoder.translate`'s inputs; None without prefixes and
        constraints. With sampling, a UserError (they are for beam search)."""
        if prefixes is None and constraints is None:
            return None
        if decode_hparams.sampling:
            raise UserError("prefixes and constraints are for beam search; drop "
                            "sampling=true from --decode_hparams. Received: sampling=True")
        return cls(vocab, decode_hparams.max_constraint_tokens, prefixes, constraints)

    def refuse_unmet(self, encoded: list[list[int]], decode_length: Callable[[int], int]
                     ) -> dict[int, str]:
        """{index: why} of the inputs (ids, EOS-terminated; [] empty) whose
        guides cannot be met (`problem`; `decode_length(input tokens)`: their
        outputs' longest); their ids are emptied in `encoded` (an empty output)."""
        refused = {}
        for i, ids in enumerate(encoded):
            why = self.problem(i, decode_length(len(ids))) if ids else None
            if why:
                refused[i] = why
                encoded[i] = []
        return refused

    @property
    def kinds(self) -> tuple[str, ...]:
        """The guides given: ("prefix",), ("constraints",) or both."""
        return tuple(kind for kind, given in (("prefix", self.prefixes),
                                              ("constraints", self.phrases))
                     if given is not None)

    def problem(self, index: int, decode_length: int) -> str | None:
        """Why input `index`'s guides cannot be met by outputs of at most
        `decode_length` tokens (EOS included), or None."""
        phrases = self.phrases[index] if self.phrases is not None else []
        prefix = self.prefixes[index] if self.prefixes is not None else []
        for number, phrase in enumerate(phrases, start=1):
            if not phrase:
                return (f"constraint phrase {number} is empty (two tabs in a row, a tab at "
                        "the end, or only spaces); remove it")
        tokens = constraint_tokens(phrases)
        if tokens > self.width:
            return (f"its constraints take {tokens} subword tokens, more than "
                    f"max_constraint_tokens={self.width}; drop phrases or raise "
                    "max_constraint_tokens in --decode_hparams")
        if len(prefix) + tokens > decode_length - 1:
            return (f"its prefix and constraints take {len(prefix) + tokens} subword tokens, "
                    f"but outputs of this input have at most {decode_length - 1} before EOS; "
                    "shorten them or raise extra_length")
        return None

    def tensors(self, rows: Sequence[int], decode_length: int) -> dict[str, np.ndarray]:
        """The search's guides of the inputs `rows` (a batch, in order), for
        outputs of `decode_length` positions:

            prefix:            int32 [R, decode_length], PAD after each prefix
            constraint_ids:    int32 [R, max_constraint_tokens]
            constraint_starts: bool  [R, max_constraint_tokens]
        """
        out = {}
        if self.prefixes is not None:
            out["prefix"] = pack_prefixes([self.prefixes[i] for i in rows], decode_length)
        if self.phrases is not None:
            out["constraint_ids"], out["constraint_starts"] = pack_constraints(
                [self.phrases[i] for i in rows], self.width)
        return out


def guide_specs(rows: int, kinds: tuple[str, ...], width: int) -> dict:
    """The `tf.TensorSpec`s of `SearchGuides.tensors` for guides of `kinds`,
    `rows` inputs and constraint tensors of `width` (the prefix's width, the
    decode length, follows from the input length)."""
    import tensorflow as tf

    specs = {}
    if "prefix" in kinds:
        specs["prefix"] = tf.TensorSpec([rows, None], tf.int32)
    if "constraints" in kinds:
        specs["constraint_ids"] = tf.TensorSpec([rows, width], tf.int32)
        specs["constraint_starts"] = tf.TensorSpec([rows, width], tf.bool)
    return specs


def search_arguments(guides: dict | None) -> dict:
    """`beam_search`'s prefix and constraints keywords of `SearchGuides.tensors`'s."""
    guides = guides or {}
    constraints = None
    if "constraint_ids" in guides:
        constraints = (guides["constraint_ids"], guides["constraint_starts"])
    return {"prefix": guides.get("prefix"), "constraints": constraints}
