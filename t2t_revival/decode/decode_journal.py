"""The decoder's translations written as they are decoded, so that a full
disk stops it at once and a rerun continues.

`t2t-decoder --decode_to_file=OUT` appends each decoded batch to
`OUT.partial` (`PARTIAL_SUFFIX`): a first line naming what is decoded (a
digest of the inputs, the checkpoint and the decode settings), then one line
`<input line number><TAB><translation>` per decoded line, in the order
decoded. The first write the disk refuses stops the decoder with one line;
`OUT.partial` keeps every line written whole. When all lines are decoded,
OUT is written atomically and `OUT.partial` removed. The same command,
rerun, reads `OUT.partial` (when its first line matches) and decodes only
the lines it lacks; a kill or a stop signal leaves it for a rerun too.

The first line names the checkpoint by a digest of its files as well as by
its path (`checkpoint_digest`): a checkpoint rewritten under the same name
(t2t-avg-checkpoints' averaged/ckpt-N) starts the decode afresh, said in one
line, rather than mixing two models' translations. A journal that cannot be
read (a line that is not `<number><TAB><text>`, bytes that are not UTF-8) is
kept aside as `OUT.partial.damaged`, said in one line, and the decode starts
from the first line; a folder of the journal's name is a UserError.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import Callable, Sequence

from t2t_revival.errors import UserError
from t2t_revival.files.atomic_file import (DiskWriteError, disk_failure, disk_failure_fix,
                                     write_atomically)

PARTIAL_SUFFIX = ".partial"
DAMAGED_SUFFIX = ".damaged"
"""Added to the name of a journal that cannot be read, kept aside."""


def quiet(message: str) -> None:
    """A log that says nothing (the default: the caller passes its own)."""


class DecodeJournal:
    """`OUT.partial`: the translations decoded so far of one decode to `out_path`.

    Args:
        out_path: the decode's output file (`--decode_to_file`).
        sources: the input lines.
        identity: what else makes the translations these (the checkpoint's
            path and the decode settings): a journal of another is started afresh.
        checkpoint: a digest of the checkpoint's files (`checkpoint_digest`),
            or "": a journal of the same path whose digest differs is started
            afresh, said.
    """

    def __init__(self, out_path: str, sources: Sequence[str], identity: dict,
                 checkpoint: str = ""):
        self.out_path, self.path = out_path, out_path + PARTIAL_SUFFIX
        self.total = len(sources)
        what = json.dumps({"sources": "\n".join(sources), **identity}, sort_keys=True)
        # The decode's digest, then the checkpoint's contents': 32 digits, as
        # ever (a journal's first line takes no more of a full disk's room).
        self._decode = f"t2t-decoder partial {hashlib.sha256(what.encode()).hexdigest()[:20]}"
        self.header = self._decode + (checkpoint[:12] or "0" * 12)
        self.done: dict[int, str] = {}
        """{input index: its translation} written to the journal."""
        self._file = None
        self._size = 0   # bytes of the journal written whole

    def resume(self, log: Callable[[str], None] = quiet) -> int:
        """Read the lines an earlier run of the same decode wrote; returns how
        many. A journal of other inputs or settings is replaced; one of
        another checkpoint of the same path, or damaged, too, said in one
        line through `log` (the damaged one kept aside)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        except IsADirectoryError:
            raise UserError(f"{self.path} is a folder; t2t-decoder keeps the lines it has "
                            f"decoded in a file of that name: move or remove the folder, or "
                            f"decode to another --decode_to_file. "
                            f"Received: decode_to_file={self.out_path!r}") from None
        lines = data.split(b"\n")
        first = lines[0].decode("utf-8", "replace")
        if first == self.header and len(lines) > 1:
            try:
                self._read(lines)
            except ValueError as e:
                self.done.clear()
                self._size = 0
                damaged = self.path + DAMAGED_SUFFIX
                os.replace(self.path, damaged)
                log(f"{self.path} is damaged ({e}); kept as {damaged}, and decoding from "
                    f"the first line")
        elif first.startswith(self._decode) and len(first) == len(self.header):
            log(f"The checkpoint changed since the partial decode in {self.path} (a file "
                f"rewritten under the same name); starting over")
        self._open()
        return len(self.done)

    def _read(self, lines: list[bytes]) -> None:
        """The journal's lines after its first into `done` (a ValueError,
        saying which line, when one cannot be read)."""
        self._size = len(lines[0]) + 1
        for number, raw in enumerate(lines[1:-1], 2):   # the last: cut short, or ""
            try:
                index, tab, text = raw.decode("utf-8").partition("\t")
            except UnicodeDecodeError:
                raise ValueError(f"line {number} is not UTF-8") from None
            if not tab or not index.isascii() or not index.isdigit() \
                    or int(index) >= self.total:
                raise ValueError(f"line {number} is not an input line's number, a tab and "
                                 f"its translation")
            self.done[int(index)] = text
            self._size += len(raw) + 1

    def _open(self) -> None:
        try:
            if self._size:
                os.truncate(self.path, self._size)   # a line cut short by a kill
                self._file = open(self.path, "a", encoding="utf-8")
            else:
                self._file = open(self.path, "w", encoding="utf-8")
                self._write(self.header + "\n")
        except OSError as e:
            self._refused(e)

    def _write(self, text: str) -> None:
        self._file.write(text)
        self._file.flush()   # on disk now: a refusal is found here, not at the end
        self._size += len(text.encode("utf-8"))

    def add(self, indices: Sequence[int], translations: Sequence[str]) -> None:
        """Append a decoded batch (input indices and their translations)."""
        try:
            self._write("".join(f"{i}\t{t}\n" for i, t in zip(indices, translations)))
        except OSError as e:
            self._refused(e)
        self.done.update(zip(indices, translations))

    def _refused(self, error: OSError):
        """A write the disk refused: the journal cut back to its whole lines,
        then one line; another error keeps its traceback."""
        reason = disk_failure(error)
        if reason is None:
            raise error
        self.close()
        with contextlib.suppress(OSError):
            os.truncate(self.path, self._size)
        raise DiskWriteError(
            f"could not write {self.path} ({reason}) after {len(self.done)} of {self.total} "
            f"lines; they are kept there, and {self.out_path} is as it was: "
            f"{disk_failure_fix(reason)} (the finished file needs about as much again), "
            f"then rerun the same command, which decodes only the lines not kept. "
            f"Received: decode_to_file={self.out_path!r}", reason) from None

    def finish(self, translations: Sequence[str], delimiter: str = "\n") -> None:
        """Write the output file (atomically), each translation ended by
        `delimiter` (tensor2tensor's decode key), then remove the journal."""
        self.close()
        try:
            write_atomically(self.out_path, "".join(t + delimiter for t in translations))
        except DiskWriteError as e:
            raise DiskWriteError(
                f"could not write {self.out_path} ({e.reason}); all {self.total} lines are "
                f"decoded and kept in {self.path}: {disk_failure_fix(e.reason)}, then rerun "
                f"the same command, which writes them without decoding again. "
                f"Received: decode_to_file={self.out_path!r}", e.reason) from None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
