"""tensor2tensor 1.15.7's own files, test-only: the reference for its hparam
sets, its hparam names, its BLEU, its SubwordTextEncoder and its Transformer.

The code comes from tensor2tensor's own wheel in the shared data
(`../shared/data/t2t_legacy/tensor2tensor-1.15.7-py2.py3-none-any.whl`, pure
Python), unpacked once into `build/tensor2tensor-1.15.7/` of the checkout
(`t2t_package`): no install step of its own, and its t2t-* scripts never
reach `.venv/bin`, where ours are. T2T_REFERENCE names another folder that
holds the `tensor2tensor` package. Its hparam sets are read from the source
of its `models/transformer.py` and `layers/common_hparams.py` with `ast`
(importing them needs TensorFlow 1 and a dozen stubbed packages); its
`utils/bleu_hook` is imported as it is (it needs only numpy, six and
TensorFlow).

This module imports no pytest at import time, so that `tests/t2t_oracle.py`
(a subprocess) reads the same package from the same owner.
"""

from __future__ import annotations

import ast
import functools
import os
import pathlib
import shutil
import sys
import tempfile
import zipfile
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
WHEEL_NAME = "tensor2tensor-1.15.7-py2.py3-none-any.whl"
# The shared folder beside the checkout (conftest.SHARED_DATA's rule, without
# importing conftest: the oracle subprocess reads this module too).
WHEEL = pathlib.Path(os.environ.get("T2T_SHARED") or ROOT.parent / "shared") / "data" / \
    "t2t_legacy" / WHEEL_NAME
UNPACKED = ROOT / "build" / "tensor2tensor-1.15.7"


class MissingReference(Exception):
    """tensor2tensor's wheel is not where the tests read it (one line, what to do)."""


def t2t_package() -> pathlib.Path:
    """The folder that holds tensor2tensor 1.15.7's `tensor2tensor` package:
    T2T_REFERENCE, else the shared wheel unpacked once into `UNPACKED`.

    The wheel is checked (every member's CRC) and unpacked into a temporary
    folder beside `UNPACKED`, then renamed into place, so a killed or
    concurrent unpack (two pytest-xdist workers) never leaves half a package
    there. Raises MissingReference when the wheel is missing or damaged."""
    if os.environ.get("T2T_REFERENCE"):
        return pathlib.Path(os.environ["T2T_REFERENCE"])
    if (UNPACKED / "tensor2tensor" / "__init__.py").is_file():
        return UNPACKED
    if not WHEEL.is_file():
        raise MissingReference(
            f"tensor2tensor's wheel, the tests' reference, is missing: {WHEEL}; it comes with "
            f"the shared data (../shared/data/t2t_legacy/, or T2T_SHARED naming the shared "
            f"folder), or download {WHEEL_NAME} from the package registry and put it there")
    UNPACKED.parent.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f".{UNPACKED.name}.", dir=UNPACKED.parent)
    try:
        with zipfile.ZipFile(WHEEL) as wheel:
            damaged = wheel.testzip()
            if damaged:
                raise MissingReference(f"tensor2tensor's wheel {WHEEL} is damaged (the CRC of "
                                       f"{damaged} fails); copy it again from the shared data")
            wheel.extractall(work)
        try:
            os.rename(work, UNPACKED)
        except OSError:   # another process unpacked it first
            if not (UNPACKED / "tensor2tensor" / "__init__.py").is_file():
                raise
    except zipfile.BadZipFile as e:
        raise MissingReference(f"tensor2tensor's wheel {WHEEL} is not a zip file ({e}); copy "
                               f"it again from the shared data") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return UNPACKED


def t2t_file(relative: str) -> pathlib.Path:
    """A file of the tensor2tensor package, e.g. "models/transformer.py"."""
    import pytest

    try:
        path = t2t_package() / "tensor2tensor" / relative
    except MissingReference as e:
        pytest.fail(str(e))
    if not path.is_file():
        pytest.fail(f"tensor2tensor 1.15.7 has no {relative} at {path} (T2T_REFERENCE "
                    f"names a folder without it?)")
    return path


def import_t2t(module: str):
    """`tensor2tensor.<module>`, imported from `t2t_package()` (its folder
    put on sys.path once)."""
    import importlib

    t2t_file(module.replace(".", "/") + ".py")
    folder = str(t2t_package())
    if folder not in sys.path:
        sys.path.append(folder)
    return importlib.import_module(f"tensor2tensor.{module}")


@functools.lru_cache(maxsize=None)
def _functions(relative: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(t2t_file(relative).read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def t2t_flag_names(relative: str) -> list[str]:
    """The flags a tensor2tensor file defines (`flags.DEFINE_x("name", ...)`,
    `tf.flags.DEFINE_x`), in order."""
    names = []
    for node in ast.walk(ast.parse(t2t_file(relative).read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr.startswith("DEFINE_") and node.args \
                and isinstance(node.args[0], ast.Constant):
            names.append((node.lineno, node.col_offset, node.args[0].value))
    return [name for *_, name in sorted(names)]


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)  # e.g. 2**15: kept as its text


def t2t_hparams(name: str) -> dict[str, Any]:
    """The values of tensor2tensor's hparam set `name`, by reading its function:
    `hparams = other_set()`, `hparams.x = literal`, `hparams.add_hparam("x",
    literal)`, `return hparams`; basic_params1 is its `HParams(...)` call."""
    if name == "basic_params1":
        body = _functions("layers/common_hparams.py")[name].body
        call = body[-1].value
        return {k.arg: _literal(k.value) for k in call.keywords}
    values: dict[str, Any] = {}
    for statement in _functions("models/transformer.py")[name].body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # the docstring
        if isinstance(statement, ast.Return):
            return values
        if isinstance(statement, ast.Assign):
            target = statement.targets[0]
            if isinstance(target, ast.Name) and isinstance(statement.value, ast.Call):
                called = statement.value.func
                values = t2t_hparams(called.attr if isinstance(called, ast.Attribute)
                                     else called.id)
                continue
            if isinstance(target, ast.Attribute):
                values[target.attr] = _literal(statement.value)
                continue
        if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                and getattr(statement.value.func, "attr", "") == "add_hparam"):
            key, value = statement.value.args
            values[key.value] = _literal(value)
            continue
        raise AssertionError(f"tensor2tensor's {name} has a statement this reader does "
                             f"not follow: {ast.unparse(statement)}")
    raise AssertionError(f"tensor2tensor's {name} returns nothing")


def t2t_hparam_names() -> set[str]:
    """Every hparam name of tensor2tensor's transformer_base (basic_params1 and
    transformer_base_v1's additions)."""
    return set(t2t_hparams("transformer_base"))


def bleu_hook():
    """tensor2tensor's own `utils/bleu_hook` module."""
    return import_t2t("utils.bleu_hook")
