"""Where the test suite's time goes: the summary of a run's `build/test-durations.json`.

Every `python -m pytest` run writes that file (tests/durations_record.py):
each test's wall seconds (set-up, call, tear-down) and the CPU seconds its
worker and the subprocesses it waited for used. This prints, as JSON, the
run's wall time, command and load average, the number of tests by outcome,
the trainings it ran, the seconds by test file (wall and CPU, the set-up of
shared fixtures carried by the first test that asked for them) and the
slowest tests.

    python -m benchmarks.suite_durations                       # build/test-durations.json
    python -m benchmarks.suite_durations --record=old.json --top=40
"""

from __future__ import annotations

import collections
import json
import pathlib

from benchmarks import harness
from t2t_revival.errors import UserError

RECORD = harness.ROOT / "build" / "test-durations.json"


def summary(record: dict, top: int) -> dict:
    """The summary of a durations record (`tests/durations_record.py`'s JSON)."""
    files: dict[str, dict[str, float]] = collections.defaultdict(
        lambda: {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0})
    outcomes: collections.Counter = collections.Counter()
    tests = []
    for test in record["tests"]:
        wall = sum(test.get(f"{when}_s", 0.0) for when in ("setup", "call", "teardown"))
        outcomes[test["outcome"]] += 1
        name = test["nodeid"].split("::", 1)[0]
        files[name]["tests"] += 1
        files[name]["wall_s"] += wall
        files[name]["cpu_s"] += test.get("cpu_s", 0.0)
        tests.append((wall, test["nodeid"].split("@", 1)[0], test.get("cpu_s", 0.0)))
    by_file = sorted(files.items(), key=lambda item: -item[1]["wall_s"])
    return {
        "finished": record["finished"], "command": " ".join(record["command"]),
        "wall_s": record["wall_s"], "load_average_at_end": record["load_average_at_end"],
        "outcomes": dict(outcomes), "trainings": record.get("trainings"),
        "test_wall_s": round(sum(t[0] for t in tests), 1),
        "test_cpu_s": round(sum(t[2] for t in tests), 1),
        "files": [{"file": name, "tests": v["tests"], "wall_s": round(v["wall_s"], 1),
                   "cpu_s": round(v["cpu_s"], 1)} for name, v in by_file],
        "slowest": [{"test": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
                    for wall, name, cpu in sorted(tests, reverse=True)[:top]],
    }


def main() -> None:
    parser = harness.argument_parser("suite_durations", __doc__)
    parser.add_argument("--record", default=str(RECORD),
                        help="a test run's durations file (default: build/test-durations.json)")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests")
    args = parser.parse_args()
    path = pathlib.Path(args.record)
    if not path.is_file():
        raise UserError(f"no test durations at {path}: run the tests first (python -m pytest "
                        f"writes build/test-durations.json). Received: --record={path}")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is not a test durations file ({e}); rerun the tests to "
                        f"write it anew. Received: --record={path}") from None
    harness.print_result(summary(record, args.top), indent=1)


if __name__ == "__main__":
    harness.run(main, "suite_durations")
