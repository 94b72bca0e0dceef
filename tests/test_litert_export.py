"""The LiteRT export (t2t-exporter --format=litert) and LiteRTTranslator."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ENV, one_line_error, run_cli
from random_run_dir import make_random_run_dir, make_vocab

# The first is longer than max_length (16): cut, as by the decoder.
SENTENCES = ["A man in a blue shirt is riding a bike down the street.",
             "Two dogs play in the snow.", "", "x"]


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("litert")
    # Short sources and outputs: the translator's eager beam search and the
    # conversion stay quick.
    return make_random_run_dir(root / "run", make_vocab(root / "vocab.model"), seed=3,
                               max_length=16, extra_length=6)


def test_litert_round_trip_in_a_clean_process_gives_the_decoders_translations(random_run):
    from t2t_revival.decode.decoder import Decoder

    out = run_cli("exporter", f"--output_dir={random_run}", "--format=litert")
    assert out.returncode == 0, out.stderr[-3000:]
    version_dir = os.path.join(random_run, "export", "litert", "1")
    assert f"Exported the LiteRT programs to {version_dir}" in out.stdout
    assert sorted(os.listdir(version_dir)) == ["README.md", "encoder.tflite", "step.tflite",
                                               "t2t_export.json", "vocab.model"]
    # A fresh process that loads the export from its folder of versions.
    code = ("import json, sys\n"
            "from t2t_revival.decode.litert_translator import LiteRTTranslator\n"
            "t = LiteRTTranslator(sys.argv[1])\n"
            "print(json.dumps([t.translate(json.loads(sys.argv[2])), t.export_dir]))\n")
    proc = subprocess.run([sys.executable, "-c", code, os.path.dirname(version_dir),
                           json.dumps(SENTENCES)], capture_output=True, text=True, env=ENV,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    translations, read_dir = json.loads(proc.stdout.strip().splitlines()[-1])
    assert read_dir == version_dir
    # Beam 4 as exported; one sentence a batch, as the translator decodes (a
    # batch's length limit follows its longest input).
    expected = Decoder.load(random_run, overrides={"batch_size": 1, "xla": False}
                            ).translate(SENTENCES)
    assert translations == expected
    assert translations[2] == "" and any(translations)


def test_litert_export_errors_are_one_line(random_run, tmp_path):
    empty = tmp_path / "no_checkpoints"
    empty.mkdir()
    for name in ("hparams.json", "run.json", "vocab.model"):
        shutil.copyfile(os.path.join(random_run, name), empty / name)
    one_line_error(run_cli("exporter", f"--output_dir={empty}", "--format=litert"),
                   "t2t-exporter", "checkpoint")
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    one_line_error(run_cli("exporter", f"--output_dir={random_run}", "--format=litert",
                           f"--export_dir={a_file}"),
                   "t2t-exporter", "--export_dir names a file", f"Received: --export_dir='{a_file}'")
    # The default output folder (output_dir/export/litert) a file.
    run_copy = tmp_path / "run_copy"
    shutil.copytree(random_run, run_copy, ignore=shutil.ignore_patterns("export"))
    (run_copy / "export").mkdir()
    (run_copy / "export" / "litert").write_text("not a folder")
    one_line_error(run_cli("exporter", f"--output_dir={run_copy}", "--format=litert"),
                   "t2t-exporter", "is a file", f"export_dir='{run_copy}/export/litert'")
    one_line_error(run_cli("exporter", f"--output_dir={random_run}", "--format=litert",
                           "--decode_hparams=batch_size=8"),
                   "t2t-exporter", "LiteRT export fixes only", "batch_size")


def test_litert_translator_refuses_what_is_not_a_litert_export(tmp_path):
    from t2t_revival.errors import UserError
    from t2t_revival.decode.litert_translator import LiteRTTranslator

    with pytest.raises(UserError, match="t2t_export.json is missing; pass a version directory "
                                        "written by t2t-exporter --format=litert"):
        LiteRTTranslator(str(tmp_path))
    (tmp_path / "t2t_export.json").write_text(json.dumps({"format": "ctranslate2"}))
    with pytest.raises(UserError, match="is not a litert export .its format is 'ctranslate2'"):
        LiteRTTranslator(str(tmp_path))
    with pytest.raises(UserError, match="num_threads must be an integer >= 0"):
        LiteRTTranslator(str(tmp_path), num_threads=-1)
    with pytest.raises(UserError, match="long_inputs must be one of cut, refuse"):
        LiteRTTranslator(str(tmp_path), long_inputs="drop")
