"""`SaveThenStop`: the trainer's stop policy. SIGTERM, SIGINT and SIGHUP
during training save, then stop.

Cloud preemption sends SIGTERM, a user presses Ctrl-C (SIGINT), a closed
terminal or dropped ssh session sends SIGHUP (`STOP_SIGNALS`). While armed
(the model is restored and training has begun), any of them makes the
trainer save a checkpoint at the current step, after the update in flight
(Python runs a signal handler between two bytecodes, so a compiled update
always completes), and stop with one line. A signal that arrives during a
save (a periodic one or that last one) waits for the save to finish: a
second Ctrl-C never leaves a half-written checkpoint. Before it is armed
(start-up, restore, datagen), a signal stops the run at once, as the
process's `StopController` stops it outside training: there is nothing to
save yet.

The trainer asks for the same stop itself (`request`) when its output can no
longer be written: `t2t-trainer ... | tee log` whose tee died, a hung-up
terminal.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from t2t_revival.process.stop_controller import StopController


class SaveThenStop:
    """The trainer enters it for its training (`with SaveThenStop() as signals:`,
    which switches the process's `StopController` to this policy and back
    after), calls `signals.arm()` once there is a model worth saving, wraps
    each save in `signals.saving()`, calls `signals.check()` between updates,
    and catches `SaveThenStop.StopRequested` to save and stop.

    Outside the main thread (signal handlers are the main thread's) signals
    keep stopping as they did; `request`, `check` and `saving` work alike.

    Args:
        controller: the controller to switch (default: the process's).

    Attributes:
        signum: the stop asked for (a signal's number), None until one is.
    """

    class StopRequested(BaseException):
        """Raised by `check` or `saving` in the training loop: save at this step, then stop."""

        def __init__(self, signum: int):
            super().__init__(signum)
            self.signum = signum

    def __init__(self, controller: StopController | None = None):
        self.controller = controller or StopController.process()
        self.signum: int | None = None
        self._armed = False
        self._saving = 0
        self._pending = False
        self._block = contextlib.ExitStack()

    def __enter__(self) -> SaveThenStop:
        self._block.enter_context(self.controller.saving_first(self))
        return self

    def __exit__(self, *exc) -> None:
        self._block.close()

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

    def receive(self, signum: int) -> bool:
        """A stop signal arrived (the controller's handler): True when this
        policy took it (armed: the loop saves, then stops; or a stop is under
        way already, and a second Ctrl-C is ignored), False when the process
        is to stop now (not armed: there is nothing to save)."""
        if self.signum is not None:
            return True
        self.signum = signum
        if not self._armed:
            return False
        # Armed: remember it; the loop stops after the update in flight
        # (`check`), or the save in progress ends with it. Raising here instead
        # would surface inside TensorFlow's code, which may swallow or change it.
        self._pending = True
        return True

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """A save: signals wait until it is complete, then stop the run."""
        self._saving += 1
        try:
            yield
        finally:
            self._saving -= 1
        self.check()

    def check(self) -> None:
        """Between updates: stop (StopRequested) if a stop was asked for."""
        if self._pending and not self._saving:
            self._pending = False
            raise SaveThenStop.StopRequested(self.signum)
