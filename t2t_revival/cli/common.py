"""What every CLI shares: user errors as one line and exit status 2."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Callable

from absl import app, flags

from t2t_revival.errors import UserError

USAGE_ERROR = 2


def report(prog: str, message: str) -> None:
    """Print `prog: error: message` as one line on stderr (and go on)."""
    one_line = " ".join(str(message).split())
    print(f"{prog}: error: {one_line}", file=sys.stderr, flush=True)


def fail(prog: str, message: str, status: int = USAGE_ERROR) -> None:
    """Print `prog: error: message` as one line on stderr and exit."""
    report(prog, message)
    sys.exit(status)


def check_directory(flag: str, path: str | None, writable: bool = False) -> str:
    """The directory `--flag` names, refused as one line when it cannot be one.

    Refused: an empty value, a path that is a file (or under one) and, with
    `writable`, a place where no file can be created (checked by creating one
    in the directory, or in its nearest existing parent when it does not
    exist yet), so long work never starts only to fail at its first write.
    """
    if not path:
        raise UserError(f"--{flag} must name a directory. Received: --{flag}={path!r}")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"--{flag} names a file, not a directory; point it at a "
                        f"directory. Received: --{flag}={path!r}")
    if writable or not os.path.exists(path):
        _check_can_create_in(flag, path, path, writable)
    return path


def check_output_file(flag: str, path: str) -> str:
    """`--flag` names a file that can be written (temp file and rename beside it)."""
    if not path or os.path.isdir(path):
        raise UserError(f"--{flag} must name a file, and {path!r} is "
                        f"{'a directory' if path else 'empty'}. Received: --{flag}={path!r}")
    _check_can_create_in(flag, os.path.dirname(os.path.abspath(path)), path, True)
    return path


def _check_can_create_in(flag: str, directory: str, path: str, writable: bool) -> None:
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"--{flag} lies under {existing}, which is a file, not a "
                        f"directory. Received: --{flag}={path!r}")
    if not writable:
        return
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise UserError(f"cannot write in {existing} ({e.strerror}); choose a writable "
                        f"--{flag} or fix the folder's permissions. "
                        f"Received: --{flag}={path!r}") from None


def _show_module_in_help(module_name: str) -> None:
    """Make `--help`/`--helpshort` show `module_name`'s docstring and flags.

    absl prints the docstring of `__main__` and the flags registered under
    `sys.argv[0]`; for a console script (`t2t-decoder`) or a thin wrapper
    (`t2t_trainer.py`) those are the wrapper's: no text and no flags. So the
    CLI module's flags are registered as key flags of `sys.argv[0]` too, and
    its docstring stands in for the wrapper's.
    """
    module = sys.modules.get(module_name)
    main_module = sys.modules.get("__main__")
    if module is None or module is main_module:
        return
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    if main_module is not None and module.__doc__:
        main_module.__doc__ = module.__doc__


def run(main: Callable[[list[str]], int | None], prog: str | None = None) -> None:
    """`absl.app.run(main)` where a bad flag or a UserError is one line, exit 2.

    Any other exception is a bug and keeps its traceback.
    """
    prog = prog or os.path.basename(sys.argv[0])
    _show_module_in_help(main.__module__)

    def parse_flags(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            fail(prog, f"{e}. Run {prog} --helpshort for the flags.")

    def guarded(argv: list[str]) -> int | None:
        if len(argv) > 1:
            fail(prog, f"unexpected positional arguments; every option is a "
                       f"--flag. Received: {' '.join(argv[1:])}")
        try:
            return main(argv)
        except UserError as e:
            fail(prog, str(e))
        except KeyboardInterrupt:
            fail(prog, "interrupted", status=130)

    app.run(guarded, flags_parser=parse_flags)
