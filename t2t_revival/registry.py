"""Strict registries for problems, models and hparam sets.

Usage, with or without an explicit name:

    @register_problem
    class TranslateEndeMulti30k(Problem): ...      # -> "translate_ende_multi30k"

    @register_hparams("transformer_base")
    def my_base() -> HParams: ...

A duplicate name is an error. An unknown name is an error that lists every
registered name and the closest match.

Each registry loads its built-in names itself, on first use (a lookup, a
listing, or a registration of the user's): it imports its package once,
`t2t_revival.problems` and `t2t_revival.hparams_sets` (the repository's
`problems/` and `hparams/` folders, installed under the project's name) and
`t2t_revival.models`. No caller imports them first; an import error there is
loud, never swallowed. The built-in names come before a usr_dir's, so a
clash names the user's file.

A model is a Keras class, and importing Keras imports TensorFlow (seconds).
So a model is registered *lazily*: `t2t_revival.models` names each built-in
model's "module:Class" (`BUILT_IN`, read here, so that package does not
import this one), the name is known at once, its description is read from
the source, and the module is imported on the first `get`, where its
`@register_model` decorator takes the place of the lazy entry. Listing names
(`t2t-trainer --registry_help`) therefore never imports TensorFlow.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import importlib
import importlib.util
import re
import threading
from typing import Any, Callable, Iterator

from t2t_revival.errors import UserError


class RegistryError(UserError):
    """An unknown or duplicate registered name."""


def snake_case(name: str) -> str:
    """`TranslateEndeWmt32k` -> `translate_ende_wmt32k`; `transformer_base` unchanged."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def closest(name: str, candidates, cutoff: float = 0.5) -> str | None:
    """The closest candidate to `name` by difflib ratio, or None below `cutoff`."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=cutoff)
    return matches[0] if matches else None


def one_line(obj: Any) -> str:
    """The first paragraph of an object's docstring, as one line (its description)."""
    doc = obj.doc if isinstance(obj, LazyEntry) else getattr(obj, "__doc__", None)
    summary = (doc or "").strip().split("\n\n")[0]
    return " ".join(summary.split()) or "(no description)"


class LazyEntry:
    """A registered name whose object is `module:attr`, imported on first use.

    Args:
        target: "package.module:Attribute"; the module registers the real
            object under the same name when imported.
    """

    def __init__(self, target: str):
        self.target = target
        self.module, _, self.attr = target.partition(":")

    @property
    def doc(self) -> str | None:
        """The attribute's docstring, read from the module's source (no import)."""
        spec = importlib.util.find_spec(self.module)
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == self.attr:
                return ast.get_docstring(node)
        return None

    def matches(self, obj: Any) -> bool:
        return (obj.__module__, obj.__qualname__) == (self.module, self.attr)


class Registry:
    """A name -> object map that refuses duplicates and explains unknown names.

    Args:
        kind: what is registered, for messages ("problem", "model", ...).
        load: registers the built-in entries; called once, on the registry's
            first use (`load_built_ins`). None: nothing is built in.
    """

    def __init__(self, kind: str, load: Callable[[], None] | None = None):
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._load = load
        self._loaded = load is None
        self._loading = False   # the loader runs (its own registrations come back here)
        self._lock = threading.RLock()   # another thread's first use waits for the load

    def load_built_ins(self) -> None:
        """Register the built-in entries now, once (every lookup, listing and
        registration does it first: the built-in names come before a user's,
        so a clash names the user's object). A load that fails is loud again
        at the next use."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                self._load()
                self._loaded = True
            finally:
                self._loading = False

    def register(self, obj_or_name: Any = None, *, name: str | None = None) -> Any:
        """Decorator: `@reg.register`, `@reg.register("name")` or `@reg.register(name=...)`."""
        if isinstance(obj_or_name, str):
            return lambda obj: self._add(obj, obj_or_name)
        if obj_or_name is None:
            return lambda obj: self._add(obj, name)
        return self._add(obj_or_name, name)

    def register_lazy(self, name: str, target: str) -> None:
        """Register `name` as "module:Attr", imported on the first `get(name)`."""
        self.load_built_ins()
        if name in self._entries:
            raise RegistryError(f"A {self.kind} named '{name}' is already registered; "
                                f"pick another name. Received: {self.kind}={target}")
        self._entries[name] = LazyEntry(target)

    @contextlib.contextmanager
    def registered(self, obj: Any, name: str | None = None) -> Iterator[Any]:
        """Register `obj` (as `register` does) for a `with` block only; its name
        is free again after the block. For an object of a test or a session
        that must not stay registered in the process."""
        key = self._key(obj, name)
        self._add(obj, name)
        try:
            yield obj
        finally:
            del self._entries[key]

    @staticmethod
    def _key(obj: Any, name: str | None) -> str:
        """The name an object is registered under: `name`, else its snake_case class name."""
        return name or snake_case(obj.__name__)

    def _add(self, obj: Any, name: str | None) -> Any:
        self.load_built_ins()
        key = self._key(obj, name)
        existing = self._entries.get(key)
        if isinstance(existing, LazyEntry) and existing.matches(obj):
            existing = None                    # the lazy entry's own module, now imported
        if existing is not None:
            owner = (existing.target if isinstance(existing, LazyEntry)
                     else f"{existing.__module__}.{existing.__qualname__}")
            raise RegistryError(
                f"A {self.kind} named '{key}' is already registered "
                f"(by {owner}); pick another "
                f"name. Received: {self.kind}={obj.__module__}.{obj.__qualname__}"
            )
        self._entries[key] = obj
        try:
            obj.registered_name = key
        except (AttributeError, TypeError):
            pass
        return obj

    def check(self, name: str) -> None:
        """Raise the RegistryError of `get` for an unknown `name`, importing
        nothing: a lazy entry's module (a model's Keras, seconds) is left for
        `get`, so a mistyped name is reported before the wait."""
        self.load_built_ins()
        if name in self._entries:
            return
        known = ", ".join(sorted(self._entries)) or "(none)"
        near = closest(name, self._entries, cutoff=0.0)
        hint = f" Closest match: '{near}'." if near else ""
        raise RegistryError(
            f"Unknown {self.kind} '{name}'.{hint} Registered {self.kind}s: {known}. "
            f"Received: {self.kind}={name!r}"
        )

    def get(self, name: str) -> Any:
        """The object registered under `name`; an unknown name is a RegistryError."""
        self.check(name)
        entry = self._entries[name]
        if isinstance(entry, LazyEntry):
            importlib.import_module(entry.module)   # its decorator replaces the entry
            entry = self._entries[name]
            if isinstance(entry, LazyEntry):
                raise RuntimeError(f"importing {entry.module} did not register "
                                   f"{self.kind} '{name}' (expected {entry.target})")
        return entry

    def names(self) -> list[str]:
        self.load_built_ins()
        return sorted(self._entries)

    def descriptions(self) -> list[tuple[str, str]]:
        """(name, one-line description) for every entry, sorted by name."""
        return [(n, one_line(self._entries[n])) for n in self.names()]

    def __contains__(self, name: str) -> bool:
        self.load_built_ins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load_built_ins()
        return len(self._entries)


def _register_built_in_models() -> None:
    """`t2t_revival.models.BUILT_IN`'s models, lazily (their modules import Keras)."""
    for name, target in importlib.import_module("t2t_revival.models").BUILT_IN.items():
        models.register_lazy(name, target)


problems = Registry("problem", load=lambda: importlib.import_module("t2t_revival.problems"))
models = Registry("model", load=_register_built_in_models)
hparams_sets = Registry("hparam set",
                        load=lambda: importlib.import_module("t2t_revival.hparams_sets"))

register_problem: Callable = problems.register
register_model: Callable = models.register
register_hparams: Callable = hparams_sets.register


def load_all() -> None:
    """Register every built-in problem, hparam set and model now (loud on
    failure). No caller needs it: each registry loads its own on first use."""
    for reg in (hparams_sets, problems, models):
        reg.load_built_ins()


def help_text() -> str:
    """Every registered problem, model and hparam set with its description."""
    lines = []
    for title, reg in (("Problems", problems), ("Models", models),
                       ("Hparam sets", hparams_sets)):
        lines.append(f"{title}:")
        rows = reg.descriptions()
        width = max((len(n) for n, _ in rows), default=0)
        lines.extend(f"  {n.ljust(width)}  {d}" for n, d in rows)
        if not rows:
            lines.append("  (none registered)")
    return "\n".join(lines)
