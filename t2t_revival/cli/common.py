"""What every CLI shares: quiet start-up, user errors as one line and exit
status 2, `--help` that exits 0.

Quiet by default: TensorFlow's C++ start-up lines (the CUDA stub, the failed
cuInit of a machine without a GPU, the CPU feature guard, XLA's service lines)
tell a user nothing about their run. `quiet_tensorflow_startup`, called by
`t2t_revival/cli/__init__.py` before any CLI module (and so before TensorFlow)
is imported, sets `TF_CPP_MIN_LOG_LEVEL=2` (errors only) unless the user set it,
and drops the known start-up lines that TensorFlow prints whatever that level
(they go to the process's stderr before its logging is set up) while
`tensorflow` is imported and its devices listed; any other line is passed on.
`--verbose` (or absl's `--verbosity=1` and above) shows everything.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging as py_logging
import os
import re
import signal
import sys
import tempfile
import threading
from typing import Callable, Iterator

from absl import app, flags

from t2t_revival.atomic_file import remove_pending_temporaries
from t2t_revival.errors import UserError
from t2t_revival.stopped_by_signal import STOP_SIGNALS, StoppedBySignal

USAGE_ERROR = 2

flags.DEFINE_bool("verbose", False,
                  "Show TensorFlow's start-up and INFO log lines (hidden by default; "
                  "TF_CPP_MIN_LOG_LEVEL, when set, is kept).")

# Start-up lines of TensorFlow's C++ runtime, printed at import or when it lists
# its devices whatever TF_CPP_MIN_LOG_LEVEL says.
_STARTUP_NOISE = re.compile("|".join((
    r"All log messages before absl::InitializeLog\(\) is called",
    r"cudart_stub\.cc", r"Could not find cuda drivers",
    r"cuda_platform\.cc.*cuInit", r"cuda_(dnn|fft|blas)\.cc.*Unable to register",
    r"cpu_feature_guard\.cc", r"^To enable the following instructions",
    r"oneDNN custom operations", r"TF_ENABLE_ONEDNN_OPTS",
    # SentencePiece inside tensorflow-text, when the exporter builds its tokenizer.
    r"normalizer\.cc.*precompiled_charsmap is empty",
)))
_quiet = False   # set by quiet_tensorflow_startup
_held_stderr: list[int] = []   # fds 2 that quiet_native_stderr blocks hold back, outermost first
# TensorFlow's and Keras's own Python INFO lines ("Function `serve` contains
# input name(s) ... which will be renamed ... in the SavedModel", "Sharding
# callback duration: ...") are hidden; ours are not. Most go through absl's
# logger, so they are told apart by the file that logs them.
_LIBRARY_PATHS = tuple(os.sep + os.path.join(*p) + os.sep for p in (
    ("tensorflow", "python"), ("keras", "src"), ("tensorflow_text", "python")))


class _LibraryInfoFilter(py_logging.Filter):
    """Drops INFO and DEBUG records logged from TensorFlow's or Keras's code."""

    def filter(self, record: py_logging.LogRecord) -> bool:
        return (record.levelno >= py_logging.WARNING
                or not any(p in record.pathname for p in _LIBRARY_PATHS))


def _verbose_requested(argv: list[str]) -> bool:
    """Whether argv asks for everything: --verbose, or absl's -v/--verbosity >= 1."""
    verbose = False
    for i, arg in enumerate(argv[1:], start=1):
        name, _, value = arg.partition("=")
        if name in ("--verbose", "--noverbose"):
            verbose = name == "--verbose" and value.lower() not in ("false", "0")
        elif name in ("-v", "--v", "-verbosity", "--verbosity"):
            if not value and i + 1 < len(argv):
                value = argv[i + 1]
            with contextlib.suppress(ValueError):
                verbose = verbose or int(value) >= 1
    return verbose


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """At default verbosity, hold back what C++ code writes to stderr (file
    descriptor 2) in this block, then pass on all but the known noise.

    For short stretches only (TensorFlow's import, an export): the lines come
    out when the block ends, and are lost if the process is killed inside it.
    """
    if not _quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        _held_stderr.append(saved)
        try:
            yield
        finally:
            _held_stderr.remove(saved)
            sys.stderr.flush()
            if _stop_signal is None:
                os.dup2(saved, 2)
                captured.seek(0)
                lines = captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                kept = "".join(l for l in lines if not _STARTUP_NOISE.search(l))
                if kept:
                    sys.stderr.write(kept)
                    sys.stderr.flush()
            else:  # stopping: the stop line is all there is left to say (`_silence_stderr`)
                _point_fd2_to_devnull()
            os.close(saved)


class _QuietTensorFlowLoader(importlib.abc.Loader):
    """Runs TensorFlow's own loader with its start-up lines filtered out."""

    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader
        with quiet_native_stderr():
            self.loader.exec_module(module)
            module.config.list_physical_devices()   # the failed cuInit prints here


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """On the first `import tensorflow`, wraps its loader in `_QuietTensorFlowLoader`."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietTensorFlowLoader(spec.loader)
        return spec


def quiet_tensorflow_startup(argv: list[str]) -> None:
    """Before TensorFlow is imported: hide its start-up noise unless asked for.

    Keeps a `TF_CPP_MIN_LOG_LEVEL` the user set; otherwise 2 (C++ errors only),
    or 0 with `--verbose`. Does nothing to a TensorFlow already imported.
    """
    global _quiet
    verbose = _verbose_requested(argv)
    level = os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbose else "2")
    if verbose or level == "0" or "tensorflow" in sys.modules:
        return
    _quiet = True
    if not any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowFinder())
    for name in ("absl", "tensorflow"):
        logger = py_logging.getLogger(name)
        if not any(isinstance(f, _LibraryInfoFilter) for f in logger.filters):
            logger.addFilter(_LibraryInfoFilter())


class _PathParser(flags.ArgumentParser):
    """A path flag's value with a leading `~` (or `~user`) expanded, as the
    shell expands `--flag ~/x` but not `--flag=~/x`; with `comma_separated`,
    each comma-separated path (a checkpoint list)."""

    syntactic_help = "a path (~ is your home folder)"

    def __init__(self, comma_separated: bool = False):
        self.comma_separated = comma_separated

    def parse(self, argument):
        if not isinstance(argument, str) or not argument:
            return argument
        if self.comma_separated:
            return ",".join(os.path.expanduser(part) for part in argument.split(","))
        return os.path.expanduser(argument)

    def flag_type(self) -> str:
        return "path"


def define_path(name: str, default: str | None, help: str,
                comma_separated: bool = False) -> flags.FlagHolder:
    """`flags.DEFINE_string` for a file or folder: `--name=~/x` means your home's x,
    in every CLI alike (the shell leaves a `~` after `=` as it is).

    The flag belongs to the calling module, as one `flags.DEFINE_string` there
    would (absl would name this module), so that its `--helpshort` lists it.
    """
    caller = sys._getframe(1).f_globals["__name__"]
    return flags.DEFINE(_PathParser(comma_separated), name, default, help,
                        serializer=flags.ArgumentSerializer(),
                        module_name=sys.argv[0] if caller == "__main__" else caller)


USR_DIR_FLAG = "t2t_usr_dir"


def define_usr_dir_flag(module_name: str) -> None:
    """Define `--t2t_usr_dir` (once per process) and show it in `module_name`'s help.

    Called at the top of every CLI that resolves registered names.
    """
    if USR_DIR_FLAG not in flags.FLAGS:
        flags.DEFINE_string(
            USR_DIR_FLAG, None,
            "A folder of your own @register_problem/@register_hparams/@register_model "
            "code (a package with __init__.py, or a folder of modules), imported before "
            "any name is looked up, as in tensor2tensor. The trainer records it in "
            "run.json, so the decoder, exporter and averager of that output_dir import "
            "it without the flag.")
    flags.FLAGS.register_key_flag_for_module(module_name, flags.FLAGS[USR_DIR_FLAG])


def import_usr_dir(output_dir: str | None = None) -> str | None:
    """Import `--t2t_usr_dir`, or else the usr_dir that output_dir's run.json records.

    Returns the absolute usr_dir imported (None when there is none). The flag,
    when given, wins over the record. A recorded usr_dir that no longer exists
    is a UserError saying to pass --t2t_usr_dir.
    """
    from t2t_revival.usr_dir import import_usr_dir as import_dir

    given = flags.FLAGS[USR_DIR_FLAG].value if USR_DIR_FLAG in flags.FLAGS else None
    if given:
        return import_dir(given)
    recorded = _recorded_usr_dir(output_dir) if output_dir else ""
    if not recorded:
        return None
    if not os.path.isdir(recorded):
        raise UserError(f"the usr_dir {recorded} that {output_dir}'s run.json records no "
                        f"longer exists; pass --t2t_usr_dir=DIR where that code is now. "
                        f"Received: output_dir={output_dir!r}")
    return import_dir(recorded)


def _recorded_usr_dir(output_dir: str) -> str:
    """The usr_dir in output_dir/run.json ("" without a run.json or a usr_dir)."""
    from t2t_revival.run_dir.file_names import RUN_FILE
    from t2t_revival.run_dir.run_record import RunRecord

    try:
        return RunRecord.load(os.path.join(output_dir, RUN_FILE)).usr_dir
    except OSError:   # missing, a folder, unreadable: said where the run is read
        return ""


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


_STOP_GRACE_SECONDS = 3.0
_stop_signal: int | None = None   # the signal that is stopping this process, once one came
_stop_stream = None   # where `stopped` prints once a signal silenced stderr (`_silence_stderr`)
_prog = "t2t"


def _point_fd2_to_devnull() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


def _silence_stderr() -> None:
    """From now on, only `stopped`'s line reaches the user's stderr.

    A signal handler's exception can land inside code that catches it,
    prints a traceback and goes on: in importlib's module lock (while
    TensorFlow loads) it becomes a SystemError whose traceback Python prints,
    and C++ libraries log to file descriptor 2. Once the process is stopping
    none of that is news, so `sys.stderr` and descriptor 2 go to /dev/null,
    and `stopped` prints to the stderr there was.
    """
    global _stop_stream
    original = sys.stderr
    try:
        original.flush()
        on_fd2 = original.fileno() == 2
    except (AttributeError, OSError, ValueError):
        on_fd2 = False
    _stop_stream = original
    if on_fd2:
        with contextlib.suppress(OSError):
            # Inside `quiet_native_stderr` descriptor 2 is its capture file
            # (dropped when the block ends): the user's stderr is the one it
            # holds, and the block's end points descriptor 2 to /dev/null.
            _stop_stream = os.fdopen(os.dup(_held_stderr[0] if _held_stderr else 2), "w",
                                     errors="backslashreplace")
            if not _held_stderr:
                _point_fd2_to_devnull()
    sys.stderr = open(os.devnull, "w")


def _stop_on_signal(signum: int, frame) -> None:
    """A stop signal (`STOP_SIGNALS`) outside the trainer's save path: stop now
    (`run` prints one line).

    Raises StoppedBySignal where the main thread is. Code that catches every
    exception (some of TensorFlow's tracing does) could turn it into another
    error, drop it or print it: once a signal came, `run` reports the stop
    however `main` ends (an exception, an exit, or a return), a watchdog
    ends the process after a few seconds if it is still running, and only
    the stop line reaches stderr (`_silence_stderr`).

    Inside an import it stops the process at once instead (`_importing`).
    """
    global _stop_signal
    if _stop_signal is not None:
        return  # a second signal while stopping
    _stop_signal = signum
    _silence_stderr()
    if _importing(frame):
        stopped(_prog, StoppedBySignal(signum))
    watchdog = threading.Timer(_STOP_GRACE_SECONDS, stopped, (_prog, StoppedBySignal(signum)))
    watchdog.daemon = True
    watchdog.start()
    raise StoppedBySignal(signum)


def _importing(frame) -> bool:
    """Whether `frame` (the main thread's, where a signal landed) is inside an import.

    An exception raised there can land inside a C extension's module init,
    which calls back into Python: jaxlib's (TensorFlow imports jax when it is
    installed) then crashes the process (SIGSEGV, SIGABRT) instead of passing
    the exception on. Nothing is being written during an import, so there is
    nothing for the exception to clean up.
    """
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib."):
            return True
        frame = frame.f_back
    return False


def install_signal_handlers() -> None:
    """Make the stop signals (SIGTERM, SIGINT, SIGHUP: `STOP_SIGNALS`) stop the
    process promptly with one line (see `run`).

    A signal the process was started with ignored (SIGINT of a background job,
    SIGHUP under `nohup`) stays ignored. Files being written are left whole:
    every writer writes a temporary name and renames it (`atomic_file`), and
    removes the temporary file when interrupted.
    """
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _stop_on_signal)
    _watch_for_stops_the_main_thread_cannot_see()


_watching = False


def _watch_for_stops_the_main_thread_cannot_see() -> None:
    """Stop the process when the main thread cannot run `_stop_on_signal`.

    Python runs a signal handler only once the main thread is back between
    two bytecodes: inside one long native call (an XLA program decoding to a
    huge length, a TensorFlow op) SIGTERM would wait for the call to end,
    minutes or forever. The C-level handler writes each signal's number to
    the wakeup pipe at once; a thread reads it and, for a stop signal while
    `_stop_on_signal` handles them (not the trainer's save-then-stop,
    `SignalSave`), gives the main thread `_STOP_GRACE_SECONDS`, then stops
    the process itself with the same one line and exit status. Once per
    process, from the main thread.
    """
    global _watching
    if _watching or threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def watch() -> None:
        while True:
            for signum in os.read(read_fd, 64):
                if signum in STOP_SIGNALS and \
                        signal.getsignal(signum) is _stop_on_signal:
                    threading.Event().wait(_STOP_GRACE_SECONDS)
                    stopped(_prog, StoppedBySignal(signum))

    threading.Thread(target=watch, name="stop-signal-watch", daemon=True).start()
    _watching = True


def stopped(prog: str, stop: StoppedBySignal) -> None:
    """Print `prog: <what stopped it>` as one line and exit 128 + the signal number.

    Exits with os._exit: promptly, whatever threads TensorFlow started (their
    work is not needed: what was worth keeping was saved before the stop),
    after removing the temporary files of the writes still in progress.
    """
    _stopping.acquire()   # one line, whichever thread stops first (never released)
    remove_pending_temporaries()
    with contextlib.suppress(OSError):   # stderr gone too (a hung-up terminal, a closed pipe)
        print(f"{prog}: {stop.message}", file=_stop_stream or sys.stderr, flush=True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(stop.exit_status)


_stopping = threading.Lock()


def closed_output() -> None:
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
    for flag in [*flags.FLAGS.get_key_flags_for_module(module_name), flags.FLAGS["verbose"]]:
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    if main_module is not None and module.__doc__:
        main_module.__doc__ = module.__doc__


def run(main: Callable[[list[str]], int | None], prog: str | None = None) -> None:
    """`absl.app.run(main)` where a bad flag or a UserError is one line, exit 2.

    SIGTERM, SIGINT (Ctrl-C) and SIGHUP stop it with one line, `prog: stopped
    by SIGTERM`, and exit status 128 + the signal number (143, 130, 129). Any other
    exception is a bug and keeps its traceback.
    """
    global _prog
    prog = _prog = prog or os.path.basename(sys.argv[0])
    install_signal_handlers()
    _show_module_in_help(main.__module__)

    def parse_flags(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as e:
            fail(prog, f"{e}. Run {prog} --helpshort for the flags.")
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
            stopped(prog, e)
        except BaseException as e:
            if _stop_signal is not None:
                stopped(prog, StoppedBySignal(_stop_signal))  # what the signal became
            if isinstance(e, UserError):
                fail(prog, str(e))
            if isinstance(e, KeyboardInterrupt):
                stopped(prog, StoppedBySignal(signal.SIGINT))
            if isinstance(e, BrokenPipeError):
                closed_output()
            raise
        if _stop_signal is not None:  # code that caught the signal's exception went on
            stopped(prog, StoppedBySignal(_stop_signal))
        try:
            sys.stdout.flush()   # now, where a closed pipe can still be told apart
        except BrokenPipeError:
            closed_output()
        return status

    try:
        app.run(guarded, flags_parser=parse_flags)
    except StoppedBySignal as e:  # while parsing the flags, or after main
        stopped(prog, e)
