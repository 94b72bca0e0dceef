"""Issue 61, item 4: a mistyped problem, model, hparam or hparam set, and a
missing run directory or hparams.json, are reported in their one line before
TensorFlow or Keras is imported (which takes seconds, tens under load).

Each case runs the CLI's `run()` in a fresh interpreter with the bad flags
and prints, after the error, which heavy packages were imported by then."""

import subprocess
import sys

import pytest

from conftest import ENV, one_line_error

HEAVY = ("tensorflow", "keras", "tensorflow_text", "jax")
_CODE = """
import sys
module, argv = sys.argv[1], sys.argv[2:]
sys.argv = ["prog", *argv]
import importlib
cli = importlib.import_module("t2t_revival.cli." + module)
try:
    cli.run()
finally:
    heavy = sorted({m.split(".")[0] for m in sys.modules} & set(%r))
    print("HEAVY", heavy, flush=True)
""" % (HEAVY,)


def _run_cli(module, *argv):
    return subprocess.run([sys.executable, "-c", _CODE, module, *argv], capture_output=True,
                          text=True, env=ENV, timeout=300)


@pytest.mark.parametrize("module,prog,flags,needle", [
    ("trainer", "t2t-trainer", ["--problem=translate_ende_multi30kk"],
     "Unknown problem 'translate_ende_multi30kk'"),
    ("trainer", "t2t-trainer", ["--model=transformr"], "Unknown model 'transformr'"),
    ("trainer", "t2t-trainer", ["--hparams=foo=1"], "Unknown hparam 'foo'"),
    ("trainer", "t2t-trainer", ["--hparams_set=transformer_tinyy"],
     "Unknown hparam set 'transformer_tinyy'"),
    ("decoder", "t2t-decoder", ["--output_dir={missing}", "--decode_from_file={lines}"],
     "No hparams file at"),
    ("decoder", "t2t-decoder", ["--output_dir={empty}", "--decode_from_file={lines}"],
     "No hparams file at"),
    ("exporter", "t2t-exporter", ["--output_dir={missing}"], "does not exist"),
    ("exporter", "t2t-exporter", ["--output_dir={empty}"], "No hparams file at"),
    ("exporter", "t2t-exporter", ["--output_dir={empty}", "--format=ctranslate2"],
     "No hparams file at"),
])
def test_a_mistake_is_reported_before_tensorflow_is_imported(tmp_path, module, prog, flags,
                                                             needle):
    (tmp_path / "empty").mkdir()
    (tmp_path / "data").mkdir()
    lines = tmp_path / "lines.txt"
    lines.write_text("Ein Hund.\n")
    paths = dict(missing=tmp_path / "no_run", empty=tmp_path / "empty", lines=lines)
    argv = [f.format(**paths) for f in flags]
    if module == "trainer":
        argv += [f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'run'}"]
    out = _run_cli(module, *argv)
    one_line_error(out, prog, needle)
    assert out.stdout.splitlines()[-1] == "HEAVY []", out.stdout[-2000:]
    assert not (tmp_path / "run" / "hparams.json").exists()   # nothing half-written
