"""`CheckpointFiles`: which checkpoint of a folder to restore, without TensorFlow.

The one chooser of a checkpoint, whichever engine then reads it: the
TensorFlow decoder (`TrainedModel.load`), the LiteRT path (which must not
import TensorFlow) and every other reader go through it
(`TrainingDirectory.checkpoint_to_restore`; `CheckpointFolder`, which
writes checkpoints, is one of these with TensorFlow's writers added).

    files = CheckpointFiles("t2t_train/tiny")
    files.find(None)             # the newest intact checkpoint (a UserError if none)
    files.intact()               # ["…/ckpt-1000", "…/ckpt-2000"], oldest first

It reads TensorFlow's formats itself: the `checkpoint` index (a text
CheckpointState) and a checkpoint's `.index` (a table of BundleEntryProtos:
each tensor's dtype, shape, shard and byte size, the table's blocks
checksummed), so that a missing or truncated file is found, and said, the
same way whichever engine runs. A damaged byte inside .data shows only when
restoring (the `restore` that `find` and `restore_newest` take).
"""

from __future__ import annotations

import ast
import glob
import hashlib
import os
import re
import struct
import sys
from typing import Callable

from t2t_revival.errors import UserError
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.file_names import (BEST_DIR, CHECKPOINT_INDEX, CHECKPOINT_PREFIX,
                                            checkpoint_step)

Log = Callable[[str], None]

_TABLE_MAGIC = 0xdb4775248b80fb57
_FOOTER = 48
_DT_STRING = 7
_INDEX_FIELDS = ("model_checkpoint_path", "all_model_checkpoint_paths",
                 "all_model_checkpoint_timestamps", "last_preserved_timestamp")
_INDEX_LINE = re.compile(r'^\s*(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|[-+0-9.eEinfa]+)\s*$')


def stderr_log(message: str) -> None:
    """Where a folder says what it skipped, by default."""
    print(message, file=sys.stderr, flush=True)


def quiet(message: str) -> None:
    """A log that says nothing (the problems are said elsewhere)."""


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    """LevelDB's masked CRC-32C of `data` (what a table block's trailer holds)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("a varint runs past the end")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _fields(data: bytes) -> dict[int, list]:
    """A serialized message's fields: number -> values (ints, or bytes)."""
    fields: dict[int, list] = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, i = int.from_bytes(data[i:i + width], "little"), i + width
        elif wire == 2:
            length, i = _varint(data, i)
            value, i = data[i:i + length], i + length
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(data) or number == 0:
            raise ValueError("a field runs past the end")
        fields.setdefault(number, []).append(value)
    return fields


def _block(data: bytes, handle: bytes) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of the table block `handle` points at,
    its checksum checked."""
    offset, i = _varint(handle, 0)
    size, _ = _varint(handle, i)
    if offset + size + 5 > len(data):
        raise ValueError("a block runs past the end of the file")
    contents, kind = data[offset:offset + size], data[offset + size]
    (crc,) = struct.unpack_from("<I", data, offset + size + 1)
    if kind != 0:
        raise ValueError(f"block compression {kind}")
    if _masked_crc32c(data[offset:offset + size + 1]) != crc:
        raise ValueError("block checksum mismatch")
    (restarts,) = struct.unpack_from("<I", contents, len(contents) - 4)
    end = len(contents) - 4 * (restarts + 1)
    entries, key, i = [], b"", 0
    while i < end:
        shared, i = _varint(contents, i)
        unshared, i = _varint(contents, i)
        length, i = _varint(contents, i)
        key = key[:shared] + contents[i:i + unshared]
        i += unshared
        entries.append((key, contents[i:i + length]))
        i += length
    if i != end:
        raise ValueError("a block's entries run past its end")
    return entries


def tensor_bytes(prefix: str) -> int:
    """The bytes the .data files of checkpoint `prefix` hold for its
    non-string tensors, by its .index's table (read without TensorFlow);
    ValueError or OSError when the .index cannot be read."""
    with open(prefix + ".index", "rb") as f:
        data = f.read()
    if len(data) < _FOOTER or struct.unpack_from("<Q", data, len(data) - 8)[0] != _TABLE_MAGIC:
        raise ValueError("not a checkpoint table: no footer")
    footer = data[len(data) - _FOOTER:]
    _, i = _varint(footer, 0)
    _, i = _varint(footer, i)   # (the metaindex handle: unused)
    total = 0
    try:
        for _, handle in _block(data, footer[i:]):
            for key, value in _block(data, handle):
                if key:   # ("" is the bundle's header)
                    entry = _fields(value)
                    if entry.get(1, [0])[0] != _DT_STRING:
                        total += entry.get(5, [0])[0]
    except (IndexError, struct.error) as e:
        raise ValueError(f"a block is cut short ({e})") from None
    return total


def checkpoint_digest(prefix: str) -> str | None:
    """A digest of the checkpoint `prefix`'s contents, read in milliseconds:
    the SHA-256 of its .index (the tensor table, which holds each tensor's
    offset, size and CRC-32C, so it changes whenever a value does: a
    checkpoint rewritten in place under the same name, as
    t2t-avg-checkpoints does) and its .data files' names and sizes. None
    when there is no .index to read (an export, a folder)."""
    try:
        with open(prefix + ".index", "rb") as f:
            digest = hashlib.sha256(f.read())
        for path in sorted(glob.glob(glob.escape(prefix) + ".data-*")):
            digest.update(f"\n{os.path.basename(path)}:{os.path.getsize(path)}".encode())
    except OSError:
        return None
    return digest.hexdigest()


def read_checkpoint_index(folder: str) -> list[str] | None:
    """The checkpoints the `checkpoint` index of `folder` names, oldest first,
    joined onto the folder (as TensorFlow reads them); None when there is
    no index, ValueError (what is wrong) when it cannot be read."""
    path = os.path.join(folder, CHECKPOINT_INDEX)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise ValueError("not a checkpoint index") from None
    latest, named = "", []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _INDEX_LINE.match(line)
        if not match or match.group(1) not in _INDEX_FIELDS:
            raise ValueError("not a checkpoint index")
        if match.group(1) in ("model_checkpoint_path", "all_model_checkpoint_paths"):
            if not match.group(2).startswith('"'):
                raise ValueError("not a checkpoint index")
            name = ast.literal_eval(match.group(2))
            if match.group(1) == "model_checkpoint_path":
                latest = name
            else:
                named.append(name)
    if not latest:
        raise ValueError("it names no checkpoint")
    return [os.path.join(folder, name) for name in (named or [latest])]


class CheckpointFiles:
    """A folder of checkpoints `ckpt-<step>.index/.data-*` and its `checkpoint`
    index, read without TensorFlow: which checkpoint to restore.

    Args:
        path: the folder.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)

    @staticmethod
    def problem(prefix: str) -> str | None:
        """Why the checkpoint `prefix` cannot be restored, or None when it looks intact.

        Cheap: reads the .index (the tensor table) and compares the sizes of
        the .data shards with the bytes the table needs, so a missing or
        truncated file is found without reading the weights. A damaged byte
        inside .data shows only when restoring (a checksum error).
        """
        if not os.path.isfile(prefix + ".index"):
            return "its .index file is missing"
        try:
            needed = tensor_bytes(prefix)
        except (OSError, ValueError) as e:
            return f"its .index file is unreadable ({getattr(e, 'strerror', None) or e})"
        shards = glob.glob(glob.escape(prefix) + ".data-*-of-*")
        match = re.search(r"-of-(\d+)$", shards[0]) if shards else None
        expected = int(match.group(1)) if match else 1
        if len(shards) < expected:
            return f"{expected - len(shards)} of its {expected} .data file(s) are missing"
        size = sum(os.path.getsize(p) for p in shards)
        if size < needed:
            return f"its .data file is truncated ({size} of at least {needed} bytes)"
        return None

    def _candidates(self, log: Log) -> list[str]:
        """Checkpoint prefixes here, newest first: those the `checkpoint` index
        names and those whose `ckpt-N.index` file is here (a save killed before
        it updated the index leaves a complete checkpoint the index does not
        name). An unreadable index is said in one line and otherwise ignored."""
        try:
            named = read_checkpoint_index(self.path) or []
        except (OSError, ValueError) as e:
            named = []
            log(f"The checkpoint index {os.path.join(self.path, CHECKPOINT_INDEX)} is "
                f"unreadable ({getattr(e, 'strerror', None) or e}); using the checkpoint "
                f"files found beside it.")
        found = [p[:-len(".index")] for p in
                 glob.glob(os.path.join(glob.escape(self.path), f"{CHECKPOINT_PREFIX}-*.index"))
                 if re.fullmatch(rf"{CHECKPOINT_PREFIX}-\d+", os.path.basename(p)[:-6])]
        unique = {os.path.normpath(p): p for p in [*named, *found]}
        return sorted(unique.values(), key=lambda p: (checkpoint_step(p) or -1, p),
                      reverse=True)

    def intact(self, log: Log = stderr_log) -> list[str]:
        """The intact checkpoints' prefixes, oldest first (others said and skipped)."""
        intact = []
        for prefix in self._candidates(log):
            problem = self.problem(prefix)
            if problem:
                log(f"Skipping the checkpoint {prefix}: {problem}.")
            else:
                intact.append(prefix)
        return intact[::-1]

    def restore_newest(self, restore: Callable[[str], None] = lambda prefix: None,
                       log: Log = stderr_log) -> str | None:
        """Call `restore(prefix)` on the newest intact checkpoint; return its prefix.

        A checkpoint that is missing files, truncated, or whose restore finds
        a damaged byte (`CorruptCheckpointError`), is skipped with one line
        saying which and why, and the next older one is tried. None when the
        folder holds no checkpoint; a UserError when it holds some but none
        is intact. With the default `restore`, the newest intact checkpoint.
        """
        candidates = self._candidates(log)
        for prefix in candidates:
            problem = self.problem(prefix)
            if problem is None:
                try:
                    restore(prefix)
                    return prefix
                except CorruptCheckpointError as e:
                    problem = e.reason
            log(f"Skipping the checkpoint {prefix}: {problem}.")
        if candidates:
            raise self._none_intact(len(candidates))
        return None

    def latest(self) -> str | None:
        """The newest intact checkpoint, quietly (None when there is none)."""
        return self.restore_newest(log=quiet)

    def none_intact(self) -> UserError | None:
        """The error for a folder whose checkpoints are all damaged (`intact`
        said each), naming best/'s intact one where there is one; None when
        the folder holds no checkpoint at all."""
        count = len(self._candidates(quiet))
        return self._none_intact(count) if count else None

    def _none_intact(self, count: int) -> UserError:
        best = os.path.join(self.path, BEST_DIR)
        kept = CheckpointFiles(best).latest() if os.path.isdir(best) else None
        if kept:
            return UserError(
                f"none of the {count} checkpoint(s) in {self.path} can be read (each is "
                f"named above), but {best} holds an intact one, {kept}: decode or export "
                f"with --checkpoint_path={best}, or train on from it in a new --output_dir "
                f"with --warm_start_from={kept}. Received: output_dir={self.path!r}")
        return UserError(f"none of the {count} checkpoint(s) in {self.path} can be read (each "
                         f"is named above); train again in a new --output_dir. "
                         f"Received: output_dir={self.path!r}")

    def _check_named(self, prefix: str) -> None:
        """A one-line UserError when the checkpoint `prefix` was named but cannot be read."""
        if not os.path.isfile(prefix + ".index"):
            raise UserError(f"no checkpoint at {prefix} (its .index file "
                            f"is missing). Received: checkpoint_path={prefix!r}")
        problem = self.problem(prefix)
        if problem:
            raise CorruptCheckpointError(
                f"the checkpoint {prefix} is damaged: {problem}; name another "
                f"--checkpoint_path, or leave it out to use the newest intact checkpoint "
                f"of {self.path}. Received: checkpoint_path={prefix!r}", reason=problem)

    def find(self, checkpoint_path: str | None = None, log: Log = stderr_log,
             restore: Callable[[str], None] | None = None) -> str:
        """The checkpoint to restore: `checkpoint_path` (checked), or the newest
        intact checkpoint here; a UserError when there is none or the named one
        is damaged. Each checkpoint skipped is said through `log`.

        `checkpoint_path` is a checkpoint prefix, or a folder of checkpoints
        (`output_dir/best`, `output_dir/averaged`): then the newest intact in
        it. With `restore`, it is called on the checkpoint chosen; where it
        finds a damaged byte (`CorruptCheckpointError`) of one not named, that
        one is skipped (said) and the next older one tried.
        """
        if checkpoint_path and not os.path.isdir(checkpoint_path):
            self._check_named(checkpoint_path)
            if restore is not None:
                restore(checkpoint_path)
            return checkpoint_path
        folder = CheckpointFiles(checkpoint_path) if checkpoint_path else self
        path = folder.restore_newest(restore or (lambda prefix: None), log)
        if path:
            return path
        if checkpoint_path:
            raise UserError(f"no checkpoint in the folder {checkpoint_path}; pass a "
                            f"checkpoint prefix such as "
                            f"{os.path.join(checkpoint_path, CHECKPOINT_PREFIX)}-<step>. "
                            f"Received: checkpoint_path={checkpoint_path!r}")
        raise UserError(f"no checkpoint in {self.path}; train first, or pass "
                        f"--checkpoint_path. Received: output_dir={self.path!r}")
