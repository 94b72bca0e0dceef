"""`InsightsConfiguration`: which runs `t2t-insights-server` serves.

tensor2tensor's `--configuration=FILE` JSON (its InsightConfiguration):

    {"configuration": [{"source_language": "en", "target_language": "de",
                        "label": "transformers_wmt32k",
                        "transformer": {"model": "transformer",
                                        "model_dir": "/tmp/t2t/train",
                                        "data_dir": "/tmp/t2t/data",
                                        "hparams": "",
                                        "hparams_set": "transformer_base_single_gpu",
                                        "problem": "translate_ende_wmt32k"}}],
     "language": [{"code": "en", "name": "English"}, {"code": "de", "name": "German"}]}

`model_dir` is the training directory (ours keeps its hparams, problem and
vocabulary, so `data_dir` is not read); `model`, `hparams_set` and `problem`
(or tensor2tensor's `problems`), when given, must be the run's; `hparams`
must be empty (a trained model's hparams are fixed); `decode_hparams` (ours)
sets the run's decode settings and `checkpoint_path` (ours) its checkpoint
(a prefix, or a folder such as the run's `averaged/`), so that two
checkpoints of one run can be compared. The simple form is `--output_dir=RUN`,
repeated, each labelled by its `--label` (default: the folder's name).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from t2t_revival.errors import UserError
from t2t_revival.files.json_file import read_json
from t2t_revival.insights.served_run import ServedRun
from t2t_revival.run_dir.training_directory import TrainingDirectory

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish",
                  "it": "Italian", "cs": "Czech", "ru": "Russian", "zh": "Chinese",
                  "ja": "Japanese", "ro": "Romanian", "fi": "Finnish", "tr": "Turkish",
                  "et": "Estonian", "lv": "Latvian", "vi": "Vietnamese", "nl": "Dutch",
                  "pt": "Portuguese", "pl": "Polish", "ar": "Arabic", "he": "Hebrew"}


@dataclasses.dataclass(frozen=True)
class InsightsConfiguration:
    """The runs to serve and the names of their languages ({code: name})."""

    runs: tuple[ServedRun, ...]
    languages: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_output_dirs(cls, output_dirs: Sequence[str], labels: Sequence[str] = (),
                         decode_hparams: str = "") -> "InsightsConfiguration":
        """The simple form: each folder labelled by `labels` (in order) or its name."""
        if labels and len(labels) != len(output_dirs):
            raise UserError(f"give one --label for each --output_dir, or none. Received: "
                            f"{len(labels)} labels for {len(output_dirs)} runs")
        names = list(labels) or [os.path.basename(os.path.normpath(d)) or d
                                 for d in output_dirs]
        return cls(_unique(tuple(ServedRun(name, path, decode_hparams=decode_hparams)
                                 for name, path in zip(names, output_dirs))))

    @classmethod
    def from_file(cls, path: str, decode_hparams: str = "") -> "InsightsConfiguration":
        """tensor2tensor's configuration JSON (the module docstring)."""
        data = read_json(
            path, missing=f"--configuration: no file {path}; write the JSON of "
                          "docs/insights.md there, or serve runs with --output_dir",
            directory=f"--configuration: {path} is a folder; name the JSON file",
            corrupt=f"--configuration: {path} is not JSON in UTF-8 ({{why}})")
        entries = data.get("configuration") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries:
            raise UserError(f"--configuration: {path} has no \"configuration\" list of runs "
                            "(tensor2tensor's InsightConfiguration: see docs/insights.md)")
        runs = tuple(_entry(entry, i, decode_hparams) for i, entry in enumerate(entries))
        languages = {}
        for language in data.get("language", []) or []:
            if isinstance(language, dict) and isinstance(language.get("code"), str):
                languages[language["code"]] = str(language.get("name", language["code"]))
        return cls(_unique(runs), languages)

    def language_name(self, code: str) -> str:
        """The configured name of a language code, or the usual one."""
        return self.languages.get(code) or LANGUAGE_NAMES.get(code, code)


def _entry(entry, index: int, decode_hparams: str) -> ServedRun:
    """A configuration entry as a `ServedRun`; the fields checked against the run."""
    where = f"--configuration: entry {index}"
    if not isinstance(entry, dict) or not isinstance(entry.get("transformer"), dict):
        raise UserError(f"{where} has no \"transformer\" object with its model_dir")
    fields = entry["transformer"]
    model_dir = fields.get("model_dir")
    if not isinstance(model_dir, str) or not model_dir:
        raise UserError(f"{where}: \"transformer\" has no \"model_dir\" (the training directory)")
    model_dir = os.path.expanduser(model_dir)   # relative: to the working folder, as there
    if str(fields.get("hparams", "") or "").strip():
        raise UserError(f"{where}: a trained run's hparams are fixed (its hparams.json); "
                        "leave \"hparams\" empty and put decode settings in "
                        f"\"decode_hparams\". Received: hparams={fields['hparams']!r}")
    record = TrainingDirectory(model_dir).read_run_record()
    for name, ours in (("model", record.model), ("hparams_set", record.hparams_set),
                       ("problem", record.problem), ("problems", record.problem)):
        given = fields.get(name)
        if given and ours and given != ours:
            raise UserError(f"{where}: the run in {model_dir} was trained with {name} "
                            f"{ours!r}, not {given!r}; fix the configuration")
    label = entry.get("label") or os.path.basename(os.path.normpath(model_dir))
    settings = ",".join(t for t in (decode_hparams, str(fields.get("decode_hparams", "")))
                        if t.strip())
    checkpoint = os.path.expanduser(str(fields.get("checkpoint_path", "") or ""))
    return ServedRun(str(label), model_dir, str(entry.get("source_language", "") or ""),
                     str(entry.get("target_language", "") or ""), settings, checkpoint)


def _unique(runs: tuple[ServedRun, ...]) -> tuple[ServedRun, ...]:
    """`runs`, a UserError when two share a label."""
    seen: set[str] = set()
    for run in runs:
        if run.label in seen:
            raise UserError(f"two runs are labelled {run.label!r}; give each its own label "
                            "(--label, or \"label\" in the configuration)")
        seen.add(run.label)
    return runs
