"""The house's rules that code review alone lets slip (issue 55): no class in the
library over 300 lines (350 before issue 72); tests and benchmarks use public seams only (no name
starting with `_` of another module); nothing under decode/, export/ and
train/ parses a flag string; benchmarks edit no `sys.path`; no library module
changes its own state at run time (issue 72)."""

import ast
import pathlib

import pytest

from conftest import ROOT

LIBRARY = [ROOT / "t2t_revival", ROOT / "problems", ROOT / "hparams"]
CLASS_LINES = 300


def _python_files(*folders):
    return sorted(p for folder in folders for p in pathlib.Path(folder).rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class _PrivateUses(ast.NodeVisitor):
    """`x._name` where x is not `self`/`cls`/`super()`, `from m import _name`, and
    `monkeypatch.setattr(obj, "_name", ...)` / `setitem(obj._entries, ...)`."""

    def __init__(self):
        self.found: list[tuple[int, str]] = []

    def visit_Attribute(self, node: ast.Attribute):
        owner = node.value
        own = (isinstance(owner, ast.Name) and owner.id in ("self", "cls")) or (
            isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
            and owner.func.id == "super")
        if _private(node.attr) and not own:
            self.found.append((node.lineno, f".{node.attr}"))
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom):
        for alias in node.names:
            if _private(alias.name):
                self.found.append((node.lineno, f"import {alias.name}"))

    def visit_Call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("setattr", "delattr", "getattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and _private(node.args[1].value):
            self.found.append((node.lineno, f"{func.attr} {node.args[1].value}"))
        if isinstance(func, ast.Name) and func.id in ("setattr", "getattr", "delattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and _private(node.args[1].value):
            self.found.append((node.lineno, f"{func.id} {node.args[1].value}"))
        self.generic_visit(node)


def private_uses(path: pathlib.Path) -> list[str]:
    """Where `path` touches a private name of another module, as `file:line what`."""
    visitor = _PrivateUses()
    visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
    return [f"{path.relative_to(ROOT)}:{line} {what}" for line, what in visitor.found]


def test_tests_and_benchmarks_use_public_seams_only():
    found = [use for path in _python_files(ROOT / "tests", ROOT / "benchmarks")
             if path.name != "test_house_rules.py" for use in private_uses(path)]
    assert not found, "\n".join(found)


def test_the_checker_finds_each_kind_of_private_use(tmp_path):
    """The rule above would pass on an empty list: it must see every kind."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from m import _helper, public\n"
        "x = trainer._reduce(1)\n"
        "monkeypatch.setattr(decoder, '_search', None)\n"
        "getattr(obj, '_hidden')\n"
        "self._mine = super()._theirs = cls._ours = 1\n"
        "y = obj.__class__\n")
    sample = sample.relative_to(tmp_path)
    visitor = _PrivateUses()
    visitor.visit(ast.parse((tmp_path / sample).read_text()))
    assert [what for _, what in visitor.found] == [
        "import _helper", "._reduce", "setattr _search", "getattr _hidden"]


def test_no_library_class_is_longer_than_300_lines():
    long = []
    for path in _python_files(*LIBRARY):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > CLASS_LINES:
                    long.append(f"{path.relative_to(ROOT)}: {node.name} {lines} lines")
    assert not long, "\n".join(long)


_PARSERS = {"parse_decode_hparams", "parse_overrides", "override_from_string",
            "parse_typed_pairs", "resolve", "resolve_train_config"}


@pytest.mark.parametrize("room", ["decode", "export", "train"])
def test_decode_export_and_train_parse_no_flag_string(room):
    """The command line parses --hparams and --decode_hparams once; these rooms
    take typed objects (HParams, DecodeHParams, TrainConfig)."""
    calls = []
    for path in _python_files(ROOT / "t2t_revival" / room):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                    getattr(node.func, "id", "")
                if name in _PARSERS:
                    calls.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not calls, "\n".join(calls)


def test_benchmarks_edit_no_sys_path():
    edits = [f"{path.relative_to(ROOT)}:{node.lineno}"
             for path in _python_files(ROOT / "benchmarks")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Attribute) and node.attr == "path"
             and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert not edits, "\n".join(edits)


_MUTATORS = {"append", "add", "update", "setdefault", "pop", "popitem", "clear", "extend",
             "insert", "remove", "discard"}
_CONTAINER_CALLS = {"dict", "list", "set"}


def _module_containers(tree: ast.Module) -> set[str]:
    """Module-level names bound to a dict/list/set: a literal, a comprehension
    or a dict()/list()/set() call."""
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        value = getattr(node, "value", None)
        container = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                                       ast.SetComp)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in _CONTAINER_CALLS)
        if container:
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _bound_in(function) -> set[str]:
    """The names a function binds itself (its arguments, its assignments)."""
    args = function.args
    bound = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                             *filter(None, (args.vararg, args.kwarg)))}
    bound.update(n.id for n in ast.walk(function)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return bound


def hidden_state(source: str) -> list[tuple[int, str]]:
    """Module state changed at run time: every `global` statement, a
    module-level container (`_module_containers`) that a function mutates
    through its bare name (`NAME.append(...)`, `.add`, `.update`, ...,
    `NAME[key] = ...`, `del NAME[key]`), and class state a method sets
    (`cls.NAME = ...`)."""
    tree = ast.parse(source)
    found = {(n.lineno, f"global {', '.join(n.names)}") for n in ast.walk(tree)
             if isinstance(n, ast.Global)}
    containers = _module_containers(tree)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                             ast.Lambda))]
    for function in functions:
        module_names = containers - _bound_in(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _MUTATORS and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in module_names:
                found.add((node.lineno, f"{node.func.value.id}.{node.func.attr}"))
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and target.value.id in module_names:
                    found.add((node.lineno, f"{target.value.id}[...]"))
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "cls":
                    found.add((node.lineno, f"cls.{target.attr}"))
    return sorted(found)


def test_no_library_module_changes_its_own_state_at_run_time():
    """State lives in objects their owners create and pass, not in a module
    (issue 72): no `global`, no module-level dict/list/set filled in a function."""
    found = [f"{path.relative_to(ROOT)}:{line} {what}" for path in _python_files(*LIBRARY)
             for line, what in hidden_state(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_the_state_checker_finds_each_kind_of_change():
    """The rule above would pass on an empty list: it must see every kind,
    and leave alone a function's own names and a container never changed."""
    sample = (
        "SEEN = set()\n"
        "CACHE: dict = {}\n"
        "NAMES = list()\n"
        "TABLE = {k: 1 for k in 'ab'}\n"
        "FIXED = [1, 2]\n"
        "count = 0\n"
        "def f(key, NAMES=None):\n"
        "    global count\n"
        "    SEEN.add(key)\n"
        "    CACHE[key] = 1\n"
        "    del TABLE[key]\n"
        "    NAMES.append(key)\n"
        "    return FIXED[0]\n"
        "def g():\n"
        "    SEEN = set()\n"
        "    SEEN.add(1)\n"
        "    CACHE.setdefault(1, 2)\n"
        "    h = lambda: TABLE.clear()\n"
        "class One:\n"
        "    made = None\n"
        "    @classmethod\n"
        "    def get(cls):\n"
        "        cls.made = cls.made or cls()\n")
    assert hidden_state(sample) == [(8, "global count"), (9, "SEEN.add"), (10, "CACHE[...]"),
                                    (11, "TABLE[...]"), (17, "CACHE.setdefault"),
                                    (18, "TABLE.clear"), (23, "cls.made")]
