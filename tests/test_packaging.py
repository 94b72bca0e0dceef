"""The installed package names.

`problems/` and `hparams/` stay at the top of the repository but install under
the project's namespace, as `t2t_revival.problems` and
`t2t_revival.hparams_sets` (pyproject.toml's package-dir mapping): another
distribution's top-level `problems` or `hparams` (both names exist on the
registry) neither overwrites nor shadows them.
"""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ENV, ROOT

# Names from each registering package: problems, hparam sets and the model.
BUILT_IN = {"translate_ende_multi30k", "translate_ende_wmt32k", "parsing_english_ptb_sample",
            "transformer_base", "transformer_parsing_base", "transformer"}
# What the wheel is built from (pyproject.toml names the rest).
SOURCES = ["pyproject.toml", "README.md", "t2t_trainer.py", "t2t_revival", "problems", "hparams"]
# The repository's folders and where their modules install.
INSTALLED_AS = {"t2t_revival": "t2t_revival", "problems": "t2t_revival/problems",
                "hparams": "t2t_revival/hparams_sets"}


@pytest.mark.parametrize("name", ["problems", "hparams"])
def test_a_foreign_package_of_the_same_name_does_not_shadow_ours(tmp_path, name):
    """Another distribution's `problems` (or `hparams`) first on the path: the
    registry still lists every built-in name."""
    foreign = tmp_path / "site-packages"
    (foreign / name).mkdir(parents=True)
    (foreign / name / "__init__.py").write_text(f'"""Another distribution\'s {name}."""\n')
    env = dict(ENV, PYTHONPATH=os.pathsep.join([str(foreign), str(ROOT)]))
    # Not from ROOT: `-m` puts the current folder first on the path, ahead of
    # the foreign package, and ROOT holds the folders problems/ and hparams/.
    out = subprocess.run([sys.executable, "-m", "t2t_revival.cli.trainer", "--registry_help"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    listed = {line.split()[0] for line in out.stdout.splitlines() if line.startswith("  ")}
    assert BUILT_IN <= listed, (BUILT_IN - listed, out.stdout)


def test_the_wheel_installs_every_module_under_t2t_revival(tmp_path):
    """The wheel holds each module of t2t_revival/, problems/ and hparams/
    under t2t_revival/ (so the explicit package list misses none), and no
    top-level problems/ or hparams/."""
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, source / name)
    # With build isolation: the build needs setuptools>=77 (pyproject.toml),
    # which the test environment need not have.
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                          "-w", str(tmp_path / "dist"), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("t2t_revival-*.whl")
    names = zipfile.ZipFile(wheel).namelist()

    assert not [n for n in names if n.startswith(("problems/", "hparams/"))], names
    modules = {n for n in names if not n.split("/")[0].endswith(".dist-info")}
    expected = {"t2t_trainer.py"} | {
        f"{INSTALLED_AS[folder]}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder in INSTALLED_AS for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts}
    # The package's data: T2T Insights' page.
    expected |= {f"t2t_revival/{path.relative_to(ROOT / 't2t_revival').as_posix()}"
                 for path in (ROOT / "t2t_revival" / "insights" / "static").iterdir()}
    assert modules == expected, (sorted(modules - expected), sorted(expected - modules))
