"""The one owner of export-format dispatch (`export_format.FORMATS`): each
format's function, its default folder, and what an export clears first."""

import ast
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ENV, ROOT
from t2t_revival.errors import UserError
from t2t_revival.export.export_format import DEFAULT_FORMAT, FORMATS, ExportFormat, export_format

CALLS = []


def fake_export(output_dir, checkpoint_path, decode_overrides, export_dir, version, **options):
    """The export function of the test's format: records its call."""
    CALLS.append((output_dir, checkpoint_path, decode_overrides, export_dir, version, options))
    return os.path.join(export_dir, str(version))


@pytest.mark.parametrize("name", list(FORMATS))
def test_each_format_names_an_export_function_that_takes_its_arguments(name):
    """Read from the source (the exports import TensorFlow): the function
    exists and takes the dispatch's arguments and the format's options."""
    chosen = FORMATS[name]
    module, _, function = chosen.function.partition(":")
    with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    args = [a.arg for a in found.args.args + found.args.kwonlyargs]
    assert args[:5] == ["output_dir", "checkpoint_path", "decode_overrides", "export_dir",
                        "version"]
    assert set(chosen.options) <= set(args[5:])
    assert chosen.export_dir("run").startswith(os.path.join("run", "export"))


def test_the_formats_and_their_folders():
    assert list(FORMATS) == ["saved_model", "ctranslate2", "litert"]
    assert DEFAULT_FORMAT == "saved_model"
    assert [FORMATS[n].export_dir("run") for n in FORMATS] == [
        os.path.join("run", "export"), os.path.join("run", "export", "ctranslate2"),
        os.path.join("run", "export", "litert")]
    with pytest.raises(UserError, match=r"use one of saved_model, ctranslate2, litert\. "
                                        r"Received: format='onnx'"):
        export_format("onnx")


def test_an_export_clears_what_killed_exports_left_and_says_it(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    export = tmp_path / "export"
    (export / f".3.incomplete{dead.pid}").mkdir(parents=True)
    fake = ExportFormat("fake", "fake model", "a fake", "test_export_format:fake_export",
                        "export_dir", options=("speed",))
    said = []
    CALLS.clear()
    path = fake.export(str(tmp_path), "ckpt-3", {"beam_size": 2}, version=3, log=said.append,
                       speed="fast")
    assert path == str(export / "3")
    assert CALLS == [(str(tmp_path), "ckpt-3", {"beam_size": 2}, str(export), 3,
                      {"speed": "fast"})]
    assert said == [f"Removed {export}/.3.incomplete{dead.pid}, left by an interrupted export."]
    assert not os.listdir(export)


def test_the_exporter_offers_every_format():
    out = subprocess.run([sys.executable, "-m", "t2t_revival.cli.exporter", "--helpfull"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "<saved_model|ctranslate2|litert>" in text, text
    for chosen in FORMATS.values():
        assert f"{chosen.name}: {chosen.description}" in text
