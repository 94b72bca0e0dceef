"""What every CLI shares: user errors as one line and exit status 2."""

from __future__ import annotations

import os
import sys
from typing import Callable

from absl import app, flags

from t2t_revival.errors import UserError

USAGE_ERROR = 2


def fail(prog: str, message: str, status: int = USAGE_ERROR) -> None:
    """Print `prog: error: message` as one line on stderr and exit."""
    one_line = " ".join(str(message).split())
    print(f"{prog}: error: {one_line}", file=sys.stderr, flush=True)
    sys.exit(status)


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
