"""Shared test set-up: the `slow` marker, the path of the shared data, and the
helpers several test files use (the subprocess environment, the one-line
error check, the hparam sets the issues name)."""

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

# Every run writes its per-test durations to build/test-durations.json.
pytest_plugins = ["durations_record"]

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The shared folder beside the repository; T2T_SHARED names it for a checkout
# elsewhere (as for the benchmarks, `benchmarks.harness.SHARED`).
SHARED_DATA = pathlib.Path(os.environ.get("T2T_SHARED") or ROOT.parent / "shared") / "data"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No XLA compile cache in the tests (it would write to ~/.cache and carry
# programs from test to test): test_xla_compile_cache turns it on where tested.
os.environ["T2T_COMPILE_CACHE"] = "off"

# The environment of a CLI run in a subprocess: this checkout's code.
ENV = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")

# The hparam sets the issues ask for by name.
ISSUE_HPARAMS_SETS = ("transformer_base", "transformer_big", "transformer_base_single_gpu",
                      "transformer_big_single_gpu", "transformer_parsing_base",
                      "transformer_parsing_big", "transformer_tiny", "transformer_small")


def one_line_error(out, prog, *needles, status=2):
    """`out` (a finished subprocess, text or bytes) failed with one
    `prog: error: ...` line holding every needle, exit `status` and no
    traceback. Returns the line."""
    stderr = out.stderr.decode("utf-8", "replace") if isinstance(out.stderr, bytes) \
        else out.stderr
    assert out.returncode == status, (out.returncode, stderr[-3000:])
    lines = [l for l in stderr.splitlines() if l.startswith(f"{prog}: error: ")]
    assert len(lines) == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def readme_block(needle: str) -> str:
    """The fenced code block of the README or a docs page that contains `needle`."""
    from readme_workflow import blocks

    return next(code for _, _, code, _ in blocks() if needle in code)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the slow end-to-end tests (CI does)")


# The session fixtures of the README's run (the longest set-up of the suite).
_README_RUN_FIXTURES = {"readme_run", "tiny_run", "tiny_run_test_decodes"}
README_RUN_GROUP = "readme_run"
# The groups of a default run that take a minute or more on the 2-core
# machine, the longest first (their worker seconds in build/test-durations.json
# of 2026-12-02's default runs, issue 71): started before the others, so that
# the workers end together instead of one running a long group that started
# last while the other has nothing left.
LONG_GROUPS = ("test_decode_modes", "test_decode_xla", "test_stop_signals",
               "test_ctranslate2_export", "test_steps_per_execution", "test_beam_search",
               "test_litert_decoder", "test_training_faults", "test_trainer",
               "test_decode_guides")


def _xdist_group(item) -> str:
    """The group of tests that one pytest-xdist worker runs together (see
    `pytest_collection_modifyitems`): the README's run, or the test's file."""
    if _README_RUN_FIXTURES & set(item.fixturenames):
        return README_RUN_GROUP
    return item.path.stem


def pytest_collection_finish(session):
    """On an xdist worker, check that xdist took the groups (it suffixes each
    node id with `@group`): where it does not (pytest 9, pyproject's pin), the
    README's run would be trained once per worker, silently."""
    config = session.config
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        ungrouped = [item.nodeid for item in session.items if "@" not in item.nodeid]
        if ungrouped:
            message = (f"pytest-xdist did not group {len(ungrouped)} tests (e.g. {ungrouped[0]}): "
                       f"install the test extra's pytest (pip install -e '.[test]'), or run "
                       f"with -n 0")
            print(message, file=sys.__stderr__, flush=True)
            raise pytest.UsageError(message)


@pytest.hookimpl(tryfirst=True)   # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Skip the slow tests without --slow; group and order the tests for
    pytest-xdist (pyproject's addopts run `-n auto --dist loadgroup`).

    Each group runs on one worker, so its fixtures are made once: every test
    of the README's run (whose session fixture trains the main job), and each
    file's other tests (their module fixtures). Workers take the groups in
    collection order (`--no-loadscope-reorder`): the README's run first, then
    the files with slow tests, then the LONG_GROUPS, then the rest, so no
    long group starts last.
    """
    slow = config.getoption("--slow")
    skip = pytest.mark.skip(reason="slow: run with --slow")
    groups = {}
    for item in items:
        if "slow" in item.keywords and not slow:
            item.add_marker(skip)
        group = groups[item] = _xdist_group(item)
        item.add_marker(pytest.mark.xdist_group(group))
    slow_groups = {g for item, g in groups.items() if slow and "slow" in item.keywords}
    rank = {group: i for i, group in enumerate(LONG_GROUPS)}
    items.sort(key=lambda item: (groups[item] != README_RUN_GROUP,
                                 groups[item] not in slow_groups,
                                 rank.get(groups[item], len(LONG_GROUPS))))


def built_once(tmp_path_factory, name: str, build) -> pathlib.Path:
    """The folder `name`, built by `build(folder)` once per test session and
    shared by every pytest-xdist worker: the first worker to ask builds it
    while the others wait on a lock, then all read the same folder (a test
    that changes it works on a copy: `shutil.copytree`; `unchanged` checks
    that none changed it). Without xdist, the folder lives in this session's
    base temp. A build that fails leaves no folder behind (the next ask
    builds it anew)."""
    import fcntl
    import shutil

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


@contextlib.contextmanager
def unchanged(folder: pathlib.Path):
    """Fails the session's end if a test changed, added or removed a file
    under the shared `folder` (`built_once`)."""
    from tiny_runs import digests

    before = digests(folder)
    yield folder
    after = digests(folder)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, (f"a test changed the shared folder {folder} (copy it to change it): "
                         f"{changed[:5]}")


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """The tiny synthetic corpus of `tiny_runs`, through datagen: once per
    session (`built_once`), read-only; copy it to change it."""
    from tiny_runs import TinyMulti30k, write_corpus

    def build(folder):
        write_corpus(str(folder / "raw"))
        TinyMulti30k(download=False).generate_data(str(folder / "data"), str(folder / "raw"))

    with unchanged(built_once(tmp_path_factory, "tiny_data", build)) as folder:
        yield folder / "data"


@pytest.fixture(scope="session")
def tiny_trained(tiny_data, tmp_path_factory):
    """The tiny run of `tiny_runs` trained once per session (`built_once`) on
    `tiny_data`: 3 updates, a checkpoint after each (ckpt-1, -2, -3), the
    final dev evaluation at step 3 and its best/ (ckpt-3). Read-only: tests
    that change it take `trained_copy`."""
    from tiny_runs import trainer_args

    def build(folder):
        result = run_cli("trainer", *trainer_args(tiny_data, folder / "run", 3,
                                                  "--save_checkpoints_steps=1"))
        assert result.returncode == 0, result.stderr[-3000:]

    with unchanged(built_once(tmp_path_factory, "tiny_trained", build)) as folder:
        yield folder / "run"


@pytest.fixture
def trained_copy(tiny_trained, tmp_path):
    """A copy of `tiny_trained` of this test's own, at tmp_path/run."""
    import shutil

    return pathlib.Path(shutil.copytree(tiny_trained, tmp_path / "run"))


@pytest.fixture
def fake_updates(monkeypatch):
    """Every trainer this test makes in this process (t2t-trainer through
    `run_cli` too) updates with `FakeUpdateStep`: the loop, saves,
    evaluations and schedule as always, no model compute (tracing the real
    update takes seconds). Returns the list of the fakes made, in order."""
    import t2t_revival.train.trainer as trainer_module
    from fake_update_step import FakeUpdateStep

    made = []

    def make(*args, **kwargs):
        made.append(FakeUpdateStep(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(trainer_module, "UpdateStep", make)
    return made


@contextlib.contextmanager
def stop_signals_at_their_defaults():
    """Processes started inside the block get SIGINT and SIGHUP at their
    defaults, as from a terminal, even where the tests run as a background
    job (`cmd &` starts it with SIGINT ignored) or under `nohup` (SIGHUP).
    An ignored signal stays ignored across exec, and the CLIs keep it so by
    design; a handler is reset to the default by exec. So where one is
    ignored here, it gets a handler that ignores it, for the block."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGHUP)}
    try:
        for signum, handler in previous.items():
            if handler is signal.SIG_IGN:
                signal.signal(signum, _ignore)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _ignore(signum, frame):
    """A signal this process ignores (`stop_signals_at_their_defaults`)."""


def sigkill_once_saved(trainer_args, out_dir, min_step, timeout, settle):
    """Run a trainer (`python <trainer_args>`) until a checkpoint of step >=
    `min_step` exists, let it go on for `settle` seconds (to land in a later
    update or save), SIGKILL it, and return (latest checkpoint, its step,
    a reader of it). Checks that the checkpoint's optimizer iteration is its step.

    The latest checkpoint is the trainer's own choice on resuming, the newest
    intact one: a kill between writing a checkpoint and updating the
    `checkpoint` index leaves one the index does not name yet."""
    import tensorflow as tf

    from t2t_revival.run_dir.training_directory import TrainingDirectory

    proc = subprocess.Popen([sys.executable, *trainer_args], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            state = tf.train.get_checkpoint_state(str(out_dir))
            if state and int(state.model_checkpoint_path.rsplit("-", 1)[1]) >= min_step:
                break
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            time.sleep(0.2)
        else:
            pytest.fail(f"no checkpoint at step >= {min_step} within {timeout} s")
        time.sleep(settle)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    latest = TrainingDirectory(out_dir).checkpoints.latest()
    saved_step = int(latest.rsplit("-", 1)[1])
    assert checkpoint_step(latest) == saved_step
    return latest, saved_step, tf.train.load_checkpoint(latest)


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the shared data folder is missing: {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def multi30k_data_dir(shared_data, tmp_path_factory):
    """The full Multi30k datagen, run once per session (slow tests share it).

    Returns (data_dir, seconds the datagen took).
    """
    import t2t_revival.problems  # noqa: F401  (registration)
    from t2t_revival.registry import problems as registered

    data_dir = tmp_path_factory.mktemp("multi30k_data")
    start = time.time()
    registered.get("translate_ende_multi30k")(download=False).generate_data(
        str(data_dir), str(shared_data / "multi30k"))
    return data_dir, time.time() - start


@pytest.fixture(scope="session")
def readme_run(shared_data, tmp_path_factory):
    """The README's blocks, run once per session as a newcomer runs them
    (readme_workflow): a `ReadmeRun` of the working folder and each command's
    finished process."""
    from readme_workflow import run_readme

    return run_readme(tmp_path_factory.mktemp("readme"), ENV, shared_data)


@pytest.fixture(scope="session")
def tiny_run(readme_run):
    """The README's main job (transformer_tiny on Multi30k, TINY_RUN_STEPS
    updates), as the README run trained it, then averaged and exported it.

    Shared by the slow trainer, decoder, export and warm-start tests. Returns
    (absolute output_dir, the trainer's stdout, whose paths are the README's
    relative ones).
    """
    return readme_run.main_job()


@pytest.fixture(scope="session")
def tiny_run_test_decodes(tiny_run, shared_data, tmp_path_factory):
    """t2t-decoder (a fresh process, the default search: beam 4, batches of 32)
    of the tiny_run on the first TINY_RUN_TEST_LINES Multi30k test sentences,
    with their references: decoded once, read by test_decoder (the CLI's file,
    BLEU, progress) and test_ctranslate2_export (the translations CTranslate2
    is compared with, those of `Decoder(out_dir).translate`). Returns (the
    finished subprocess, the path of the translations)."""
    import gzip
    import subprocess
    import sys

    from readme_workflow import TINY_RUN_TEST_LINES

    out_dir, _ = tiny_run
    folder = tmp_path_factory.mktemp("tiny_run_test_decodes")
    for lang in ("en", "de"):
        with gzip.open(shared_data / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt",
                       encoding="utf-8") as f:
            lines = [next(f) for _ in range(TINY_RUN_TEST_LINES)]
        (folder / f"test.{lang}").write_text("".join(lines), encoding="utf-8")
    hyp = folder / "test.hyp.de"
    out = subprocess.run(
        [sys.executable, "-m", "t2t_revival.cli.decoder", f"--output_dir={out_dir}",
         f"--decode_from_file={folder / 'test.en'}", f"--decode_reference={folder / 'test.de'}",
         f"--decode_to_file={hyp}"],
        capture_output=True, text=True, env=ENV, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out, hyp


# The CLI module `run_cli` last imported (its flags are the ones defined).
_cli_module = None


def run_cli(module: str, *args: str, stdin: str | bytes = ""):
    """`python -m t2t_revival.cli.<module> ARGS`, called in this process.

    For tests of what a CLI does (its output, files, exit status, one-line
    errors), not of the process itself (signals, kills, start-up lines, a fresh
    interpreter's imports): it saves the TensorFlow import of a new process
    (several seconds each). The entry point runs as written (absl parses the
    flags from their defaults; a UserError is one line and exit 2); stdout
    and stderr are captured, and the signal handlers it installs are put
    back. An exception other than SystemExit (a bug) propagates with its
    traceback. `stdin` (text, or bytes that need not be UTF-8) is the
    standard input, readable as text or through `sys.stdin.buffer`. Returns a
    text `subprocess.CompletedProcess`.

    Output written to the stderr the process started with (a stream bound
    before the call, native code's) is not captured: assert its absence in
    a subprocess.
    """
    import contextlib
    import importlib
    import io
    import signal
    import subprocess
    import sys

    from absl import flags

    from t2t_revival.process.stopped_by_signal import STOP_SIGNALS

    global _cli_module
    name = f"t2t_revival.cli.{module}"
    if _cli_module not in (None, name):
        # Each CLI module defines its flags at import, some of the same names
        # (--output_dir): drop the previous module's before importing another.
        # (A copy: deleting a flag also takes it out of this very list.)
        # tensor2tensor's spellings are in a section of their own.
        from t2t_revival.cli.tensor2tensor_flags import HELP_SECTION

        by_module = flags.FLAGS.flags_by_module_dict()
        for flag in [*by_module.get(_cli_module, []), *by_module.get(HELP_SECTION, [])]:
            if flag.name in flags.FLAGS:
                delattr(flags.FLAGS, flag.name)
        sys.modules.pop(_cli_module, None)
        sys.modules.pop(name, None)
    cli = importlib.import_module(name)
    _cli_module = name
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    argv, stdin_before = sys.argv, sys.stdin
    stdout, stderr = io.StringIO(), io.StringIO()
    flags.FLAGS.unparse_flags()
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    sys.argv = [f"t2t-{module.replace('_', '-')}", *args]
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    status = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                cli.run()
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv, sys.stdin = argv, stdin_before
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        flags.FLAGS.unparse_flags()
    return subprocess.CompletedProcess([name, *args], status, stdout.getvalue(),
                                       stderr.getvalue())


def checkpoint_step(prefix) -> int:
    """The step a trainer's checkpoint holds: its optimizer's iteration count
    (the step a run resumed from it goes on from)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    key = next(k for k in reader.get_variable_to_shape_map()
               if k.startswith("optimizer/00000_iteration"))
    return int(reader.get_tensor(key))

