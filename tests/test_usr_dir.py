"""--t2t_usr_dir: the user's own registrations, imported before names are read;
import errors as one line naming file:line; the record in run.json."""

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import ENV, ROOT, one_line_error, readme_block, run_cli

_PROBLEM = '''
from t2t_revival.data.text2text_problem import Text2TextProblem
from t2t_revival.hparams_sets.transformer import transformer_tiny
from t2t_revival.registry import register_hparams, register_problem


@register_problem
class MyUsrDirProblem(Text2TextProblem):
    """A problem of the usr_dir test."""
    vocab_size = 300


@register_hparams
def my_usr_dir_hparams():
    """An hparam set of the usr_dir test."""
    return transformer_tiny().replace(num_hidden_layers=1)
'''


def _cli(module, *args):
    return subprocess.run([sys.executable, "-m", f"t2t_revival.cli.{module}", *args],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("layout", ["package", "modules"])
def test_registry_help_lists_usr_dir_names(tmp_path, layout):
    usr_dir = tmp_path / "my_usr"
    usr_dir.mkdir()
    if layout == "package":
        (usr_dir / "__init__.py").write_text("from . import defs  # noqa\n")
        (usr_dir / "defs.py").write_text(_PROBLEM)
    else:
        (usr_dir / "my_usr_defs.py").write_text(_PROBLEM)
    out = _cli("trainer", f"--t2t_usr_dir={usr_dir}", "--registry_help")
    assert out.returncode == 0, out.stderr
    assert "my_usr_dir_problem" in out.stdout and "A problem of the usr_dir test." in out.stdout
    assert "my_usr_dir_hparams" in out.stdout
    # Without the flag the names are unknown.
    assert "my_usr_dir_problem" not in _cli("trainer", "--registry_help").stdout


@pytest.mark.parametrize("body,line,needle", [
    ("x = 1\ndef broken(:\n", 2, "SyntaxError"),
    ("import os\nimport no_such_module_xyz\n", 2, "ModuleNotFoundError: No module named"),
    ("a = 1\n\nraise RuntimeError('boom at import')\n", 3, "RuntimeError: boom at import"),
])
def test_import_error_is_one_line_naming_file_and_line(tmp_path, body, line, needle):
    usr_dir = tmp_path / "bad_usr"
    usr_dir.mkdir()
    (usr_dir / "__init__.py").write_text("from . import mod  # noqa\n")
    (usr_dir / "mod.py").write_text(body)
    for module in ("trainer", "datagen"):
        out = _cli(module, f"--t2t_usr_dir={usr_dir}", "--registry_help"
                   if module == "trainer" else f"--data_dir={tmp_path}/d")
        prog = f"t2t-{module}"
        one_line_error(out, prog, f"{usr_dir / 'mod.py'}:{line}", needle)


def test_duplicate_name_in_usr_dir_names_its_line(tmp_path):
    usr_dir = tmp_path / "dup_usr"
    usr_dir.mkdir()
    (usr_dir / "dup_defs.py").write_text(textwrap.dedent('''
        from t2t_revival.registry import register_hparams

        @register_hparams
        def transformer_tiny():
            return None
    '''))
    out = _cli("trainer", f"--t2t_usr_dir={usr_dir}", "--registry_help")
    one_line_error(out, "t2t-trainer", "already registered", str(usr_dir / "dup_defs.py"))


def test_missing_or_file_usr_dir(tmp_path):
    out = _cli("trainer", f"--t2t_usr_dir={tmp_path / 'nowhere'}", "--registry_help")
    one_line_error(out, "t2t-trainer", "does not exist", "--t2t_usr_dir")
    a_file = tmp_path / "a_file.py"
    a_file.write_text("x = 1\n")
    out = _cli("trainer", f"--t2t_usr_dir={a_file}", "--registry_help")
    one_line_error(out, "t2t-trainer", "is a file")


def test_module_name_clash_is_refused(tmp_path):
    usr_dir = tmp_path / "t2t_revival"       # the name of our own package
    usr_dir.mkdir()
    (usr_dir / "__init__.py").write_text("")
    out = _cli("trainer", f"--t2t_usr_dir={usr_dir}", "--registry_help")
    one_line_error(out, "t2t-trainer", "already taken", "rename")


@pytest.mark.parametrize("module,prog", [("decoder", "t2t-decoder"),
                                          ("exporter", "t2t-exporter"),
                                          ("avg_checkpoints", "t2t-avg-checkpoints")])
def test_recorded_usr_dir_that_vanished_is_one_line(tmp_path, module, prog):
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    gone = tmp_path / "gone_usr"
    (out_dir / "run.json").write_text(json.dumps({"problem": "x", "usr_dir": str(gone)}))
    args = [f"--output_dir={out_dir}"]
    if module == "decoder":
        args.append("--decode_interactive")
    out = _cli(module, *args)
    one_line_error(out, prog, str(gone), "no longer exists", "--t2t_usr_dir")


def test_recorded_usr_dir_is_imported_and_flag_wins(tmp_path, monkeypatch):
    """The averager of a directory imports the recorded usr_dir (its error
    shows it was imported); an explicit --t2t_usr_dir replaces it. (In this
    process, `run_cli`: the averager imports TensorFlow, a process's start
    is not the subject, and neither module registers a name; the folders
    the imports put on sys.path, and the modules, are taken out after.)"""
    monkeypatch.setattr(sys, "path", list(sys.path))
    bad = tmp_path / "recorded_usr"
    bad.mkdir()
    (bad / "rec_mod.py").write_text("raise ValueError('recorded one imported')\n")
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    (out_dir / "run.json").write_text(json.dumps({"problem": "x", "usr_dir": str(bad)}))
    out = run_cli("avg_checkpoints", f"--output_dir={out_dir}")
    one_line_error(out, "t2t-avg-checkpoints", "recorded one imported", f"{bad / 'rec_mod.py'}:1")
    good = tmp_path / "explicit_usr"
    good.mkdir()
    (good / "explicit_mod.py").write_text("X = 1\n")
    out = run_cli("avg_checkpoints", f"--output_dir={out_dir}", f"--t2t_usr_dir={good}")
    one_line_error(out, "t2t-avg-checkpoints", "no checkpoints")
    sys.modules.pop("explicit_mod", None)


@pytest.mark.slow
def test_readme_usr_dir_problem_end_to_end_with_dev_bleu(tmp_path):
    """The usr_dir of docs/your-own-data.md, saved in a temp folder outside the repo, and its
    commands as written: t2t-datagen and t2t-trainer with --t2t_usr_dir, then
    t2t-decoder of that directory WITHOUT the flag (run.json names the usr_dir).

    It is also issue #15's acceptance run: the problem reads the WMT14 sample
    (train_sample_tokenized) with newstest2013 as dev, and the trainer, scaled
    down to a few updates (test_dev_metric.DEV_BLEU_FLAGS), scores dev BLEU at
    each evaluation; check_dev_bleu_run then checks TensorBoard, best/ and a
    t2t-decoder run on best/, again without the flag, giving the recorded BLEU.
    max_length=256 keeps every one of the first dev sentences, so the decoder
    sees the same sentences as the trainer. (What 150 updates reach is
    benchmarks/usr_dir_dev_bleu.py's.)"""
    from test_dev_metric import DEV_BLEU_FLAGS, check_dev_bleu_run

    work = tmp_path / "work"
    (work / "my_usr_dir").mkdir(parents=True)
    (work / "my_usr_dir" / "__init__.py").write_text(readme_block("class TranslateEndeMySample"))
    commands = [" ".join(l.split()) for l in
                readme_block("--problem=translate_ende_my_sample").replace("\\\n", " ").splitlines()
                if l.strip()]
    assert [c.split()[0] for c in commands] == ["t2t-datagen", "t2t-trainer", "t2t-decoder"]
    assert "--t2t_usr_dir" not in commands[2]
    shared = ROOT.parent / "shared"
    modules = {"t2t-datagen": "datagen", "t2t-trainer": "trainer", "t2t-decoder": "decoder"}
    # (transformer_tiny cut to 1 narrow layer: the same commands, half the time.)
    extra = {"t2t-trainer": [*DEV_BLEU_FLAGS, "--hparams=max_length=256,num_hidden_layers=1,"
                                              "d_model=32,d_ff=64,num_heads=2,batch_size=1024"]}
    outputs = {}
    for command in commands:
        prog, *args = command.split()
        args = [a.replace("../shared", str(shared)) for a in args]
        if prog == "t2t-decoder":
            source = work / "my_sample_data/translate_ende_my_sample-test.source.txt"
            source.write_text("".join(source.read_text().splitlines(keepends=True)[:4]))
        out = subprocess.run([sys.executable, "-m", f"t2t_revival.cli.{modules[prog]}", *args,
                              *extra.get(prog, [])], capture_output=True, text=True,
                             env=ENV, cwd=work, timeout=2400)
        assert out.returncode == 0, (command, out.stderr[-3000:])
        outputs[prog] = out
    problem, data_dir = "translate_ende_my_sample", work / "my_sample_data"
    out_dir = work / "t2t_train/my_sample"
    record = json.loads((out_dir / "run.json").read_text())
    assert record["usr_dir"] == str(work / "my_usr_dir")
    assert record["problem"] == problem
    assert len((work / "my.hyp.de").read_text().splitlines()) == 4
    # The decoder took the usr_dir from run.json: the problem is not built in.
    assert "translate_ende_my_sample" not in _cli("trainer", "--registry_help").stdout
    # Issue #15: dev BLEU at each evaluation, best/, the decoder on best/.
    train = outputs["t2t-trainer"]
    assert "Dev decoding leaves out" not in train.stdout + train.stderr
    check_dev_bleu_run(train, out_dir, data_dir / f"{problem}-dev.source.txt",
                       data_dir / f"{problem}-dev.target.txt", tmp_path)


def _usr_package(path, code):
    """A --t2t_usr_dir package at `path` whose __init__.py is `code` (dedented)."""
    path.mkdir()
    (path / "__init__.py").write_text(textwrap.dedent(code))
    return path


def test_datagen_runs_a_problem_that_subclasses_problem_directly(tmp_path):
    """A usr_dir problem on the base `Problem` (as its docstring allows) gets
    datagen's --num_workers too (it was a TypeError traceback)."""
    usr_dir = _usr_package(tmp_path / "raw_usr", '''
        import os
        from t2t_revival.data.problem import Problem
        from t2t_revival.registry import register_problem

        @register_problem
        class MyRawProblem(Problem):
            vocab_size = 300
            def generate_data(self, data_dir, tmp_dir):
                with open(os.path.join(data_dir, "made"), "w") as f:
                    f.write(str(self.num_workers))
    ''')
    data = tmp_path / "data"
    out = _cli("datagen", f"--t2t_usr_dir={usr_dir}", "--problem=my_raw_problem",
               f"--data_dir={data}", f"--tmp_dir={tmp_path}", "--num_workers=3")
    assert out.returncode == 0, out.stderr
    assert (data / "made").read_text() == "3"


def test_datagen_names_a_corpus_file_that_is_not_there(tmp_path):
    """A Text2TextProblem reading its files from --tmp_dir (docs/your-own-data.md's
    usr_dir example) with a wrong --tmp_dir: one line naming the file."""
    usr_dir = _usr_package(tmp_path / "files_usr", '''
        import os
        from t2t_revival.data.text2text_problem import Text2TextProblem
        from t2t_revival.data.text_pair_reader import TextPairReader
        from t2t_revival.registry import register_problem

        @register_problem
        class MyFilesProblem(Text2TextProblem):
            vocab_size = 300
            def readers(self, split, tmp_dir):
                return [TextPairReader(os.path.join(tmp_dir, f"{split}.en"),
                                       os.path.join(tmp_dir, f"{split}.de"))]
    ''')
    raw = tmp_path / "raw"
    raw.mkdir()
    out = _cli("datagen", f"--t2t_usr_dir={usr_dir}", "--problem=my_files_problem",
               f"--data_dir={tmp_path / 'data'}", f"--tmp_dir={raw}")
    one_line_error(out, "t2t-datagen", f"The corpus file {raw / 'train.en'} does not exist",
                   "check --tmp_dir")
    (raw / "train.en").mkdir()
    out = _cli("datagen", f"--t2t_usr_dir={usr_dir}", "--problem=my_files_problem",
               f"--data_dir={tmp_path / 'data'}", f"--tmp_dir={raw}")
    one_line_error(out, "t2t-datagen", f"The corpus file {raw / 'train.en'} is a directory")


def test_a_usr_dir_imported_twice_runs_its_modules_once(tmp_path, monkeypatch):
    """The decoder of a run imports the flag's usr_dir and run.json's, often
    the same folder: its modules run once (Python's module cache is the
    record), and the second call returns the same folder."""
    from t2t_revival.usr_dir import import_usr_dir

    monkeypatch.setattr(sys, "path", list(sys.path))
    usr_dir = tmp_path / "once_usr"
    usr_dir.mkdir()
    runs = tmp_path / "runs.txt"
    (usr_dir / "once_usr_mod.py").write_text(f"open({str(runs)!r}, 'a').write('ran\\n')\n")
    try:
        assert import_usr_dir(str(usr_dir)) == import_usr_dir(str(usr_dir) + "/") == str(usr_dir)
    finally:
        sys.modules.pop("once_usr_mod", None)
    assert runs.read_text() == "ran\n"
