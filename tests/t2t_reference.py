"""tensor2tensor 1.15.7's own files, test-only: the reference for its hparam
sets, its hparam names and its BLEU.

.ci/run installs the package without its dependencies into
`.venv/tensor2tensor-1.15.7` (`pip install --no-deps --target`, so that its
own t2t-* scripts stay out of `.venv/bin`, where ours are); T2T_REFERENCE
names another folder. Its hparam sets are read from the source of its
`models/transformer.py` and `layers/common_hparams.py` with `ast` (importing
them needs TensorFlow 1 and a dozen stubbed packages); its `utils/bleu_hook`
is imported as it is (it needs only numpy, six and TensorFlow).
"""

from __future__ import annotations

import ast
import functools
import os
import pathlib
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
T2T_PACKAGE = pathlib.Path(os.environ.get("T2T_REFERENCE")
                           or ROOT / ".venv" / "tensor2tensor-1.15.7")
INSTALL = ("python -m pip install --no-deps --target .venv/tensor2tensor-1.15.7 "
           "tensor2tensor==1.15.7")


def t2t_file(relative: str) -> pathlib.Path:
    """A file of the tensor2tensor package, e.g. "models/transformer.py"."""
    path = T2T_PACKAGE / "tensor2tensor" / relative
    if not path.is_file():
        pytest.fail(f"tensor2tensor 1.15.7 is missing ({path}); install it as .ci/run "
                    f"does: {INSTALL}")
    return path


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
    t2t_file("utils/bleu_hook.py")
    if str(T2T_PACKAGE) not in sys.path:
        sys.path.append(str(T2T_PACKAGE))
    from tensor2tensor.utils import bleu_hook as module

    return module
