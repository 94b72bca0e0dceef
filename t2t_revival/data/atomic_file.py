"""Files written under a temporary name and renamed into place when complete."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside `path`; rename it to `path` when the block ends.

    A reader never sees a half-written `path`: an exception (or a kill)
    leaves the old file, or none. `mode` is "w" (UTF-8 text) or "wb".
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'. Received: mode={mode!r}")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                               suffix=".incomplete", dir=directory)
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomically(path: str, text: str) -> None:
    """Write `text` (UTF-8) to `path` through `atomic_open`."""
    with atomic_open(path) as f:
        f.write(text)
