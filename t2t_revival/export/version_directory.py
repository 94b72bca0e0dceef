"""Versioned export directories: `export_dir/<version>/`, written atomically.

Both exports (the TF Serving SavedModel and the CTranslate2 model) write one
folder per version under a temporary name and rename it when complete, so a
server polling `export_dir` never loads half a model.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Callable

from t2t_revival.run_dir.file_names import checkpoint_step


def checkpoint_version(checkpoint_path: str) -> int:
    """The step of a checkpoint prefix (`.../ckpt-300` -> 300), else the Unix time."""
    step = checkpoint_step(checkpoint_path)
    return int(time.time()) if step is None else step


def write_version_directory(export_dir: str, version: int,
                            write: Callable[[str], None]) -> str:
    """Call `write(tmp_dir)`, then rename tmp_dir to `export_dir/<version>`; return it.

    Re-exporting an existing version replaces it. On any error the temporary
    folder is removed and an existing version is left as it was.
    """
    final = os.path.join(export_dir, str(version))
    os.makedirs(export_dir, exist_ok=True)
    tmp = os.path.join(export_dir, f".{version}.incomplete{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write(tmp)
        if os.path.exists(final):
            old = os.path.join(export_dir, f".{version}.old{os.getpid()}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
