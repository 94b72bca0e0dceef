"""benchmarks/first_translation.py: the phases a process reports, its first
output, and the mistake rows end to end (fast: no model is loaded)."""

import json
import subprocess
import sys

from benchmarks import first_translation, harness
from conftest import ENV
from t2t_revival.process import phase_times


def test_phase_prints_only_when_asked(capsys, monkeypatch):
    monkeypatch.delenv(phase_times.ENV_VAR, raising=False)
    phase_times.phase("built")
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(phase_times.ENV_VAR, "1")
    phase_times.phase("built")
    name, stamp = capsys.readouterr().err.removeprefix(phase_times.PREFIX).split()
    assert name == "built" and float(stamp) > 0


def test_a_process_s_phases_and_first_output_are_timed_from_its_start():
    code = ("import time\nfrom t2t_revival.process.phase_times import phase\n"
            "time.sleep(0.3); phase('imported')\ntime.sleep(0.2); phase('built')\n"
            "time.sleep(0.2); print('Ein Hund.', flush=True)\ntime.sleep(0.3)\n")
    result = first_translation.timed_process([sys.executable, "-c", code])
    assert result["returncode"] == 0
    assert list(result["phases"]) == ["imported", "built", "to_first_output"]
    assert result["phases"]["built"] >= 0.15 and result["phases"]["to_first_output"] >= 0.15
    assert result["phases_at_s"]["built"] >= 0.45
    assert result["phases_at_s"]["built"] < result["first_output_s"] < result["exit_s"]
    assert result["exit_s"] >= result["first_output_s"] + 0.25


def test_the_mistake_rows_report_before_tensorflow(tmp_path):
    command, env = harness.module_command(sys.executable, "first_translation",
                                          f"--output_dir={tmp_path}",
                                          "--rows=mistake_hparam,mistake_run_dir")
    out = subprocess.run(command, capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=ENV["PYTHONPATH"]), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rows"] == ["mistake_hparam", "mistake_run_dir"]
    assert len(report["loadavg_before"]) == 3 and report["machine"]
    hparam, run_dir = report["results"]["mistake_hparam"], report["results"]["mistake_run_dir"]
    assert hparam["error"].startswith("t2t-trainer: error: Unknown hparam 'foo'")
    assert run_dir["error"].startswith("t2t-decoder: error: No hparams file at")
    for row in (hparam, run_dir):
        assert row["returncode"] == 2 and row["tensorflow_imported"] is False
        assert 0 < row["first_output_s"] <= row["exit_s"]


def test_an_unknown_row_is_one_line(tmp_path):
    command, env = harness.module_command(sys.executable, "first_translation",
                                          f"--output_dir={tmp_path}", "--rows=quick,decoder_3")
    out = subprocess.run(command, capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=ENV["PYTHONPATH"]), timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"first_translation: error: unknown rows decoder_3; rows: "
        f"{', '.join(first_translation.ROWS)}, all, quick. Received: --rows='quick,decoder_3'"]


def test_a_failed_row_keeps_the_other_rows_figures(tmp_path):
    """A row that cannot run (no SavedModel here) is said in the JSON and in
    one line, exit 2; the rows before and after it still print their figures."""
    command, env = harness.module_command(sys.executable, "first_translation",
                                          f"--output_dir={tmp_path}",
                                          "--rows=mistake_hparam,saved_model,mistake_run_dir")
    out = subprocess.run(command, capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=ENV["PYTHONPATH"]), timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["failed_rows"] == ["saved_model"]
    assert report["results"]["saved_model"]["failed"].startswith("no SavedModel under")
    assert report["results"]["mistake_hparam"]["returncode"] == 2
    assert report["results"]["mistake_run_dir"]["returncode"] == 2
    assert out.stderr.strip().splitlines()[-1].startswith(
        "first_translation: error: rows saved_model failed")
