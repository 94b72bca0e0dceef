"""`JsonRecord`: a frozen dataclass kept as one small JSON file.

hparams.json (`HParams`), run.json (`RunRecord`) and best.json
(`BestRecord`) are each one JSON object, written atomically (a temporary
name, then a rename; mode 0644) and read back with one clear line when the
file is damaged. This base owns that: `save`, `load`, `to_json`,
`from_json`; a record says only what its values are (`from_dict`) and how
to repair a damaged file (`REPAIR`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar, TypeVar

from t2t_revival.files.atomic_file import write_atomically
from t2t_revival.errors import UserError
from t2t_revival.files.text_lines import read_record_text

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """Mixin for a frozen dataclass stored as a JSON object.

    Subclasses set:
        REPAIR: how to repair a damaged file, the end of the one-line error
            (`"delete it and rerun t2t-trainer ..."`).
        ERROR: the UserError subclass raised for a damaged file.
    and may override `from_dict` (the values of a parsed object; a TypeError
    or ValueError there means a damaged file) and `to_dict`.
    """

    REPAIR: ClassVar[str] = ""
    ERROR: ClassVar[type[UserError]] = UserError

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save(self, path: str) -> None:
        """Write the record to `path` atomically (temp file, then rename), mode 0644."""
        write_atomically(path, self.to_json())

    @classmethod
    def from_dict(cls: type[R], values: dict[str, Any]) -> R:
        return cls(**values)

    @classmethod
    def corrupt(cls, path: str, why: str) -> UserError:
        """The one-line error for a damaged record file at `path`."""
        return cls.ERROR(f"{path} is corrupt ({why}); {cls.REPAIR}. Received: path={path!r}")

    @classmethod
    def from_json(cls: type[R], text: str, path: str) -> R:
        """Parse the record's JSON `text`; `corrupt(path, ...)` when it is not one."""
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise cls.corrupt(path, f"malformed JSON: {e}") from None
        if not isinstance(values, dict):
            raise cls.corrupt(path, "not a JSON object")
        try:
            return cls.from_dict(values)
        except (TypeError, ValueError) as e:
            raise cls.corrupt(path, str(e)) from None
        except UserError as e:   # a value the record itself refuses (HParamsError)
            raise cls.corrupt(path, str(e).split(". Received: ")[0]) from None

    @classmethod
    def load(cls: type[R], path: str) -> R:
        """The record saved at `path`: `corrupt` when it is not UTF-8 JSON of the
        record, or a folder; FileNotFoundError and other OS errors are the caller's."""
        try:
            text = read_record_text(path, lambda why: cls.corrupt(path, why))
        except IsADirectoryError as e:
            raise cls.corrupt(path, e.strerror) from None
        return cls.from_json(text, path)
