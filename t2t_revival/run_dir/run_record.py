"""`RunRecord`: what `run.json` says about the run that wrote a training directory."""

from __future__ import annotations

import dataclasses
import json

from t2t_revival.errors import UserError
from t2t_revival.text_lines import read_record_text
from t2t_revival.run_dir.file_names import VOCAB_FILE


_OPTIONAL = ("usr_dir", "warm_start_from")
"""Keys written only when not empty."""


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The run's names and flags, written by the trainer, read by every other tool.

    `run.json` is this record as a JSON object with these keys. A key missing
    from the file (a directory written by hand, or by an older version) takes
    the default below; a key this version does not know is ignored.

    Attributes:
        problem: the registered problem name ("" when unknown: scored with BLEU).
        model: the registered model name.
        hparams_set: the registered hparam set name.
        hparams: the `--hparams` overrides of that set.
        data_dir: the absolute data directory the run trained on.
        vocab_file: the vocabulary's file name inside the training directory.
        vocab_source: the absolute path the vocabulary was copied from.
        usr_dir: the absolute `--t2t_usr_dir` the run imported ("" for none);
            the decoder, exporter and averager of the directory import it too.
        warm_start_from: the checkpoint the run's weights started from
            (`--warm_start_from`, resolved to a checkpoint prefix; "" for none).
    """

    problem: str = ""
    model: str = "transformer"
    hparams_set: str = ""
    hparams: str = ""
    data_dir: str = ""
    vocab_file: str = VOCAB_FILE
    vocab_source: str = ""
    usr_dir: str = ""
    warm_start_from: str = ""

    def to_json(self) -> str:
        """The record as JSON; the optional keys only when set, so a plain run's
        run.json reads as it always has."""
        values = {k: v for k, v in dataclasses.asdict(self).items()
                  if v or k not in _OPTIONAL}
        return json.dumps(values, indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, path: str) -> "RunRecord":
        """Read and parse the run.json at `path`; a UserError naming it when it
        is damaged (FileNotFoundError and other OS errors are the caller's)."""
        return cls.from_json(read_record_text(path, lambda why: cls._corrupt(path, why)), path)

    @staticmethod
    def _corrupt(path: str, why: str) -> UserError:
        return UserError(f"{path} is corrupt ({why}); delete it and rerun t2t-trainer in "
                         f"that directory with the run's flags, which writes it again. "
                         f"Received: path={path!r}")

    @classmethod
    def from_json(cls, text: str, path: str) -> "RunRecord":
        """Parse `run.json` text; a UserError naming `path` when it is not a record."""
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise cls._corrupt(path, str(e)) from None
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(values, dict) or not all(
                isinstance(values[k], str) for k in names & set(values)):
            raise cls._corrupt(path, "not an object of strings")
        return cls(**{k: v for k, v in values.items() if k in names})
