"""The process's StopController and the trainer's policy, SaveThenStop, in
this process: which handler is installed when, and what a stop signal does
under each policy. (What a CLI's stop looks like from outside, its line and
exit status, is tested on subprocesses in test_stop_signals.py.)"""

import os
import signal
import subprocess
import sys
import threading

import pytest

from conftest import ROOT
from t2t_revival.process.save_then_stop import SaveThenStop
from t2t_revival.process.stop_controller import StopController
from t2t_revival.process.stopped_by_signal import STOP_SIGNALS, StoppedBySignal


def _previous_handler(signum, frame):
    """A handler of the test's, there before the trainer's block."""
    raise AssertionError(f"the previous handler ran for {signum}")


@pytest.fixture
def handlers():
    """Every stop signal at a handler of the test's; put back after."""
    before = {s: signal.signal(s, _previous_handler) for s in STOP_SIGNALS}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_an_armed_run_saves_then_stops_on_each_stop_signal(signum, handlers):
    """SIGHUP (a closed terminal) as SIGTERM and SIGINT: remembered, then
    StopRequested between updates."""
    with SaveThenStop(StopController()) as signals:
        signals.arm()
        signal.raise_signal(signum)
        assert signals.signum == signum
        with pytest.raises(SaveThenStop.StopRequested) as stop:
            signals.check()
        assert stop.value.signum == signum
        signals.check()   # asked for once


def test_a_signal_during_a_save_waits_for_it_and_a_second_is_ignored(handlers):
    with SaveThenStop(StopController()) as signals:
        signals.arm()
        with pytest.raises(SaveThenStop.StopRequested) as stop:
            with signals.saving():
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGTERM)   # (a second one while it saves)
                signals.check()   # the save goes on
                saved = True
        assert saved and stop.value.signum == signal.SIGINT


def test_a_closed_output_is_a_stop_asked_for_and_the_first_stop_wins(handlers):
    with SaveThenStop(StopController()) as signals:
        signals.arm()
        signals.request(signal.SIGPIPE)
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(SaveThenStop.StopRequested) as stop:
            signals.check()
        assert stop.value.signum == signal.SIGPIPE


def test_without_a_cli_the_block_installs_its_handler_and_restores_the_previous(handlers):
    with SaveThenStop(StopController()):
        assert all(signal.getsignal(s) is not _previous_handler for s in STOP_SIGNALS)
    assert all(signal.getsignal(s) is _previous_handler for s in STOP_SIGNALS)


def test_before_it_is_armed_a_signal_stops_as_without_the_block(handlers):
    """Nothing to save yet: the previous handler's stop (Python's
    KeyboardInterrupt for Ctrl-C), or StoppedBySignal where it had none."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with SaveThenStop(StopController()) as signals:
        with pytest.raises(StoppedBySignal) as stop:
            signal.raise_signal(signal.SIGTERM)
        assert stop.value.exit_status == 143
        signals.check()   # nothing left to do: the stop was raised
    with SaveThenStop(StopController()):
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    with SaveThenStop(StopController()):
        with pytest.raises(AssertionError, match="the previous handler ran for"):
            signal.raise_signal(signal.SIGHUP)


def test_under_a_cli_the_handlers_stay_the_controllers_and_the_policy_switches(handlers):
    """A CLI installed the process's controller: the trainer's block switches
    its policy instead of installing handlers over it, and switches back."""
    controller = StopController.process()
    controller.install("t2t-test")
    installed = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    assert all(h is not _previous_handler for h in installed.values())
    with SaveThenStop() as signals:
        assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == installed
        signals.arm()
        signal.raise_signal(signal.SIGHUP)   # save, then stop (not: stop now)
        with pytest.raises(SaveThenStop.StopRequested):
            signals.check()
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == installed
    assert controller.stop_signal is None


def test_the_process_controller_is_the_one_its_stop_signals_run(handlers):
    """Nothing holds the process's controller but the signal table: outside
    any block a new one (which installs nothing), inside the trainer's block
    the block's."""
    assert StopController.process() is not StopController.process()
    controller = StopController()
    with SaveThenStop(controller):
        assert StopController.process() is controller
        assert SaveThenStop().controller is controller
    assert StopController.process() is not controller


_STOP_INSIDE_A_WRITE = r"""
import os, signal, sys
from t2t_revival.files.atomic_file import atomic_output
from t2t_revival.process.stop_controller import StopController
from t2t_revival.process.stopped_by_signal import StoppedBySignal

StopController().install("t2t-test")
with atomic_output(os.path.join(sys.argv[1], "out.txt")) as tmp:
    with open(tmp, "w") as f:
        f.write("half")
    print(len(os.listdir(sys.argv[1])), flush=True)
    StopController.process().stop_process(StoppedBySignal(signal.SIGTERM))
"""


def test_a_stop_that_cannot_unwind_removes_the_temporary_file_of_a_write(tmp_path):
    out = subprocess.run([sys.executable, "-c", _STOP_INSIDE_A_WRITE, str(tmp_path)],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert (out.returncode, out.stdout, out.stderr) == (
        128 + signal.SIGTERM, "1\n", "t2t-test: stopped by SIGTERM\n")
    assert os.listdir(tmp_path) == []


def test_outside_the_main_thread_the_block_installs_nothing(handlers):
    seen = []

    def train():
        with SaveThenStop(StopController()) as signals:
            seen.append(all(signal.getsignal(s) is _previous_handler for s in STOP_SIGNALS))
            signals.arm()
            signals.request(signal.SIGPIPE)
            try:
                signals.check()
            except SaveThenStop.StopRequested as stop:
                seen.append(stop.signum)

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    assert seen == [True, signal.SIGPIPE]


# A CLI whose main is the trainer's block: before it is armed (restore,
# datagen) a signal stops the process now; armed, the block takes it and the
# loop saves (here: waits longer than the stop's grace), then stops.
_TRAINER_UNDER_A_CLI = r"""
import os, signal, sys, time
from t2t_revival.cli import entry_point
from t2t_revival.process.save_then_stop import SaveThenStop
from t2t_revival.process.stop_controller import StopController
from t2t_revival.process.stopped_by_signal import StoppedBySignal

def main(argv):
    with SaveThenStop() as signals:
        if ARMED:
            signals.arm()
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.5)
        try:
            signals.check()
        except SaveThenStop.StopRequested as stop:
            time.sleep(StopController.GRACE_SECONDS + 1)   # the save
            raise StoppedBySignal(stop.signum, "stopped by SIGHUP at step 7; saved") from None
    print("went on")
    return 0

ARMED = sys.argv.pop(1) == "armed"
entry_point.run(main, prog="t2t-test")
"""


@pytest.mark.parametrize("armed, line", [
    (False, "t2t-test: stopped by SIGHUP\n"),
    (True, "t2t-test: stopped by SIGHUP at step 7; saved\n")])
def test_under_a_cli_a_signal_stops_now_until_the_run_is_armed_then_saves_first(armed, line):
    out = subprocess.run([sys.executable, "-c", _TRAINER_UNDER_A_CLI,
                          "armed" if armed else "not armed"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 129, out.stderr
    assert out.stderr == line
    assert out.stdout == ""
