"""Stopping a CLI (issue 20 item 5, issue 60 item 5): SIGTERM, SIGINT and
SIGHUP, a closed output pipe or terminal, save the run at its step and stop
with one line and 128 + the signal; a signal during start-up, inside an
import, a long native call or a write ends the process promptly, leaving no
temporary file; closed standard streams are reopened on /dev/null.

The CLIs run as subprocesses: the process is the subject.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, checkpoint_step, stop_signals_at_their_defaults
from tiny_runs import cli_popen, trainer_args


def _wait_for_line(proc, needle, timeout=240):
    """Read proc's stdout until a line holds `needle`; returns what was read."""
    seen = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    proc.kill()
    pytest.fail(f"no {needle!r} in the output: {''.join(seen)[-3000:]}")


def _with_closed(redirect, module, *args, timeout=240):
    """`python -m t2t_revival.cli.<module> ARGS` started with a standard stream
    closed (`redirect`: ">&-" stdout, "2>&-" stderr), as a cron job or a
    daemon may be; bytes out."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-m",
                           f"t2t_revival.cli.{module}", *args],
                          capture_output=True, env=env, timeout=timeout)


@pytest.mark.parametrize("redirect", [">&-", "2>&-", "<&- >&- 2>&-"])
def test_a_closed_standard_stream_is_reopened_on_dev_null_before_any_file(redirect,
                                                                          tmp_path):
    """Issue 60, item 5: importing the CLIs gives a closed stream /dev/null,
    so sys.stdout/stderr are streams and no file opened later takes the
    descriptor that TensorFlow's C++ logging writes to. t2t-bleu with stdout
    closed did its work, then ended in an AttributeError, exit 1."""
    probe = ("import sys, t2t_revival.cli\n"
             "f = open(sys.argv[1], 'w')\n"
             "assert f.fileno() > 2, f.fileno()\n"
             "print('out'); print('err', file=sys.stderr); sys.stdin.read()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-c",
                          probe, str(tmp_path / "file")], capture_output=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    text = tmp_path / "text.txt"
    text.write_text("a man runs\nthe red dog\n")
    out = _with_closed(redirect, "bleu", f"--translation={text}", f"--reference={text}")
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    assert b"Traceback" not in out.stderr + out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("redirect", [">&-", "2>&-"])
def test_closed_standard_streams_do_the_work_and_exit_with_its_status(redirect, tiny_trained,
                                                                       tmp_path):
    """Issue 60, item 5: with stdout closed the decoder and --registry_help
    did their work, then ended in an AttributeError (exit 1); with stderr
    closed every CLI that loads TensorFlow died while importing it, the
    decoder writing nothing. (About 40 s: three fresh processes a case.)"""
    source = tmp_path / "in.txt"
    source.write_text("a man runs\nthe red dog\nein haus\n")
    hyp = tmp_path / "hyp.txt"
    runs = [("decoder", [f"--output_dir={tiny_trained}", f"--decode_from_file={source}",
                         f"--decode_to_file={hyp}"]),
            ("trainer", ["--registry_help"])]
    for module, args in runs:
        out = _with_closed(redirect, module, *args)
        assert out.returncode == 0, (module, out.returncode, out.stderr.decode()[-3000:])
        assert b"Traceback" not in out.stderr + out.stdout, (module, out.stderr[-3000:])
    assert len(hyp.read_text().splitlines()) == 3


@pytest.mark.parametrize("signum, status, twice", [
    (signal.SIGTERM, 143, False), (signal.SIGINT, 130, True),
    (signal.SIGHUP, 129, False)])   # the terminal closed (a dropped ssh session)
def test_a_signal_saves_at_the_current_step_then_stops(signum, status, twice, tiny_data,
                                                       tmp_path):
    import tensorflow as tf

    out = tmp_path / "run"
    with stop_signals_at_their_defaults():   # as from a terminal
        proc = cli_popen("trainer", *trainer_args(tiny_data, out, 100000,
                                               "--save_checkpoints_steps=1000",
                                               "--log_step_count_steps=1"))
    _wait_for_line(proc, "step 3/100000")
    proc.send_signal(signum)
    if twice:  # a second Ctrl-C, while it saves
        time.sleep(0.05)
        proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    name = signal.Signals(signum).name
    stderr = stderr.decode()
    assert proc.returncode == status, stderr[-3000:]
    assert "Traceback" not in stderr
    lines = [l for l in stderr.splitlines() if l.startswith("t2t-trainer:")]
    assert len(lines) == 1, stderr[-3000:]
    line = lines[0]
    assert line.startswith(f"t2t-trainer: stopped by {name} at step "), line
    step = int(line.split(" at step ", 1)[1].split(";", 1)[0])
    assert step >= 3
    assert line.endswith(f"; checkpoint saved: {out / f'ckpt-{step}'}; rerun the same "
                         f"command to resume")
    assert tf.train.latest_checkpoint(str(out)) == str(out / f"ckpt-{step}")
    assert checkpoint_step(out / f"ckpt-{step}") == step
    assert not list(out.glob("*_temp"))


def test_a_closed_output_saves_at_the_current_step_then_stops(tiny_data, tmp_path):
    """`t2t-trainer ... | tee log` whose tee died: the next progress line
    cannot be written. The run saves at its step and stops, exit 141 (128 +
    SIGPIPE, as a shell tool whose reader went away), with one line on stderr.

    Each progress line reaches the pipe as it is printed (`| tee` shows it at
    once), so the reader's going away is noticed at the next one, not once a
    buffer of about 90 progress lines fills."""
    import tensorflow as tf

    out = tmp_path / "run"
    proc = cli_popen("trainer", *trainer_args(tiny_data, out, 100000,
                                           "--save_checkpoints_steps=1000",
                                           "--log_step_count_steps=1"), unbuffered=False)
    _wait_for_line(proc, "step 3/100000")
    proc.stdout.close()   # the reader goes away
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 141, stderr[-3000:]
    assert "Traceback" not in stderr
    lines = [l for l in stderr.splitlines() if l.startswith("t2t-trainer:")]
    assert len(lines) == 1, stderr[-3000:]
    line = lines[0]
    assert line.startswith("t2t-trainer: stopped: its output was closed (broken pipe) "
                           "at step "), line
    step = int(line.split(" at step ", 1)[1].split(";", 1)[0])
    assert 3 < step < 40   # (in blocks, step 3 came to the reader near step 90)
    assert line.endswith(f"; checkpoint saved: {out / f'ckpt-{step}'}; rerun the same "
                         f"command to resume")
    assert tf.train.latest_checkpoint(str(out)) == str(out / f"ckpt-{step}")
    assert not list(out.glob("*_temp"))


# Runs argv[2:] with the terminal argv[1] as its controlling terminal and its
# standard streams, as a login shell runs a command (the process is a session
# leader: the caller starts it in a new session).
_ON_TERMINAL = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)   # a session leader's first terminal becomes its own
for std in (0, 1, 2):
    os.dup2(fd, std)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def test_a_closed_terminal_saves_at_the_current_step_then_stops(tiny_data, tmp_path):
    """A dropped ssh session: the terminal hangs up (SIGHUP, and every later
    write to it fails with EIO). The run saves at its step and stops, 129."""
    import pty
    import select

    import tensorflow as tf

    out = tmp_path / "run"
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    with stop_signals_at_their_defaults():   # (not the nohup of a test run in the background)
        proc = subprocess.Popen(
            [sys.executable, "-c", _ON_TERMINAL, os.ttyname(slave), "-m",
             "t2t_revival.cli.trainer",
             *trainer_args(tiny_data, out, 100000, "--save_checkpoints_steps=1000",
                           "--log_step_count_steps=1")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=env)
    seen, deadline = b"", time.time() + 240
    try:
        # (The slave stays open here until the hang-up: reading a terminal
        # whose slave side nobody holds fails with EIO, before the run opens it.)
        while b"step 3/100000" not in seen and time.time() < deadline \
                and proc.poll() is None:
            if select.select([master], [], [], 1.0)[0]:
                seen += os.read(master, 65536)
        assert b"step 3/100000" in seen, seen.decode(errors="replace")[-3000:]
    finally:
        os.close(master)   # the hang-up
        os.close(slave)
    proc.wait(timeout=120)
    assert proc.returncode == 129
    latest = tf.train.latest_checkpoint(str(out))
    step = int(latest.rsplit("-", 1)[1])
    assert step >= 3
    assert checkpoint_step(latest) == step
    assert not list(out.glob("*_temp"))


def test_a_stop_signal_started_ignored_stays_ignored():
    """SIGHUP under `nohup`, SIGINT of a background job: neither the CLIs'
    handlers nor the trainer's install themselves over the ignore."""
    from t2t_revival.process.save_then_stop import SaveThenStop
    from t2t_revival.process.stop_controller import StopController
    from t2t_revival.process.stopped_by_signal import STOP_SIGNALS

    previous = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}
    try:
        StopController.process().install("t2t-test")
        with SaveThenStop():
            assert all(signal.getsignal(s) is signal.SIG_IGN for s in STOP_SIGNALS)
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in STOP_SIGNALS)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        StopController.process().install("t2t-test")   # a handler where it was not ignored
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_IGN, signal.SIG_DFL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_cli_stops_promptly_on_sigterm_during_start_up(tiny_trained):
    for delay in (0.5, 2.0):
        # Standard input stays open: the decoder waits at its prompt, where a
        # fast machine would get there in 2 s, instead of ending at its EOF.
        proc = cli_popen("decoder", f"--output_dir={tiny_trained}", "--decode_interactive",
                      stdin=subprocess.PIPE)
        time.sleep(delay)
        start = time.time()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert time.time() - start < 10
        assert proc.returncode == 143, stderr.decode()[-3000:]
        assert stderr.decode().strip().splitlines()[-1] == "t2t-decoder: stopped by SIGTERM"
        assert "Traceback" not in stderr.decode()


# A CLI whose main catches the stop signal's exception, prints its traceback
# and writes to file descriptor 2 (as importlib's module lock and C++
# libraries do when TensorFlow loads), then goes on: it returns 0 at once,
# or it works on ("wait", its first argument).
_CATCHES_AND_PRINTS = r"""
import os, signal, sys, time, traceback
from t2t_revival.cli import entry_point

def main(argv):
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)                        # the handler raises here
    except BaseException:
        traceback.print_exc()
        os.write(2, b"a C++ library's log line\n")
    if THEN == "wait":
        time.sleep(30)                        # the watchdog ends it
    return 0

THEN = sys.argv.pop(1)
entry_point.run(main, prog="t2t-test")
"""


@pytest.mark.parametrize("then", ["return", "wait"])
def test_a_stop_prints_its_line_only_even_where_the_signal_is_caught_and_printed(then):
    out = subprocess.run([sys.executable, "-c", _CATCHES_AND_PRINTS, then], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 143, out.stderr
    assert out.stderr == "t2t-test: stopped by SIGTERM\n"


# A CLI that is stopped while it imports a module, as t2t-decoder is while
# TensorFlow (and the jaxlib it imports) loads: the stop must not be raised
# into the module being imported (a C extension's init crashed with SIGSEGV
# or SIGABRT there), nor into the rest of main.
_STOPPED_IN_AN_IMPORT = r"""
import sys
from t2t_revival.cli import entry_point

sys.path.insert(0, sys.argv.pop(1))

def main(argv):
    import sends_itself_sigterm
    print("main went on after the import")
    return 0

entry_point.run(main, prog="t2t-test")
"""


_SENDS_ITSELF_SIGTERM = r"""
import os, signal, time
try:
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.time() + 10
    while time.time() < deadline:             # bytecodes: the handler runs here
        pass
except BaseException as e:
    print(f"the import saw {type(e).__name__}")
"""


def test_a_stop_inside_an_import_ends_the_process_there(tmp_path):
    (tmp_path / "sends_itself_sigterm.py").write_text(_SENDS_ITSELF_SIGTERM)
    out = subprocess.run([sys.executable, "-c", _STOPPED_IN_AN_IMPORT, str(tmp_path)],
                         capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 143, out.stderr
    assert out.stderr == "t2t-test: stopped by SIGTERM\n"
    assert out.stdout == ""


# A CLI stopped by the watchdog while it writes a file (`atomic_open`): its
# main thread never unwinds, so the stop itself removes the temporary file.
_STOPPED_WHILE_WRITING = r"""
import sys, time
from t2t_revival.files.atomic_file import atomic_open
from t2t_revival.cli import entry_point

PATH = sys.argv.pop(1)

def main(argv):
    with atomic_open(PATH) as f:
        f.write("half a file")
        f.flush()
        try:
            print("writing", flush=True)      # the signal comes after this line
            time.sleep(30)
        except BaseException:
            time.sleep(30)                    # stuck: the watchdog ends it
    return 0

entry_point.run(main, prog="t2t-test")
"""


@pytest.mark.parametrize("signum, stderr_closed", [
    (signal.SIGTERM, False),
    (signal.SIGHUP, False),    # the terminal closed
    (signal.SIGTERM, True)])   # and nobody reads stderr: the stop line cannot be written
def test_a_stop_that_cannot_unwind_removes_the_temporary_files_of_its_writes(
        signum, stderr_closed, tmp_path):
    target = tmp_path / "translations.txt"
    with stop_signals_at_their_defaults():
        proc = subprocess.Popen([sys.executable, "-c", _STOPPED_WHILE_WRITING, str(target)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
    stderr = None
    try:
        assert proc.stdout.readline() == "writing\n"
        assert len(list(tmp_path.iterdir())) == 1   # the temporary file
        if stderr_closed:
            proc.stderr.close()
        proc.send_signal(signum)
        if stderr_closed:
            proc.wait(timeout=30)
        else:
            _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, stderr
    if not stderr_closed:
        assert stderr == f"t2t-test: stopped by {signal.Signals(signum).name}\n"
    assert list(tmp_path.iterdir()) == []


# A CLI whose main thread is inside one long TensorFlow call (as t2t-decoder
# is inside a compiled search): Python cannot run the signal handler there.
_STUCK_IN_NATIVE_CODE = r"""
from t2t_revival.cli import entry_point

def main(argv):
    import tensorflow as tf

    @tf.function
    def spin(n):
        return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0, tf.int64)])

    print("spinning", flush=True)
    spin(tf.constant(10**13, tf.int64))       # hours
    return 0

entry_point.run(main, prog="t2t-test")
"""


def test_sigterm_stops_a_cli_inside_a_long_native_call():
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_IN_NATIVE_CODE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        assert proc.stdout.readline() == "spinning\n"
        time.sleep(1.0)   # inside the call
        start = time.time()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)   # it hung here before
    finally:
        proc.kill()
    assert time.time() - start < 10
    assert proc.returncode == 143, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "t2t-test: stopped by SIGTERM"
    assert stderr.count("stopped by SIGTERM") == 1 and "Traceback" not in stderr
