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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import Sequence

from t2t_revival.files.atomic_file import (DiskWriteError, disk_failure, disk_failure_fix,
                                     write_atomically)

PARTIAL_SUFFIX = ".partial"


class DecodeJournal:
    """`OUT.partial`: the translations decoded so far of one decode to `out_path`.

    Args:
        out_path: the decode's output file (`--decode_to_file`).
        sources: the input lines.
        identity: what else makes the translations these (the checkpoint and
            the decode settings): a journal of another is started afresh.
    """

    def __init__(self, out_path: str, sources: Sequence[str], identity: dict):
        self.out_path, self.path = out_path, out_path + PARTIAL_SUFFIX
        self.total = len(sources)
        what = json.dumps({"sources": "\n".join(sources), **identity}, sort_keys=True)
        self.header = f"t2t-decoder partial {hashlib.sha256(what.encode()).hexdigest()[:32]}"
        self.done: dict[int, str] = {}
        """{input index: its translation} written to the journal."""
        self._file = None
        self._size = 0   # bytes of the journal written whole

    def resume(self) -> int:
        """Read the lines an earlier run of the same decode wrote; returns how
        many. A journal of other inputs or settings is replaced."""
        with contextlib.suppress(FileNotFoundError):
            with open(self.path, "rb") as f:
                data = f.read()
            lines = data.split(b"\n")
            if lines and lines[0].decode("utf-8", "replace") == self.header:
                self._size = len(lines[0]) + 1
                for raw in lines[1:-1]:   # the last: after the final newline, or cut short
                    index, _, text = raw.decode("utf-8").partition("\t")
                    self.done[int(index)] = text
                    self._size += len(raw) + 1
        self._open()
        return len(self.done)

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
