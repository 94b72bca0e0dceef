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


def run(main: Callable[[list[str]], int | None], prog: str | None = None) -> None:
    """`absl.app.run(main)` where a bad flag or a UserError is one line, exit 2.

    Any other exception is a bug and keeps its traceback.
    """
    prog = prog or os.path.basename(sys.argv[0])

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
