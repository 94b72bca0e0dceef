"""`--warm_start_vocab=update`: fine-tuning a run with another vocabulary.

The rows of every matrix with a vocabulary axis (the shared embedding, or
the source and target embeddings, the untied softmax projection and the
softmax bias, `VOCAB_AXES`) are carried over piece by piece: a piece of the
new vocabulary that the old one has (the same piece text, so SentencePiece
and Marian pieces match each other, and tensor2tensor's subtokens match
tensor2tensor's), and the special ids both have (PAD, EOS, and UNK where
both have one), keeps its old row bit for bit, at its new id. A new piece
starts (`PIECES`, the default) as the mean of the old rows of the pieces
the old vocabulary encodes its text into (`▁Lufthansa` as the mean of
`▁Luft`, `han`, `sa`); a piece with no text of its own there (a special or
control piece, a byte of a character split) as the mean of all the old
vocabulary's rows; `RANDOM` leaves the new rows as a run from scratch
initializes them (measured against `PIECES` in benchmarks/vocabulary_update.py).
Old rows of pieces the new vocabulary lacks are dropped.

    maps = SideMaps.of(old_vocab, new_vocab, old_rows=8190, new_rows=8000, ...)
    value = updated_rows(old_value, axis=0, rows=maps.target, init=PIECES, fresh=value)
"""

from __future__ import annotations

import dataclasses

import numpy as np

PIECES = "pieces"
"""New rows start as the mean of the old rows of their pieces in the old vocabulary."""
RANDOM = "random"
"""New rows start as a run from scratch starts them (the model's initializers)."""
INITS = (PIECES, RANDOM)

VOCAB_AXES = {"shared_embedding.embeddings": ("both", 0),
              "source_embedding.embeddings": ("source", 0),
              "target_embedding.embeddings": ("target", 0),
              "output_projection.kernel": ("target", 1),
              "final_logits_bias": ("target", 0)}
"""{model variable: (the side whose vocabulary indexes it, its vocabulary axis)}
(`checkpoint_variables.model_variables`'s keys)."""

VOCAB_HPARAMS = ("vocab_size", "target_vocab_size")
"""The architecture hparams a vocabulary update may change."""


@dataclasses.dataclass(frozen=True)
class RowMap:
    """Where each row of one side's new matrices comes from.

    Attributes:
        old_ids: per new row, the old row it keeps, or -1 (a new piece).
        parts: per new row, the old rows whose mean starts it (`PIECES`);
            () for a kept row, and for a new one with no pieces there.
        old_rows: rows of the old matrices.
        old_pieces: pieces of the old vocabulary (the rows the fallback
            mean is over: rows past them no piece owns).
    """
    old_ids: tuple[int, ...]
    parts: tuple[tuple[int, ...], ...]
    old_rows: int
    old_pieces: int

    @property
    def kept(self) -> int:
        return sum(i >= 0 for i in self.old_ids)

    @property
    def added(self) -> int:
        return len(self.old_ids) - self.kept

    @property
    def dropped(self) -> int:
        """Old rows of pieces the new vocabulary lacks."""
        return self.old_pieces - len({i for i in self.old_ids if i >= 0})

    @property
    def unowned(self) -> int:
        """Old rows past the old vocabulary's pieces (a vocab_size rounded up), dropped too."""
        return self.old_rows - self.old_pieces

    @property
    def unsplit(self) -> int:
        """New rows with no pieces in the old vocabulary (the fallback mean)."""
        return sum(i < 0 and not p for i, p in zip(self.old_ids, self.parts))

    def summary(self, init: str) -> str:
        if init == RANDOM:
            how = "as a run from scratch initializes them"
        else:
            how = ("as the mean of the old rows of the pieces the old vocabulary splits "
                   f"each into; {self.unsplit} with no such pieces as the mean of all "
                   f"old rows")
        unowned = f" (and {self.unowned:,} rows no piece owned)" if self.unowned else ""
        return (f"kept {self.kept:,} rows, dropped {self.dropped:,}{unowned}, added "
                f"{self.added:,} (new rows initialized {how})")


def row_map(old, new, target: bool, old_rows: int, new_rows: int) -> RowMap:
    """The `RowMap` of the source side (`target` False) or the target side
    of vocabularies `old` and `new` (`vocabulary_file.load_vocabulary`'s),
    for matrices of `old_rows` and `new_rows` rows."""
    size = (lambda v: v.target_vocab_size) if target else (lambda v: v.vocab_size)
    piece = (lambda v, i: v.id_to_piece(i)) if target else (lambda v, i: v.source_id_to_piece(i))
    encode = old.encode_target if target else old.encode
    old_count, new_count = min(size(old), old_rows), min(size(new), new_rows)
    old_special, new_special = len(old.RESERVED_PIECES), len(new.RESERVED_PIECES)
    # Later duplicates win, as the vocabularies' own lookups do.
    old_ids = {piece(old, i): i for i in range(old_special, old_count)}
    kept, parts = [], []
    for i in range(new_rows):
        if i < new_special:   # PAD, EOS (and UNK): the same ids in both, or none there
            kept.append(i if i < old_special else -1)
            parts.append(())
            continue
        text = piece(new, i) if i < new_count else None
        found = old_ids.get(text, -1) if text is not None else -1
        kept.append(found)
        parts.append(() if found >= 0 or text is None else
                     _parts(encode, new.decode_pieces([text]), old_special, old_count))
    return RowMap(tuple(kept), tuple(parts), old_rows, old_count)


def _parts(encode, text: str, first: int, end: int) -> tuple[int, ...]:
    """The old ids of `text`, its specials (UNK) left out."""
    return tuple(i for i in encode(text) if first <= i < end) if text.strip() else ()


def updated_rows(old_value: np.ndarray, axis: int, rows: RowMap, init: str,
                 fresh: np.ndarray) -> np.ndarray:
    """The new value of a matrix with a vocabulary axis.

    Args:
        old_value: the checkpoint's value, `old_rows` along `axis`.
        axis: its vocabulary axis (`VOCAB_AXES`).
        rows: the `RowMap` of its side.
        init: `PIECES` or `RANDOM`.
        fresh: the new model's initialized value (`RANDOM`'s new rows).

    Returns: `fresh`'s shape and dtype: kept rows equal to their old rows,
    bit for bit; new rows as `init` says.
    """
    old = np.moveaxis(np.asarray(old_value), axis, 0)
    out = np.moveaxis(np.array(fresh, copy=True), axis, 0)
    old_ids = np.asarray(rows.old_ids)
    kept = np.flatnonzero(old_ids >= 0)
    out[kept] = old[old_ids[kept]]
    if init == PIECES:
        fallback = old[:rows.old_pieces].mean(axis=0)
        for i in np.flatnonzero(old_ids < 0):
            parts = rows.parts[i]
            out[i] = old[list(parts)].mean(axis=0) if parts else fallback
    return np.moveaxis(out, 0, axis)


def load_with_new_vocabulary(model, checkpoint_path: str, old_file: str, new_file: str,
                             init: str = PIECES, log=print) -> None:
    """Load the checkpoint's model weights into `model`, whose vocabulary is
    `new_file`'s, from a run whose vocabulary was `old_file`'s: every other
    weight as it is, the matrices of `VOCAB_AXES` row by row (`row_map`,
    `updated_rows`). One line through `log` says how many rows were kept,
    dropped and added, per side where the sides differ.

    Raises:
        UserError: a vocabulary that cannot be read, or one with more pieces
            than the model has rows.
    """
    import tensorflow as tf

    from t2t_revival.data.vocabulary_file import load_vocabulary
    from t2t_revival.errors import UserError
    from t2t_revival.run_dir.checkpoint_variables import model_variables

    old, new = load_vocabulary(old_file), load_vocabulary(new_file)
    variables = model_variables(model)
    hp = model.hparams
    if new.vocab_size > hp.vocab_size or new.target_vocab_size > hp.output_vocab_size:
        raise UserError(
            f"the vocabulary {new_file} has {new.vocab_size} source and "
            f"{new.target_vocab_size} target pieces, more than the model's "
            f"{hp.vocab_size} and {hp.output_vocab_size} rows; leave vocab_size and "
            f"target_vocab_size out of --hparams. Received: vocab_size={hp.vocab_size}, "
            f"target_vocab_size={hp.target_vocab_size}")
    reader = tf.train.load_checkpoint(checkpoint_path)
    stored = reader.get_variable_to_shape_map()
    maps: dict[str, RowMap] = {}
    for key, variable in variables.items():
        value = reader.get_tensor(checkpoint_name(key))
        if key in VOCAB_AXES:
            side, axis = VOCAB_AXES[key]
            side = "source" if side == "source" else "target"
            if side not in maps:
                maps[side] = row_map(old, new, side == "target",
                                     stored[checkpoint_name(key)][axis], variable.shape[axis])
            value = updated_rows(value, axis, maps[side], init, variable.numpy())
        variable.assign(np.asarray(value, dtype=variable.dtype.as_numpy_dtype))
    lines = {side: rows.summary(init) for side, rows in maps.items()}
    if len(set(lines.values())) == 1:
        log(f"Vocabulary update ({old_file} -> {new_file}): {next(iter(lines.values()))}.")
    else:
        log(f"Vocabulary update ({old_file} -> {new_file}): "
            + "; ".join(f"{side}: {line}" for side, line in lines.items()) + ".")


def checkpoint_name(key: str) -> str:
    """The checkpoint's name of model variable `key` (tf.train.Checkpoint
    escapes "." in a dict key as "..")."""
    return f"model/{key.replace('.', '..')}/.ATTRIBUTES/VARIABLE_VALUE"
