"""The suite's own time record (issue 71): `tests/durations_record.py` writes
build/test-durations.json at the end of every run, and
`benchmarks/suite_durations.py` sums it by file."""

import json
import pathlib
import tempfile
import types

import pytest

import durations_record
from benchmarks import suite_durations


class _Report:
    def __init__(self, nodeid, when, duration, cpu, outcome="passed", worker=None):
        self.nodeid, self.when, self.duration = nodeid, when, duration
        self.user_properties = [("cpu_s", cpu)]
        self.failed, self.skipped = outcome == "failed", outcome == "skipped"
        if worker:
            self.node = types.SimpleNamespace(gateway=types.SimpleNamespace(id=worker))


@pytest.fixture
def outside():
    """A folder outside the run's base temp: the events made here are not
    this run's trainings (its own record counts what is under base temp)."""
    with tempfile.TemporaryDirectory() as folder:
        yield pathlib.Path(folder)


def _events(folder, *names):
    (folder / "train").mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / "train" / f"events.out.tfevents.{name}").write_bytes(b"")


def test_trainings_count_each_loop_once_and_a_copy_not_again(outside):
    _events(outside / "gw0" / "a" / "run", "100.host.1", "200.host.2")   # a run and a resume
    _events(outside / "gw0" / "b" / "run", "100.host.1")                 # a copy of a's
    _events(outside / "gw1" / "c" / "run", "300.host.3")                 # another run
    (outside / "gw1" / "c" / "run" / "eval").mkdir()
    (outside / "gw1" / "c" / "run" / "eval" / "events.out.tfevents.400.host.3").write_bytes(b"")
    assert durations_record.trainings(outside, fake=1) == {
        "runs": 3, "from_scratch": 2, "from_scratch_fake_update": 1,
        "from_scratch_real_update": 1}


def test_the_record_sums_each_tests_phases_and_is_written_whole(outside, monkeypatch):
    record_path = outside / "build" / "test-durations.json"
    monkeypatch.setattr(durations_record, "RECORD", record_path)
    monkeypatch.setattr(durations_record, "FAKE_TRAININGS", [1])
    monkeypatch.setattr(durations_record, "BASE_TEMP", [None])
    for run, names in (("a", ["100.host.1", "200.host.1"]), ("b", ["300.host.1"]), ("c", ["400.host.1"])):
        _events(outside / "gw1" / run, *names)
    writer = durations_record.DurationsRecord(None)
    for report in (_Report("tests/test_a.py::test_x@test_a", "setup", 3.0, 2.5, worker="gw0"),
                   _Report("tests/test_a.py::test_x@test_a", "call", 1.0, 0.75, worker="gw0"),
                   _Report("tests/test_a.py::test_x@test_a", "teardown", 0.5, 0.0, worker="gw0"),
                   _Report("tests/test_a.py::test_y@test_a", "setup", 0.0, 0.0, "skipped"),
                   _Report("tests/test_b.py::test_z@test_b", "call", 2.0, 1.0, "failed")):
        writer.pytest_runtest_logreport(report)
    writer.pytest_testnodedown(types.SimpleNamespace(
        workeroutput={"fake_trainings": 1, "base_temp": str(outside)}), None)
    session = types.SimpleNamespace(config=None)
    writer.pytest_sessionfinish(session, 1)
    record = json.loads(record_path.read_text(encoding="utf-8"))
    assert [p.name for p in record_path.parent.iterdir()] == ["test-durations.json"]
    assert record["exit_status"] == 1
    assert record["trainings"] == {"runs": 4, "from_scratch": 3, "from_scratch_fake_update": 2,
                                   "from_scratch_real_update": 1}
    x, y, z = record["tests"]
    assert x == {"nodeid": "tests/test_a.py::test_x@test_a", "outcome": "passed",
                 "cpu_s": 3.25, "setup_s": 3.0, "call_s": 1.0, "teardown_s": 0.5,
                 "worker": "gw0"}
    assert (y["outcome"], z["outcome"]) == ("skipped", "failed")

    summary = suite_durations.summary(record, top=2)
    assert summary["outcomes"] == {"passed": 1, "skipped": 1, "failed": 1}
    assert summary["files"] == [
        {"file": "tests/test_a.py", "tests": 2, "wall_s": 4.5, "cpu_s": 3.2},
        {"file": "tests/test_b.py", "tests": 1, "wall_s": 2.0, "cpu_s": 1.0}]
    assert [t["test"] for t in summary["slowest"]] == ["tests/test_a.py::test_x",
                                                        "tests/test_b.py::test_z"]


def test_the_summary_of_a_missing_or_damaged_record_is_one_line(tmp_path, monkeypatch, capsys):
    for content, needle in ((None, "no test durations at"),
                            (b"\xff{", "is not a test durations file")):
        path = tmp_path / "record.json"
        if content is not None:
            path.write_bytes(content)
        monkeypatch.setattr("sys.argv", ["suite_durations", f"--record={path}"])
        with pytest.raises(SystemExit) as exit_:
            suite_durations.harness.run(suite_durations.main, "suite_durations")
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("suite_durations: error: ") and needle in err
