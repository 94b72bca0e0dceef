"""The one parser of `k=v,...` setting strings, and the checks of typed settings.

`--hparams` (`HParams`) and `--decode_hparams` (`DecodeHParams`) are both a
comma-separated list of `name=value` pairs, each value converted to its
field's type:

    int    8                 float   0.1, 1e-9          str   cut, 'cut'
    bool   true/false, 1/0, yes/no, on/off              list  [8,16,32] (commas inside [])

A frozen settings dataclass calls `check_settings` in its `__post_init__`:
every field of its declared type and every numeric one in its range
(`setting_ranges.RANGES`). Only the command-line layer parses strings
(`parse_typed_pairs`); the library takes the typed objects.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Callable, Mapping

from t2t_revival.errors import UserError
from t2t_revival.registry import closest
from t2t_revival.settings.setting_ranges import RANGES, out_of_range

Alias = tuple[Any, Callable[[str, Any], tuple[str, Any]]]
"""Another name of a setting (`parse_typed_pairs`' aliases): the type its value
is written in, and the function (name, typed value) -> (our name, our value)."""

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_TUPLES = (tuple[int, ...], tuple[float, ...])


def type_name(tp: Any) -> str:
    """How a setting's type reads in a message: `int`, `bool (true/false)`, ..."""
    if tp == tuple[int, ...]:
        return "a list of int, e.g. [8,16,32]"
    if tp == tuple[float, ...]:
        return "a list of numbers, e.g. [3,1]"
    return {int: "int", float: "float", bool: "bool (true/false)", str: "str"}[tp]


def type_ok(value: Any, tp: Any) -> bool:
    """Whether `value` is of the setting type `tp` (a bool is no int, an int no float)."""
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, float)
    if tp is str:
        return isinstance(value, str)
    if tp == tuple[int, ...]:
        return isinstance(value, tuple) and all(type_ok(v, int) for v in value)
    if tp == tuple[float, ...]:
        return isinstance(value, tuple) and all(type_ok(v, float) for v in value)
    raise TypeError(f"unsupported setting type {tp}")


def from_json_value(value: Any, tp: Any) -> Any:
    """A JSON value as the setting type `tp`: a list as a tuple, an int as a float
    where `tp` wants floats; anything else as it is (then `check_settings` judges)."""
    if tp in _TUPLES and isinstance(value, list):
        return tuple(float(v) if tp == tuple[float, ...] and isinstance(v, int)
                     and not isinstance(v, bool) else v for v in value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def check_settings(settings: Any, what: str, error: type[UserError]) -> None:
    """Every field of the dataclass instance `settings` has its declared type, and
    every field named in `RANGES` is finite and in its range; else `error`
    ("<what> 'name' expects int, got str. Received: ...")."""
    hints = typing.get_type_hints(type(settings))
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if not type_ok(value, hints[field.name]):
            raise error(f"{what} '{field.name}' expects {type_name(hints[field.name])}, got "
                        f"{type(value).__name__}. Received: {field.name}={value!r}")
        if isinstance(value, float) and not math.isfinite(value) and field.name not in RANGES:
            raise error(f"{what} '{field.name}' must be a finite number, not NaN or infinity. "
                        f"Received: {field.name}={value!r}")
    for field in dataclasses.fields(settings):
        if field.name in RANGES:
            problem = out_of_range(field.name, getattr(settings, field.name))
            if problem:
                raise error(f"{what} {problem}")


def _split_top_level(text: str, flag: str, error: type[UserError]) -> list[str]:
    """Split on commas that are not inside [...]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise error(f"Unbalanced ']' in {flag}. Received: {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise error(f"Unbalanced '[' in {flag}. Received: {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _convert(key: str, raw: str, tp: Any, names, what: str, error: type[UserError]) -> Any:
    def bad() -> UserError:
        near = closest(key, names)
        return error(f"{what} '{key}' expects {type_name(tp)}, and '{raw}' is not one. "
                     f"Received: {key}={raw}"
                     + (f" (closest field: '{near}')" if near and near != key else ""))

    text = raw.strip()
    if tp is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise bad()
    if tp in (int, float):
        try:
            return tp(text)
        except ValueError:
            raise bad() from None
    if tp is str:
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        return text
    if tp in _TUPLES:
        if not (text.startswith("[") and text.endswith("]")):
            raise bad()
        inner = text[1:-1].strip()
        if not inner:
            return ()
        try:
            return tuple((int if tp == tuple[int, ...] else float)(v)
                         for v in inner.split(","))
        except ValueError:
            raise bad() from None
    raise TypeError(f"unsupported setting type {tp}")


def parse_typed_pairs(text: str, types: dict[str, Any], *, flag: str,
                      what: str, error: type[UserError],
                      unknown: Callable[[str, str], UserError],
                      aliases: Mapping[str, Alias] | None = None) -> dict[str, Any]:
    """Parse `"k=v,k2=[1,2,3],flag=false"` against `types` (name -> type).

    The one parser behind `--hparams` and `--decode_hparams`. `unknown(key,
    raw)` builds the error for a key not in `types` nor in `aliases`; other
    problems raise `error` naming `flag`. `aliases` gives other names of the
    settings (tensor2tensor's): {name: (the type its value is written in, a
    function (name, typed value) -> (our name, our value))}; each is resolved
    here, once, so the result holds our names only. Two names of one setting
    may both be given only with the same value. Types are converted, not
    range-checked: the settings object that takes the values checks them
    (`check_settings`).
    """
    result: dict[str, Any] = {}
    given: dict[str, str] = {}
    for pair in _split_top_level(text or "", flag, error):
        if "=" not in pair:
            raise error(f"{flag} entries are key=value pairs separated by commas; "
                        f"'{pair}' has no '='. Received: {text!r}")
        key, raw = (s.strip() for s in pair.split("=", 1))
        if key in types:
            name, value = key, _convert(key, raw, types[key], types, what, error)
        elif aliases and key in aliases:
            tp, to_ours = aliases[key]
            name, value = to_ours(key, _convert(key, raw, tp, types, what, error))
        else:
            raise unknown(key, raw)
        if name in result:
            # Only two other names of one setting may agree (T2T's pre- and postprocess).
            agreeing_aliases = (name not in (key, given[name]) and key != given[name]
                                and result[name] == value)
            if not agreeing_aliases:
                also = "" if given[name] == key else f" (as '{given[name]}' and '{key}')"
                raise error(f"{what} '{name}' is set twice in {flag}{also}. "
                            f"Received: {text!r}")
        result[name], given[name] = value, key
    return result
