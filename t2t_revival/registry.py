"""Strict registries for problems, models and hparam sets.

Usage, with or without an explicit name:

    @register_problem
    class TranslateEndeMulti30k(Problem): ...      # -> "translate_ende_multi30k"

    @register_hparams("transformer_base")
    def my_base() -> HParams: ...

A duplicate name is an error. An unknown name is an error that lists every
registered name and the closest match. Registration happens when `problems`
and `hparams` (and `t2t_revival.models`) are imported; an import error there
is loud, never swallowed.
"""

from __future__ import annotations

import difflib
import re
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
    """The first line of an object's docstring (its one-line description)."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else "(no description)"


class Registry:
    """A name -> object map that refuses duplicates and explains unknown names.

    Args:
        kind: what is registered, for messages ("problem", "model", ...).
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def register(self, obj_or_name: Any = None, *, name: str | None = None) -> Any:
        """Decorator: `@reg.register`, `@reg.register("name")` or `@reg.register(name=...)`."""
        if isinstance(obj_or_name, str):
            return lambda obj: self._add(obj, obj_or_name)
        if obj_or_name is None:
            return lambda obj: self._add(obj, name)
        return self._add(obj_or_name, name)

    def _add(self, obj: Any, name: str | None) -> Any:
        key = name or snake_case(obj.__name__)
        if key in self._entries:
            existing = self._entries[key]
            raise RegistryError(
                f"A {self.kind} named '{key}' is already registered "
                f"(by {existing.__module__}.{existing.__qualname__}); pick another "
                f"name. Received: {self.kind}={obj.__module__}.{obj.__qualname__}"
            )
        self._entries[key] = obj
        try:
            obj.registered_name = key
        except (AttributeError, TypeError):
            pass
        return obj

    def get(self, name: str) -> Any:
        """The object registered under `name`; an unknown name is a RegistryError."""
        if name in self._entries:
            return self._entries[name]
        known = ", ".join(sorted(self._entries)) or "(none)"
        near = closest(name, self._entries, cutoff=0.0)
        hint = f" Closest match: '{near}'." if near else ""
        raise RegistryError(
            f"Unknown {self.kind} '{name}'.{hint} Registered {self.kind}s: {known}. "
            f"Received: {self.kind}={name!r}"
        )

    def names(self) -> list[str]:
        return sorted(self._entries)

    def descriptions(self) -> list[tuple[str, str]]:
        """(name, one-line description) for every entry, sorted by name."""
        return [(n, one_line(self._entries[n])) for n in self.names()]

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


problems = Registry("problem")
models = Registry("model")
hparams_sets = Registry("hparam set")

register_problem: Callable = problems.register
register_model: Callable = models.register
register_hparams: Callable = hparams_sets.register


def load_all() -> None:
    """Import every module that registers something (loud on failure)."""
    import hparams  # noqa: F401  registers the hparam sets
    import problems  # noqa: F401  registers the problems
    import t2t_revival.models  # noqa: F401  registers the models


def help_text() -> str:
    """Every registered problem, model and hparam set with its description."""
    load_all()
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
