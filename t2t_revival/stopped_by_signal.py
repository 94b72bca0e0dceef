"""`StoppedBySignal`: the process was asked to stop (SIGTERM, SIGINT / Ctrl-C).

Not an error: every CLI prints its message as one line on stderr and exits
with the shell's convention, 128 + the signal's number (130 for SIGINT,
143 for SIGTERM), without a traceback (`t2t_revival/cli/common.py`). A
BaseException, like KeyboardInterrupt, so that `except Exception` blocks do
not swallow it.
"""

from __future__ import annotations

import signal


class StoppedBySignal(BaseException):
    """Stop the run: `signum` arrived; `message` says what was kept.

    Args:
        signum: the signal's number.
        message: the line to print (default: "stopped by SIGTERM").
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = signum
        self.message = message or f"stopped by {signal.Signals(signum).name}"
        super().__init__(self.message)

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a process it stopped."""
        return 128 + self.signum
