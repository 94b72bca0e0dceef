"""Writing a file atomically: a temporary name beside it, then a rename.

Every file the project writes for others to read (hparams.json, run.json, the
vocabulary, datagen's text files and shards, decodes, downloads) goes through
here, so that a kill mid-write never leaves a half-written file under the
final name, and every such file has the same mode, `FILE_MODE` (0644): a
serving container or a teammate running as another user can read it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import IO, Iterator

FILE_MODE = 0o644
"""rw-r--r--: readable by every user, whatever the umask."""


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """Yield a temporary path beside `path`; on success it becomes `path`.

    The caller writes the temporary file (by any means: open, a TFRecord
    writer, a copy). When the block ends without an error the file gets mode
    `FILE_MODE` and is renamed to `path`, replacing what was there; on an
    error it is removed and `path` is left as it was. Missing parent folders
    are created.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".incomplete",
                               dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside `path` for writing; it becomes `path` (0644)
    when the block ends without an error. `mode` is "w" (UTF-8 text) or "wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'. Received: mode={mode!r}")
    with atomic_output(path) as tmp:
        with open(tmp, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f


def write_atomically(path: str, data: str | bytes) -> None:
    """Write `data` (text as UTF-8, or bytes) to `path` atomically, mode 0644."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def copy_atomically(source: str, path: str) -> None:
    """Copy the file `source` to `path` atomically, mode 0644."""
    with atomic_output(path) as tmp:
        shutil.copyfile(source, tmp)
