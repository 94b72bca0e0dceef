"""Every test run writes where its time went: `build/test-durations.json`
(a pytest plugin, loaded by conftest).

For each test: its outcome, the wall seconds of its set-up, call and
tear-down (what `--durations` prints; a session or module fixture's set-up
is carried by the first test that asks for it), and the CPU seconds its
worker process and the subprocesses it waited for used meanwhile (on a
loaded machine wall time stretches, CPU time much less). With
pytest-xdist each worker measures its own tests and the controller writes
the file once, at the end, with the run's wall time, its command and the
load average: write to a temporary name, then rename, so a run killed
midway leaves the last whole file.

    python -m benchmarks.suite_durations    # the summary of build/test-durations.json, by file
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import resource
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# T2T_TEST_DURATIONS names another file (two runs of the suite at once).
RECORD = pathlib.Path(os.environ.get("T2T_TEST_DURATIONS")
                      or ROOT / "build" / "test-durations.json")

_CPU = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach each phase's CPU seconds to its report (they travel to the
    xdist controller with it)."""
    outcome = yield
    start = item.stash.get(_CPU, None)
    now = _cpu_seconds()
    if start is not None:
        outcome.get_result().user_properties.append(("cpu_s", round(now - start, 3)))
    item.stash[_CPU] = now


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_CPU] = _cpu_seconds()
    yield


class DurationsRecord:
    """Collects the reports on the process that writes the file (the xdist
    controller, or the only process)."""

    def __init__(self, config):
        self.config = config
        self.started = time.time()
        self.tests: dict[str, dict] = {}
        self.fake_trainings = 0
        self.base_temp = None   # (xdist) the workers' common folder, as they report it

    def pytest_runtest_logreport(self, report):
        test = self.tests.setdefault(report.nodeid, {"nodeid": report.nodeid,
                                                     "outcome": "passed", "cpu_s": 0.0})
        test[f"{report.when}_s"] = round(report.duration, 3)
        test["cpu_s"] = round(test["cpu_s"] + dict(report.user_properties).get("cpu_s", 0.0), 3)
        if report.failed:
            test["outcome"] = "failed"
        elif report.skipped and report.when != "teardown":
            test["outcome"] = "skipped"
        worker = getattr(report, "node", None)
        if worker is not None:
            test["worker"] = worker.gateway.id

    def pytest_testnodedown(self, node, error):
        """(xdist) A worker's count of the trainings it ran with the fake update."""
        output = getattr(node, "workeroutput", {})
        self.fake_trainings += output.get("fake_trainings", 0)
        if output.get("base_temp"):
            self.base_temp = pathlib.Path(output["base_temp"])

    def pytest_sessionfinish(self, session, exitstatus):
        if not self.tests:
            return
        self.fake_trainings += FAKE_TRAININGS[0]
        record = {
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": ["pytest", *sys.argv[1:]],
            "exit_status": int(exitstatus),
            "wall_s": round(time.time() - self.started, 1),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "cpu_count": os.cpu_count(),
            "trainings": trainings(self.base_temp or BASE_TEMP[0], self.fake_trainings),
            "tests": sorted(self.tests.values(), key=lambda t: t["nodeid"]),
        }
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        temporary = RECORD.with_name(f".{RECORD.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, RECORD)


# Trainings this process ran with `FakeUpdateStep` (it counts itself here).
FAKE_TRAININGS = [0]
# The folder all of this run's temporary folders are in (set by the fixture below).
BASE_TEMP: list = [None]


@pytest.fixture(scope="session", autouse=True)
def base_temp_of_the_run(tmp_path_factory):
    """Note the run's base temporary folder for `trainings` (under xdist,
    the workers' folders are in their base's parent)."""
    base = tmp_path_factory.getbasetemp()
    BASE_TEMP[0] = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def trainings(base: pathlib.Path | None, fake: int) -> dict:
    """How many trainings the run made: each training loop writes one
    TensorBoard file, `<output_dir>/train/events.out.tfevents.<time>...`, so
    the distinct file names under the run's temporary folders count the
    training runs (a copied run directory carries its original's file, of
    the same name), and each directory's earliest one the runs from
    scratch; the other ones are resumes. `fake` of them updated with
    `FakeUpdateStep` (the loop and the model real, no update computed).
    `base` is None where no test asked for a fixture (nothing trained)."""
    runs: dict[str, str] = {}   # file name -> its directory's earliest
    by_folder: dict[pathlib.Path, list[str]] = {}
    for path in (base.rglob("events.out.tfevents.*") if base else ()):
        if path.parent.name == "train":
            by_folder.setdefault(path.parent, []).append(path.name)
    names = {n for found in by_folder.values() for n in found}
    scratch = {min(found) for found in by_folder.values()}
    return {"runs": len(names), "from_scratch": len(scratch),
            "from_scratch_fake_update": fake, "from_scratch_real_update": len(scratch) - fake}


def pytest_configure(config):
    if not hasattr(config, "workerinput"):   # the controller, or no xdist
        config.pluginmanager.register(DurationsRecord(config), "durations_record_writer")


def pytest_sessionfinish(session, exitstatus):
    """(On an xdist worker) send its count of fake-update trainings to the controller."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["fake_trainings"] = FAKE_TRAININGS[0]
        session.config.workeroutput["base_temp"] = str(BASE_TEMP[0] or "")
