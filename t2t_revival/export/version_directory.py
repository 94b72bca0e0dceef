"""Versioned export directories: `export_dir/<version>/`, written atomically.

Both exports (the TF Serving SavedModel and the CTranslate2 model) write one
folder per version under a temporary name and rename it when complete, so a
server polling `export_dir` never loads half a model. What killed exports
left there is cleared first (`remove_export_leftovers`), each removal said
through the caller's `log` (the CLIs print it to stderr).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from typing import Callable

from t2t_revival.files.atomic_file import disk_failure, disk_failure_fix, pid_alive, replace_directory
from t2t_revival.errors import UserError
from t2t_revival.run_dir.file_names import checkpoint_step


def checkpoint_version(checkpoint_path: str) -> int:
    """The step of a checkpoint prefix (`.../ckpt-300` -> 300), else the Unix time."""
    step = checkpoint_step(checkpoint_path)
    return int(time.time()) if step is None else step


def write_version_directory(export_dir: str, version: int, write: Callable[[str], None],
                            log: Callable[[str], None] | None = None) -> str:
    """Call `write(tmp_dir)`, then rename tmp_dir to `export_dir/<version>`; return it.

    Re-exporting an existing version replaces it. On any error the temporary
    folder is removed and an existing version is left as it was; a write the
    disk refused (full, read-only: `disk_failure`) is one UserError line.
    What killed exports left is cleared first, said through `log` (when given).
    """
    final = os.path.join(export_dir, str(version))
    tmp = os.path.join(export_dir, f".{version}.incomplete{os.getpid()}")
    try:
        os.makedirs(export_dir, exist_ok=True)
        remove_export_leftovers(export_dir, log)
        shutil.rmtree(tmp, ignore_errors=True)
        write(tmp)
        # An existing version is swapped for the new one in one step (Linux),
        # so neither a server's poll nor a kill ever finds the version missing.
        replace_directory(tmp, final)
    except Exception as e:
        reason = disk_failure(e)
        if reason is None:
            raise
        kept = f"version {version} there is unchanged" if os.path.isdir(final) else \
            "no partial export is left"
        raise UserError(f"could not write the export {final} ({reason}); {kept}; "
                        f"{disk_failure_fix(reason)}, then export again. "
                        f"Received: export_dir={export_dir!r}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


_LEFTOVER = re.compile(r"^\.(\d+)\.(incomplete|old)(\d*)$")


def remove_export_leftovers(export_dir: str, log: Callable[[str], None] | None = None) -> None:
    """Clear what killed exports left in `export_dir`: remove
    `.<version>.incomplete<pid>` folders whose process is gone (a live
    export's are left alone), and put back a replaced version that a kill
    left at its old name (`.<version>.old`, `replace_directory` where it
    cannot swap in one step; `.<version>.old<pid>` of earlier releases) when
    the version itself is missing, else remove it. Each is one line to `log`
    (when given); a missing `export_dir` has nothing to clear."""
    say = log or (lambda line: None)
    names = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        names = sorted(os.listdir(export_dir))
    for name in names:
        match = _LEFTOVER.match(name)
        if not match:
            continue
        version, kind, pid = match.groups()
        path = os.path.join(export_dir, name)
        if kind == "incomplete" and pid and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            say(f"Removed {path}, left by an interrupted export.")
        elif kind == "old" and (not pid or not pid_alive(int(pid))):
            final = os.path.join(export_dir, version)
            if os.path.exists(final):
                shutil.rmtree(path, ignore_errors=True)
                say(f"Removed {path}, left by an interrupted export.")
            else:
                os.replace(path, final)
                say(f"Put back {final} from {path}, where an interrupted export left it.")
