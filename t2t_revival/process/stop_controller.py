"""`StopController`: the one owner of the process's stop signals (SIGTERM,
SIGINT, SIGHUP: `STOP_SIGNALS`) and of how the process ends when one comes.

One per process, with two policies. The process's controller is the one
its stop signals are handled by (`StopController.process()` finds it in the
signal table, where `install` put it), so nothing else holds it.

- **Stop now** (every CLI; the trainer before training begins): a CLI's
  entry point calls `install`, and a stop signal raises StoppedBySignal in
  the main thread; the entry point prints one line (`prog: stopped by
  SIGTERM`) and exits 128 + the signal's number (`stop_process`).
- **Save, then stop** (the trainer while it trains, `SaveThenStop`): the
  signal is remembered, the training loop saves at its step after the
  update in flight (or the save in progress finishes first), then stops.

The trainer switches the controller to the second policy for the time it
trains (`saving_first`) and back after. Where no CLI installed the
controller (the library used from Python, the tests), that block installs
the controller's handler for its duration and puts the previous handlers
back after; "stop now" there is what the previous handler does (Python's
KeyboardInterrupt for SIGINT), or StoppedBySignal.

A signal the process was started with ignored (SIGINT of a background job,
SIGHUP under `nohup`) stays ignored under both policies.

A stop that cannot unwind (`stop_process`, `os._exit`) first removes the
temporary files (and folders) of the writes in progress, which `atomic_file` names to the
process's controller while it writes them (`removed_if_stopped`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
from typing import TYPE_CHECKING, Iterator, NoReturn

from t2t_revival.process.stopped_by_signal import STOP_SIGNALS, StoppedBySignal

if TYPE_CHECKING:
    from t2t_revival.process.save_then_stop import SaveThenStop


class StopController:
    """The process's stop signals and its stop (use `StopController.process()`).

    Attributes:
        prog: the name the stop line starts with (`install`'s).
        stop_signal: the signal that is stopping the process now (stop now),
            None until one came.
    """

    GRACE_SECONDS = 3.0
    """How long a stop waits for the main thread before it ends the process itself."""

    def __init__(self):
        self.prog = "t2t"
        self.stop_signal: int | None = None
        self._policy: SaveThenStop | None = None   # save, then stop (None: stop now)
        self._borrowed: dict[int, object] = {}   # handlers `saving_first` put ours over
        self._stop_stream = None   # the user's stderr, once stopping silenced it
        self._user_stderr: list[int] = []   # `stderr_held` blocks' descriptors, outermost first
        self._watching = False
        self._stopping = threading.Lock()   # one stop line, whichever thread stops first
        self._temporaries: set[str] = set()   # `removed_if_stopped` files being written

    @classmethod
    def process(cls) -> StopController:
        """The process's controller: the one whose handler its stop signals run
        (`install`, or a `saving_first` block), else a new one, which installs
        nothing itself (no CLI installed one: the library used from Python)."""
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            owner = getattr(handler, "__self__", None)
            if isinstance(owner, cls) and getattr(handler, "__func__", None) is cls._handle:
                return owner
        return cls()

    @contextlib.contextmanager
    def removed_if_stopped(self, path: str) -> Iterator[None]:
        """For the block, `path` (a temporary file being written, or a folder
        being built: `atomic_file.built_directory`) is removed if the process
        stops without unwinding the block (`stop_process`)."""
        self._temporaries.add(path)
        try:
            yield
        finally:
            self._temporaries.discard(path)

    def install(self, prog: str) -> None:
        """Make the stop signals stop the process promptly with one line
        `prog: stopped by SIGTERM` (a CLI's start, from the main thread).

        Files being written are left whole: every writer writes a temporary
        name and renames it (`atomic_file`), and removes the temporary file
        when interrupted (`stop_process` removes those of a stop that cannot
        unwind).
        """
        self.prog = prog
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, self._handle)
        self._watch_for_stops_the_main_thread_cannot_see()

    @contextlib.contextmanager
    def saving_first(self, policy: SaveThenStop) -> Iterator[None]:
        """For the block, a stop signal goes to `policy` (save, then stop)
        first; then the controller stops as before the block.

        Outside the main thread (signal handlers are the main thread's) the
        block changes nothing.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        borrowed = {}
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not signal.SIG_IGN and handler != self._handle:
                borrowed[signum] = handler   # no CLI installed the controller
        previous_policy, self._policy = self._policy, policy
        self._borrowed.update(borrowed)
        for signum in borrowed:
            signal.signal(signum, self._handle)
        try:
            yield
        finally:
            for signum, handler in borrowed.items():
                signal.signal(signum, handler)
                del self._borrowed[signum]
            self._policy = previous_policy

    def _handle(self, signum: int, frame) -> None:
        policy = self._policy
        if policy is not None and policy.receive(signum):
            return   # remembered: the training loop saves, then stops
        if signum in self._borrowed:   # no CLI: stop as the previous handler does
            previous = self._borrowed[signum]
            if callable(previous):
                return previous(signum, frame)
            raise StoppedBySignal(signum)
        self._stop_now(signum, frame)

    def _stop_now(self, signum: int, frame) -> None:
        """Stop now (`install`): raise StoppedBySignal where the main thread is.

        Code that catches every exception (some of TensorFlow's tracing does)
        could turn it into another error, drop it or print it: once a signal
        came, the CLI's entry point reports the stop however its main ends
        (`stop_signal`), a watchdog ends the process after `GRACE_SECONDS` if
        it is still running, and only the stop line reaches stderr
        (`_silence_stderr`).

        Inside an import it stops the process at once instead (`_importing`).
        """
        if self.stop_signal is not None:
            return  # a second signal while stopping
        self.stop_signal = signum
        self._silence_stderr()
        if _importing(frame):
            self.stop_process(StoppedBySignal(signum))
        watchdog = threading.Timer(self.GRACE_SECONDS, self.stop_process,
                                   (StoppedBySignal(signum),))
        watchdog.daemon = True
        watchdog.start()
        raise StoppedBySignal(signum)

    def stop_process(self, stop: StoppedBySignal) -> NoReturn:
        """Print `prog: <what stopped it>` as one line and exit 128 + the signal number.

        Exits with os._exit: promptly, whatever threads TensorFlow started (their
        work is not needed: what was worth keeping was saved before the stop),
        after removing the temporary files (and folders) of the writes still in
        progress.
        """
        self._stopping.acquire()   # never released
        for path in list(self._temporaries):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(path)
        with contextlib.suppress(OSError):   # stderr gone too (a hung-up terminal, a closed pipe)
            print(f"{self.prog}: {stop.message}", file=self._stop_stream or sys.stderr,
                  flush=True)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(stop.exit_status)

    @contextlib.contextmanager
    def stderr_held(self, user_stderr: int) -> Iterator[None]:
        """A block in which file descriptor 2 is not the user's stderr
        (`quiet_native_stderr` holds back what is written there) and
        `user_stderr`, a descriptor, is: a stop prints its line there. If the
        process is stopping when the block ends, descriptor 2 goes to
        /dev/null: the stop line is all there is left to say."""
        self._user_stderr.append(user_stderr)
        try:
            yield
        finally:
            self._user_stderr.remove(user_stderr)
            if self.stop_signal is not None:
                _point_fd2_to_devnull()

    def _silence_stderr(self) -> None:
        """From now on, only the stop line reaches the user's stderr.

        A signal handler's exception can land inside code that catches it,
        prints a traceback and goes on: in importlib's module lock (while
        TensorFlow loads) it becomes a SystemError whose traceback Python prints,
        and C++ libraries log to file descriptor 2. Once the process is stopping
        none of that is news, so `sys.stderr` and descriptor 2 go to /dev/null,
        and `stop_process` prints to the stderr there was.
        """
        original = sys.stderr
        try:
            original.flush()
            on_fd2 = original.fileno() == 2
        except (AttributeError, OSError, ValueError):
            on_fd2 = False
        self._stop_stream = original
        if on_fd2:
            with contextlib.suppress(OSError):
                # Inside `stderr_held` descriptor 2 is not the user's stderr
                # (the block's end points it to /dev/null).
                held = self._user_stderr
                self._stop_stream = os.fdopen(os.dup(held[0] if held else 2), "w",
                                              errors="backslashreplace")
                if not held:
                    _point_fd2_to_devnull()
        sys.stderr = open(os.devnull, "w")

    def _watch_for_stops_the_main_thread_cannot_see(self) -> None:
        """Stop the process when the main thread cannot run `_stop_now`.

        Python runs a signal handler only once the main thread is back between
        two bytecodes: inside one long native call (an XLA program decoding to a
        huge length, a TensorFlow op) SIGTERM would wait for the call to end,
        minutes or forever. The C-level handler writes each signal's number to
        the wakeup pipe at once; a thread reads it and, for a stop signal that
        stops now (`_stops_now`; not the trainer's save-then-stop), gives the
        main thread `GRACE_SECONDS`, then, if it still does, stops the process
        itself with the same one line and exit status. Once per process, from
        the main thread.
        """
        if self._watching or threading.current_thread() is not threading.main_thread():
            return
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

        def watch() -> None:
            while True:
                for signum in os.read(read_fd, 64):
                    if signum in STOP_SIGNALS and self._stops_now(signum):
                        threading.Event().wait(self.GRACE_SECONDS)
                        if self._stops_now(signum):   # (still: not handed over since)
                            self.stop_process(StoppedBySignal(signum))

        threading.Thread(target=watch, name="stop-signal-watch", daemon=True).start()
        self._watching = True

    def _stops_now(self, signum: int) -> bool:
        """Whether `signum` stops the process at once (`install`'s handler, and
        no save-then-stop policy: that one decides once the loop checks)."""
        return self._policy is None and signal.getsignal(signum) == self._handle


def _point_fd2_to_devnull() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


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
