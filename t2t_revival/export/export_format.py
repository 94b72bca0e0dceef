"""`ExportFormat`: which export a format name runs, and what it is called.

`FORMATS` is the one owner of that dispatch: t2t-exporter's `--format` and
t2t-trainer's `--export_saved_model` / `--export_ctranslate2` run the same
export function through it, say the same words about it and find the same
default folder. Each names its function as "module:function", imported when
the export runs: the exports import TensorFlow (seconds), and the CLIs list
the formats in their flags' help long before.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from t2t_revival.errors import UserError
from t2t_revival.export.version_directory import remove_export_leftovers


@dataclasses.dataclass(frozen=True)
class ExportFormat:
    """One export format.

    Attributes:
        name: its name, `--format=<name>`.
        what: what it writes, in messages ("SavedModel": "Exported the SavedModel to ...").
        description: one line, for the flags' help.
        function: "module:function" of the export, called as
            `function(output_dir, checkpoint_path, decode_overrides, export_dir,
            version, **options)`; it returns the version directory.
        folder: the `TrainingDirectory` property of its default export folder.
        options: the keyword options the function takes beyond those.
        native_noise: whether the export writes known noise to the process's
            stderr from native code (tensorflow-text's SentencePiece INFO
            lines), which a CLI filters (`tensorflow_noise.quiet_native_stderr`).
    """

    name: str
    what: str
    description: str
    function: str
    folder: str
    options: tuple[str, ...] = ()
    native_noise: bool = False

    def export_dir(self, output_dir: str) -> str:
        """The folder of the training directory `output_dir` that its versions go under."""
        from t2t_revival.run_dir.training_directory import TrainingDirectory

        return getattr(TrainingDirectory(output_dir), self.folder)

    def export(self, output_dir: str, checkpoint_path: str | None = None,
               decode_overrides: Any = None, export_dir: str | None = None,
               version: int | None = None, log: Callable[[str], None] | None = None,
               **options: Any) -> str:
        """Run the export (`function`) into `export_dir` (default: `export_dir(output_dir)`);
        return the version directory written. What killed exports left there is
        cleared first, each removal said through `log` (when given)."""
        export_dir = export_dir or self.export_dir(output_dir)
        remove_export_leftovers(export_dir, log)
        module, _, attr = self.function.partition(":")
        run = getattr(importlib.import_module(module), attr)
        return run(output_dir, checkpoint_path, decode_overrides, export_dir, version, **options)


FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("saved_model", "SavedModel", "a TF Serving SavedModel",
                 "t2t_revival.export.saved_model_export:export_saved_model", "export_dir",
                 options=("xla",), native_noise=True),
    ExportFormat("ctranslate2", "CTranslate2 model",
                 "a CTranslate2 model directory (needs the ctranslate2 extra)",
                 "t2t_revival.export.ctranslate2_export:export_ctranslate2",
                 "ctranslate2_export_dir", options=("quantization",)),
    ExportFormat("litert", "LiteRT programs",
                 "LiteRT programs, the encoder and the decoder step (.tflite)",
                 "t2t_revival.export.litert_export:export_litert", "litert_export_dir"),
)}
"""Every export format by name, in the order the help lists them."""

DEFAULT_FORMAT = "saved_model"


def export_format(name: str) -> ExportFormat:
    """The format called `name`; an unknown name is a UserError listing them."""
    if name not in FORMATS:
        raise UserError(f"unknown export format; use one of {', '.join(FORMATS)}. "
                        f"Received: format={name!r}")
    return FORMATS[name]


def formats_help() -> str:
    """The formats for a flag's help: "saved_model: a TF Serving SavedModel; ..."."""
    return "; ".join(f"{f.name}: {f.description}" for f in FORMATS.values())
