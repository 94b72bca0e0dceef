"""`SignalSave`: SIGTERM, SIGINT and SIGHUP during training save, then stop.

Cloud preemption sends SIGTERM, a user presses Ctrl-C (SIGINT), a closed
terminal or dropped ssh session sends SIGHUP (`STOP_SIGNALS`). While armed
(the model is restored and training has begun), any of them makes the
trainer save a checkpoint at the current step, after the update in flight
(Python runs a signal handler between two bytecodes, so a compiled update
always completes), and stop with one line. A signal that arrives during a
save (a periodic one or that last one) waits for the save to finish: a
second Ctrl-C never leaves a half-written checkpoint. Before it is armed
(start-up, restore, datagen), a signal stops the run at once: there is
nothing to save yet.

The trainer asks for the same stop itself (`request`) when its output can no
longer be written: `t2t-trainer ... | tee log` whose tee died, a hung-up
terminal.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

from t2t_revival.stopped_by_signal import STOP_SIGNALS, StoppedBySignal


class SignalSave:
    """Install with `with SignalSave() as signals:`; the trainer then calls
    `signals.arm()` once there is a model worth saving, wraps each save in
    `signals.saving()`, and catches `SignalSave.StopRequested` to save and stop.

    Outside the main thread (signal handlers can only be set there) it does
    nothing, and signals keep their previous handlers.
    """

    class StopRequested(BaseException):
        """Raised by the handler in the training loop: save at this step, then stop."""

        def __init__(self, signum: int):
            super().__init__(signum)
            self.signum = signum

    def __init__(self):
        self.signum: int | None = None
        self._armed = False
        self._saving = 0
        self._pending = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "SignalSave":
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous = signal.getsignal(signum)
                if previous is not signal.SIG_IGN:  # e.g. SIGINT of a background job
                    self._previous[signum] = previous
                    signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def arm(self) -> None:
        """From now on a signal saves before stopping."""
        self._armed = True

    @property
    def armed(self) -> bool:
        """Whether a stop now saves first (`arm`)."""
        return self._armed

    def request(self, signum: int) -> None:
        """Stop as if `signum` had arrived (armed: after the update in flight
        or the save in progress, `check`); the first stop asked for wins."""
        if self.signum is None:
            self.signum = signum
            self._pending = True

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """A save: signals wait until it is complete, then stop the run."""
        self._saving += 1
        try:
            yield
        finally:
            self._saving -= 1
        if self._pending and not self._saving:
            self._pending = False
            raise SignalSave.StopRequested(self.signum)

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            return  # already stopping (a second Ctrl-C): the save goes on
        self.signum = signum
        if not self._armed:  # as outside training (the CLI's handler, when there is one)
            previous = self._previous.get(signum)
            if callable(previous):
                return previous(signum, frame)
            raise StoppedBySignal(signum)
        # Armed: remember it; the loop stops after the update in flight
        # (`check`), or the save in progress ends with it. Raising here instead
        # would surface inside TensorFlow's code, which may swallow or change it.
        self._pending = True

    def check(self) -> None:
        """Between updates: stop (StopRequested) if a signal came."""
        if self._pending and not self._saving:
            self._pending = False
            raise SignalSave.StopRequested(self.signum)
