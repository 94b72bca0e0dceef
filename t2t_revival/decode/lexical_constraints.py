"""Target prefixes and hard lexical constraints for `beam_search`, in fixed shapes.

A sentence's constraints are phrases of target token ids that every output
must contain (Post & Vilar 2018, "Fast Lexically Constrained Decoding with
Dynamic Beam Allocation"). They reach the search packed into two tensors of
a fixed width C (`pack_constraints`):

    ids:    int32 [B, C]  the phrases' tokens one after the other, PAD (0) after
    starts: bool  [B, C]  True at the first token of each phrase

Each hypothesis carries, over those C positions (`advance`):

    active: bool [C]  position p is the last token of a prefix of its phrase
                      that the hypothesis ends with (all such prefixes at once,
                      a shift-and matcher, so overlaps are never missed)
    met:    bool [C]  p's phrase has appeared in the hypothesis

and its "bank", the number of constraint tokens met: every token of a
phrase that appeared, plus the longest partial match of the others. A
hypothesis may end (EOS) only once every phrase has appeared.

A prefix is int32 [B, P] of token ids, PAD after each sentence's prefix
(`pack_prefixes`); its length is its count of non-PAD ids.
No TensorFlow outside `keras.ops`: the same code runs eagerly, in a
tf.function and compiled by XLA.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from keras import ops

from t2t_revival.special_ids import PAD_ID


def pack_prefixes(prefixes: Sequence[Sequence[int]], width: int | None = None) -> np.ndarray:
    """int32 [B, P] of each sentence's prefix ids, PAD after them; P = `width`
    or the longest (at least 1). Ids must not be PAD."""
    width = width or max([len(p) for p in prefixes] + [1])
    packed = np.full((len(prefixes), width), PAD_ID, np.int32)
    for row, prefix in enumerate(prefixes):
        if len(prefix) > width or PAD_ID in prefix:
            raise ValueError(f"prefix {row} has {len(prefix)} ids (width {width}) or a PAD id. "
                             f"Received: prefix={list(prefix)[:20]}")
        packed[row, :len(prefix)] = prefix
    return packed


def pack_constraints(phrases: Sequence[Sequence[Sequence[int]]], width: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(ids int32 [B, width], starts bool [B, width]) of each sentence's phrases
    (lists of token ids, none empty, no PAD), their tokens one after the other."""
    ids = np.full((len(phrases), width), PAD_ID, np.int32)
    starts = np.zeros((len(phrases), width), bool)
    for row, sentence in enumerate(phrases):
        at = 0
        for phrase in sentence:
            if not phrase or PAD_ID in phrase or at + len(phrase) > width:
                raise ValueError(
                    f"sentence {row}: a phrase is empty, holds PAD or does not fit in "
                    f"{width} constraint tokens. Received: phrases={[list(p) for p in sentence]}")
            ids[row, at:at + len(phrase)] = phrase
            starts[row, at] = True
            at += len(phrase)
    return ids, starts


def constraint_tokens(phrases: Sequence[Sequence[int]]) -> int:
    """The width a sentence's phrases take in `pack_constraints`."""
    return sum(len(p) for p in phrases)


def phrase_tables(ids, starts) -> dict:
    """What `advance` reads of the packed constraints ids, starts [B, C]:

        ids [B, C], valid [B, C] (not PAD), starts [B, C], ends [B, C] (last
        token of a phrase), offset int32 [B, C] (position in its phrase),
        same float32 [B, C, C] (1 where both positions are of one phrase).
    """
    c = ids.shape[1]
    valid = ops.not_equal(ids, PAD_ID)
    starts = ops.logical_and(ops.cast(starts, "bool"), valid)
    phrase = ops.cumsum(ops.cast(starts, "int32"), axis=1)                          # [B, C]
    same = ops.logical_and(ops.equal(phrase[:, :, None], phrase[:, None, :]),
                           ops.logical_and(valid[:, :, None], valid[:, None, :]))    # [B, C, C]
    next_starts = ops.concatenate([starts[:, 1:], ops.ones_like(starts[:, :1])], axis=1)
    next_valid = ops.concatenate([valid[:, 1:], ops.zeros_like(valid[:, :1])], axis=1)
    ends = ops.logical_and(valid, ops.logical_or(next_starts, ops.logical_not(next_valid)))
    positions = ops.arange(c, dtype="int32")
    before = ops.less(positions[None, :], positions[:, None])                        # [p, q]: q < p
    offset = ops.sum(ops.cast(ops.logical_and(same, before[None]), "int32"), axis=2)
    return {"ids": ids, "valid": valid, "starts": starts, "ends": ends,
            "offset": offset, "same": ops.cast(same, "float32")}


def advance(tables: dict, active, met, tokens):
    """The constraint state after each candidate's token.

    Args:
        tables: `phrase_tables`'s, per sentence [B, C].
        active, met: bool [B, N, C], the states of the candidates' parents.
        tokens: int32 [B, N], the candidates' new tokens.
    Returns:
        (active, met bool [B, N, C], bank int32 [B, N]: constraint tokens met,
        all_met bool [B, N]: every phrase has appeared).
    """
    match = ops.logical_and(ops.equal(tokens[:, :, None], tables["ids"][:, None, :]),
                            tables["valid"][:, None, :])                             # [B, N, C]
    previous = ops.concatenate([ops.zeros_like(active[:, :, :1]), active[:, :, :-1]], axis=2)
    active = ops.logical_and(match, ops.logical_or(tables["starts"][:, None, :], previous))
    ended = ops.cast(ops.logical_and(active, tables["ends"][:, None, :]), "float32")
    completed = ops.greater(ops.matmul(ended, tables["same"]), 0.5)                  # [B, N, C]
    met = ops.logical_or(met, completed)
    partial = ops.where(ops.logical_and(active, ops.logical_not(met)),
                        tables["offset"][:, None, :] + 1, 0)
    bank = ops.sum(ops.cast(met, "int32"), axis=2) + ops.max(partial, axis=2)
    return active, met, bank, all_met(tables, met)


def all_met(tables: dict, met):
    """bool [B, N]: every phrase met, of states met [B, N, C]."""
    return ops.all(ops.logical_or(met, ops.logical_not(tables["valid"][:, None, :])), axis=2)


def allocate_banks(log_probs, banks, usable, k: int):
    """The k candidates a constrained beam keeps (dynamic beam allocation).

    Args:
        log_probs: float32 [B, N]; banks: int32 [B, N] (constraint tokens met);
        usable: bool [B, N] (alive, not EOS, not a repeat of another candidate).
    Returns:
        int32 [B, k], the picks, best log-prob first.

    Banks take turns (Post & Vilar's even split, its leftover spread): every
    bank's best candidate first (the bank with most tokens met first), then
    every bank's second best, and so on, so that the beam keeps hypotheses
    at every stage of meeting the constraints; where the usable candidates
    are at most k, all of them.
    """
    n = log_probs.shape[1]
    index = ops.arange(n, dtype="int32")
    better = ops.logical_or(
        ops.greater(log_probs[:, None, :], log_probs[:, :, None]),
        ops.logical_and(ops.equal(log_probs[:, None, :], log_probs[:, :, None]),
                        ops.less(index[None, None, :], index[None, :, None])))       # [B, i, j]
    rivals = ops.logical_and(ops.logical_and(better, usable[:, None, :]),
                             ops.equal(banks[:, :, None], banks[:, None, :]))
    rank = ops.sum(ops.cast(rivals, "int32"), axis=2)                                # [B, N]
    turn = rank * (n + 1) - banks          # smaller first: rank, then the fuller bank
    order_key = ops.where(usable, -ops.cast(turn, "float32"), -1.0e9)
    _, picks = ops.top_k(order_key, k)
    picks = ops.cast(picks, "int32")
    picked = ops.take_along_axis(ops.where(usable, log_probs, -1.0e9), picks, axis=1)
    _, best_first = ops.top_k(picked, k)
    return ops.take_along_axis(picks, ops.cast(best_first, "int32"), axis=1)
