"""`RunRecord`: what `run.json` says about the run that wrote a training directory."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from t2t_revival.files.json_record import JsonRecord
from t2t_revival.run_dir.file_names import VOCAB_FILE


_OPTIONAL = ("usr_dir", "warm_start_from", "imported_from", "imported_flags")
"""Keys written only when not empty."""


@dataclasses.dataclass(frozen=True)
class RunRecord(JsonRecord):
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
        imported_from: the tensor2tensor checkpoint prefixes a `t2t-import`ed
            run's weights come from, comma-separated ("" for a run of ours).
        imported_flags: that run's own `--problem`, `--model`, `--hparams_set`
            and `--hparams` (its flags.txt), which the decoder and exporter take
            as the run's (tensor2tensor's decode scripts pass them); {} for a
            run of ours.
    """

    REPAIR: ClassVar[str] = ("delete it and rerun t2t-trainer in that directory with the "
                             "run's flags, which writes it again")

    problem: str = ""
    model: str = "transformer"
    hparams_set: str = ""
    hparams: str = ""
    data_dir: str = ""
    vocab_file: str = VOCAB_FILE
    vocab_source: str = ""
    usr_dir: str = ""
    warm_start_from: str = ""
    imported_from: str = ""
    imported_flags: dict[str, str] = dataclasses.field(default_factory=dict, hash=False)

    def agrees(self, name: str, value: str) -> bool:
        """Whether `--name=value` is this run's: its own setting, or (an
        imported run) the tensor2tensor run's flag of that name."""
        return value == getattr(self, name) or value == self.imported_flags.get(name, None)

    def to_dict(self) -> dict[str, Any]:
        """The record's keys; the optional keys only when set, so a plain run's
        run.json reads as it always has."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v or k not in _OPTIONAL}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RunRecord":
        """A missing key takes its default; an unknown one is ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        flags = values.get("imported_flags", {})
        if not all(isinstance(values[k], str) for k in names & set(values) - {"imported_flags"}) \
                or not isinstance(flags, dict) or \
                not all(isinstance(v, str) for v in flags.values()):
            raise TypeError("not an object of strings")
        return cls(**{k: v for k, v in values.items() if k in names})
