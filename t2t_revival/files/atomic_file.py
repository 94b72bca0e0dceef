"""Writing a file atomically: a temporary name beside it, then a rename.

Every file the project writes for others to read (hparams.json, run.json, the
vocabulary, datagen's text files and shards, decodes, downloads) goes through
here, so that a kill mid-write never leaves a half-written file under the
final name, and every such file has the same mode, `FILE_MODE` (0644): a
serving container or a teammate running as another user can read it.

A whole file or folder built before it is renamed into place (a cache
entry, an imported run) is built at `temporary_name` beside it: named after
the building process, so that `remove_dead_temporaries` removes what a
killed process left and nothing a live one is building.

It also owns what a write that the disk refuses becomes: `disk_failure`
recognizes a full disk, an exceeded quota or a read-only file system (from
Python or from TensorFlow's writers), and `atomic_output` turns it into one
`UserError` line naming the file, after removing its temporary file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
import time
from typing import IO, Iterator, Sequence

from t2t_revival.errors import UserError
from t2t_revival.process.stop_controller import StopController

FILE_MODE = 0o644
"""rw-r--r--: readable by every user, whatever the umask."""

_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""A write the disk refuses: full, over quota, read-only."""


class DiskWriteError(UserError):
    """A write the disk refused, said in one line; `reason` is the system's."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):   # (a datagen worker's error crosses to the parent pickled)
        return type(self), (str(self), self.reason)


def disk_failure(error: BaseException) -> str | None:
    """The system's reason ("No space left on device", "Disk quota exceeded",
    "Read-only file system") when `error` is a write the disk refused, else None.

    Recognizes an `OSError` by its errno, a `DiskWriteError` (already said
    for one file) by its reason, and TensorFlow's errors (a
    checkpoint or SavedModel save, a TFRecord writer) by the system's reason in
    their message; anything else is not a disk failure (and keeps its traceback).
    """
    if isinstance(error, DiskWriteError):
        return error.reason
    if isinstance(error, OSError) and error.errno in _DISK_ERRNOS:
        return error.strerror or os.strerror(error.errno)
    message = getattr(error, "message", None)
    if type(error).__module__.startswith("tensorflow") and isinstance(message, str):
        for code in _DISK_ERRNOS:
            if os.strerror(code) in message:
                return os.strerror(code)
    return None


def disk_failure_fix(reason: str) -> str:
    """What to do about a `disk_failure` reason, as a clause."""
    if reason == os.strerror(errno.EROFS):
        return "write to a writable folder instead"
    return "free some space on that disk"


TEMPORARY_SUFFIX = ".incomplete"
"""`atomic_output`'s temporary file beside `path`: `.<name of path>.<random>` + this."""


def remove_leftover_temporaries(directory: str, prefixes: Sequence[str]) -> list[str]:
    """Remove the temporary files (`TEMPORARY_SUFFIX`) in `directory` of outputs
    whose names start with one of `prefixes`, and return their paths.

    What a kill (SIGKILL, a power cut) leaves of a write in progress: no
    `finally` ran to remove it. Only for a writer that alone writes those
    outputs (datagen at its start): another process's write in progress
    would lose its file.
    """
    removed = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for name in sorted(os.listdir(directory)):
            if name.endswith(TEMPORARY_SUFFIX) and any(
                    name.startswith("." + prefix) for prefix in prefixes):
                path = os.path.join(directory, name)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed.append(path)
    return removed


def pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs (on this machine): whether what it left
    (a temporary file or folder named after it) may still be in use."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


TEMPORARY_PREFIX = ".tmp-"
"""A file or folder built beside its final name, then renamed into place:
`.tmp-<pid>-<time ns>[-<label>]` (`temporary_name`); what a killed process
left of one is found by its pid (`remove_dead_temporaries`)."""

_TEMPORARY = re.compile(rf"^{re.escape(TEMPORARY_PREFIX)}(\d+)-\d+(?:-(.*))?$")


def temporary_name(parent: str, label: str = "") -> str:
    """A path in `parent` for a file or folder to build, then rename into
    place: named after this process, so that `remove_dead_temporaries` knows
    it for a leftover once the process is gone. Nothing is created."""
    suffix = f"-{label}" if label else ""
    return os.path.join(parent, f"{TEMPORARY_PREFIX}{os.getpid()}-{time.time_ns()}{suffix}")


def temporary_folder(parent: str, label: str = "") -> str:
    """`temporary_name`, created as an empty folder (mode 0755); returns it."""
    path = temporary_name(parent, label)
    os.mkdir(path)
    os.chmod(path, 0o755)
    return path


def remove_dead_temporaries(parent: str, label: str | None = None) -> list[str]:
    """Remove the `temporary_name` files and folders in `parent` (of `label`
    only, when given) whose process is gone: what a kill left of a build;
    return their paths. Those of live processes, this one's included, stay."""
    removed = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for name in sorted(os.listdir(parent)):
            match = _TEMPORARY.match(name)
            if not match or (label is not None and match.group(2) != label) \
                    or pid_alive(int(match.group(1))):
                continue
            path = os.path.join(parent, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            removed.append(path)
    return removed


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """Yield a temporary path beside `path`; on success it becomes `path`.

    The caller writes the temporary file (by any means: open, a TFRecord
    writer, a copy). When the block ends without an error the file gets mode
    `FILE_MODE` and is renamed to `path`, replacing what was there; on an
    error it is removed and `path` is left as it was, and a write the disk
    refused (`disk_failure`) becomes a one-line UserError naming `path`.
    Missing parent folders are created. A stop signal that ends the process
    without unwinding the block removes the temporary file too (the
    process's `StopController`, `removed_if_stopped`).
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.",
                                   suffix=TEMPORARY_SUFFIX, dir=directory)
        os.close(fd)
        with StopController.process().removed_if_stopped(tmp):
            yield tmp
            os.chmod(tmp, FILE_MODE)
            os.replace(tmp, path)
    except Exception as e:
        reason = disk_failure(e)
        if reason is None:
            raise
        kept = "the file already there is unchanged" if os.path.exists(path) else \
            "no partial file is left"
        raise DiskWriteError(f"could not write {path} ({reason}); {kept}; "
                             f"{disk_failure_fix(reason)}, then rerun. Received: path={path!r}",
                             reason) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
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


def exchange_paths(a: str, b: str) -> bool:
    """Swap the paths `a` and `b` in one step (Linux renameat2 RENAME_EXCHANGE).

    False when the system or file system cannot (then nothing was done, and
    `replace_directory` moves the old folder aside instead).
    """
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), a)


@contextlib.contextmanager
def built_directory(path: str, needed_bytes: int = 0) -> Iterator[str]:
    """Yield a temporary folder beside `path` (which must be new or an empty
    folder) to build; on success it becomes `path` (mode 0755), on an error it
    is removed: the folder appears whole or not at all.

    What a killed build of `path` left (SIGKILL, a power cut) is removed first
    (`remove_dead_temporaries`); a stop signal that ends the process without
    unwinding the block removes the folder too (`removed_if_stopped`). A write
    the disk refuses (`disk_failure`) becomes one DiskWriteError line saying
    that nothing was written, with `needed_bytes` (when given): what the
    folder needs.
    """
    parent, label = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    temp = None
    try:
        os.makedirs(parent, exist_ok=True)
        remove_dead_temporaries(parent, label)
        temp = temporary_folder(parent, label)
        with StopController.process().removed_if_stopped(temp):
            yield temp
            os.chmod(temp, 0o755)
            if os.path.isdir(path):
                os.rmdir(path)   # empty
            os.rename(temp, path)
    except BaseException as e:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        reason = disk_failure(e)
        if reason is None:
            raise
        needs = f" (it needs about {needed_bytes / 1e6:,.0f} MB)" if needed_bytes else ""
        raise DiskWriteError(f"could not write {path} ({reason}); nothing was written: the "
                             f"half-built folder beside it is removed; "
                             f"{disk_failure_fix(reason)}{needs}, then rerun the same "
                             f"command. Received: path={path!r}", reason) from None


def replace_directory(tmp: str, path: str) -> None:
    """Make the complete folder `tmp` the folder `path`, removing the old `path`.

    On Linux the two are swapped in one step, so `path` is never missing or
    partial, whatever moment a kill comes at; a kill before the old folder
    (now at `tmp`) is removed leaves it at `tmp`. Elsewhere the old folder is
    first renamed to `old_directory_name(path)`, then `tmp` to `path`: a kill
    between the two leaves both complete folders but no `path`, which the
    writer puts back on its next start.
    """
    if not os.path.exists(path):
        os.replace(tmp, path)
        return
    if not exchange_paths(tmp, path):
        old = old_directory_name(path)
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        os.replace(tmp, path)
        tmp = old
    shutil.rmtree(tmp, ignore_errors=True)


def old_directory_name(path: str) -> str:
    """Where `replace_directory` keeps the old folder while it swaps (no renameat2)."""
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.old")
