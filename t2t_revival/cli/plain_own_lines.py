"""Our own log lines as the user reads them: no absl prefix.

The library says what it does through absl logging (datagen's progress, a
corpus line it skips, a download that failed). absl writes each record as
`I1128 00:40:23.874246 139654954986368 text2text_problem.py:103] message`:
a date, a thread id and a source line that tell a user nothing about their
run. At default verbosity a CLI shows our records (the project's code and a
`--t2t_usr_dir`'s) as the message alone, a warning or an error with its level
first:

    translate_ende_multi30k train: 29000 pairs encoded in 3.2 s (9050 pairs/s)
    warning: train.en.gz:5 is not valid UTF-8 (...); skipping this pair.

A record of an installed library (TensorFlow, Keras: a warning that gets
through `tensorflow_noise`'s filter) keeps absl's format, which says where it
comes from. `--verbose` (absl's -v/--verbosity >= 1) keeps absl's format for
every line.
"""

from __future__ import annotations

import importlib.util
import logging as py_logging
import os
import sysconfig

from absl import logging as absl_logging

from t2t_revival.cli.tensorflow_noise import verbose_requested

# The folders of installed libraries and of the standard library.
_LIBRARY_DIRS = tuple({os.path.join(os.path.realpath(sysconfig.get_paths()[key]), "")
                       for key in ("purelib", "platlib", "stdlib", "platstdlib")})
_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


def _own_dirs() -> tuple[str, ...]:
    """The folders of this project's packages (the problems and hparam sets
    are mapped from the repository's `problems/` and `hparams/`), found
    without importing them."""
    dirs = []
    for name in ("t2t_revival", "t2t_revival.problems", "t2t_revival.hparams_sets"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [os.path.join(os.path.realpath(d), "")
                     for d in spec.submodule_search_locations]
    return tuple(dirs)


class PlainOwnLines(absl_logging.PythonFormatter):
    """absl's formatter, but our records (not an installed library's) are the
    message alone, and `level: message` from WARNING up."""

    def __init__(self):
        super().__init__()
        self.own_dirs = _own_dirs()

    def is_own(self, record: py_logging.LogRecord) -> bool:
        path = os.path.realpath(record.pathname)
        if path.startswith(self.own_dirs):
            return True
        return not (path.startswith(_LIBRARY_DIRS) or any(m in path for m in _LIBRARY_MARKERS))

    def format(self, record: py_logging.LogRecord) -> str:
        if not self.is_own(record):
            return super().format(record)
        message = py_logging.Formatter.format(self, record)   # the message (and a traceback)
        if record.levelno >= py_logging.WARNING:
            message = f"{record.levelname.lower()}: {message}"
        return message


def show_own_lines_plain(argv: list[str]) -> None:
    """Unless argv asks for everything (`--verbose`), write our absl records
    as plain lines (`PlainOwnLines`)."""
    if verbose_requested(argv):
        return
    absl_logging.get_absl_handler().setFormatter(PlainOwnLines())
