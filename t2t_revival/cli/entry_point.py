"""A CLI's entry point (`run`): user errors as one line and exit status 2,
`--help` that exits 0, a stop signal or a closed output as one line and the
shell's status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Callable, NoReturn

from absl import app, flags

from t2t_revival.cli.tensor2tensor_flags import HELP_SECTION
from t2t_revival.cli.tensorflow_noise import VERBOSE_FLAG
from t2t_revival.errors import UserError
from t2t_revival.process.stop_controller import StopController
from t2t_revival.process.stopped_by_signal import StoppedBySignal

USAGE_ERROR = 2


def report(prog: str, message: str) -> None:
    """Print `prog: error: message` as one line on stderr (and go on)."""
    one_line = " ".join(str(message).split())
    print(f"{prog}: error: {one_line}", file=sys.stderr, flush=True)


def fail(prog: str, message: str, status: int = USAGE_ERROR) -> NoReturn:
    """Print `prog: error: message` as one line on stderr and exit."""
    report(prog, message)
    sys.exit(status)


def closed_output() -> NoReturn:
    """End quietly, status 141 (128 + SIGPIPE), as a shell tool does when the
    reader of its output went away (`t2t-decoder ... | head -3`): nothing is
    lost that the reader wanted, and there is nothing to report."""
    with contextlib.suppress(OSError):   # no flush of the dead pipe at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    os._exit(128 + signal.SIGPIPE)


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
    for flag in [*flags.FLAGS.get_key_flags_for_module(module_name),
                 flags.FLAGS[VERBOSE_FLAG]]:
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    if main_module is not None and module.__doc__:
        main_module.__doc__ = module.__doc__
        if flags.FLAGS.get_flags_for_module(HELP_SECTION):
            main_module.__doc__ += (
                "\ntensor2tensor's flag names are taken too (the same, mapped to ours, "
                "without effect, or refused, each with a line): --helpfull lists them.\n")


def _required_flag(error: flags.Error) -> str | None:
    """absl's refusal of a missing required flag ("flag --output_dir=None: Flag
    --output_dir must have a value other than None.") in our words, or None."""
    missing = [name for name in flags.FLAGS if str(error).startswith(f"flag --{name}=None:")]
    if not missing:
        return None
    flag = flags.FLAGS[missing[0]]
    what = flag.help.rstrip(".")
    return f"--{flag.name} is required: {what[:1].lower()}{what[1:]}. Received: {flag.name}=None"


def run(main: Callable[[list[str]], int | None], prog: str | None = None) -> None:
    """`absl.app.run(main)` where a bad flag or a UserError is one line, exit 2.

    SIGTERM, SIGINT (Ctrl-C) and SIGHUP stop it with one line, `prog: stopped
    by SIGTERM`, and exit status 128 + the signal number (143, 130, 129)
    (`StopController`). Any other exception is a bug and keeps its traceback.
    """
    prog = prog or os.path.basename(sys.argv[0])
    stop = StopController.process()
    stop.install(prog)
    _show_module_in_help(main.__module__)

    def parse_flags(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            fail(prog, f"{_required_flag(e) or e}. Run {prog} --helpshort for the flags.")
        except SystemExit as e:
            # absl's --help/--helpshort/--helpfull/--helpxml print and exit 1;
            # asking for help is not a failure.
            sys.exit(0 if e.code == 1 else e.code)

    def guarded(argv: list[str]) -> int | None:
        if len(argv) > 1:
            fail(prog, f"unexpected positional arguments; every option is a "
                       f"--flag. Received: {' '.join(argv[1:])}")
        try:
            status = main(argv)
        except StoppedBySignal as e:
            stop.stop_process(e)
        except BaseException as e:
            if stop.stop_signal is not None:   # what the signal became
                stop.stop_process(StoppedBySignal(stop.stop_signal))
            if isinstance(e, UserError):
                fail(prog, str(e))
            if isinstance(e, KeyboardInterrupt):
                stop.stop_process(StoppedBySignal(signal.SIGINT))
            if isinstance(e, BrokenPipeError):
                closed_output()
            raise
        if stop.stop_signal is not None:  # code that caught the signal's exception went on
            stop.stop_process(StoppedBySignal(stop.stop_signal))
        try:
            sys.stdout.flush()   # now, where a closed pipe can still be told apart
        except BrokenPipeError:
            closed_output()
        return status

    try:
        app.run(guarded, flags_parser=parse_flags)
    except StoppedBySignal as e:  # while parsing the flags, or after main
        stop.stop_process(e)
