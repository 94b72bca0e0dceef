"""A CLI started with a standard stream closed (`>&-`, `2>&-`), as a cron job,
a daemon or a detached process may be: `reopen_closed_streams` gives each
closed one /dev/null.

Python starts such a process with `sys.stdout` (or `sys.stderr`) None, and
the descriptor free: the next file opened would get it, and TensorFlow's C++
logging (which writes to descriptor 2) would write into that file. With
/dev/null in its place, the work is done and saved as in a terminal, its
output going where the caller sent it, and the exit status is the work's.
"""

from __future__ import annotations

import io
import os
import sys

_STREAMS = (("stdin", os.O_RDONLY), ("stdout", os.O_WRONLY), ("stderr", os.O_WRONLY))


def reopen_closed_streams() -> None:
    """Put /dev/null on each of descriptors 0, 1, 2 that is closed, and give
    `sys.stdin`/`stdout`/`stderr` (and their `__...__` originals) that are
    None a text stream on their descriptor. Call first, before any file is opened."""
    for fd, (name, flags) in enumerate(_STREAMS):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, flags)
            if null != fd:   # (the lowest free descriptor: `fd` itself, unless an earlier one was)
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            stream = io.TextIOWrapper(io.FileIO(fd, "r" if fd == 0 else "w", closefd=False),
                                      encoding="utf-8", errors="backslashreplace",
                                      line_buffering=fd == 2)
            setattr(sys, name, stream)
            if getattr(sys, f"__{name}__") is None:
                setattr(sys, f"__{name}__", stream)
