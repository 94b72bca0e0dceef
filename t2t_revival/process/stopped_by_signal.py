"""`StoppedBySignal`: the process was asked to stop (SIGTERM, SIGINT / Ctrl-C,
SIGHUP), or the reader of its output went away (SIGPIPE's case).

Not an error: every CLI prints its message as one line on stderr and exits
with the shell's convention, 128 + the signal's number (130 for SIGINT,
143 for SIGTERM, 129 for SIGHUP, 141 for a closed output), without a
traceback (`StopController.stop_process`). A BaseException, like
KeyboardInterrupt, so that `except Exception` blocks do not swallow it.
"""

from __future__ import annotations

import signal

# The signals that stop every CLI with one line (and make the trainer save
# first, `SaveThenStop`): cloud preemption and `kill` (SIGTERM), Ctrl-C
# (SIGINT), a closed terminal or dropped ssh session (SIGHUP). One the
# process started with ignored (SIGINT of a background job, SIGHUP under
# `nohup`) stays ignored.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StoppedBySignal(BaseException):
    """Stop the run: `signum` arrived; `message` says what was kept.

    Args:
        signum: the signal's number (SIGPIPE: the process's standard output
            was closed; Python ignores the signal itself and sees the write fail).
        message: the line to print (default: "stopped by SIGTERM").
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = signum
        self.message = message or self.default_message(signum)
        super().__init__(self.message)

    @staticmethod
    def default_message(signum: int) -> str:
        """What stopped the run, as the start of its line."""
        if signum == signal.SIGPIPE:
            return "stopped: its output was closed (broken pipe)"
        return f"stopped by {signal.Signals(signum).name}"

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a process it stopped."""
        return 128 + self.signum
