"""An export's record of its decode settings (t2t_export.json), as the
engines that read an export find and check it: `CTranslate2Translator`,
`LiteRTTranslator`. The exporters write it (`EXPORT_CONFIG`). No TensorFlow."""

from __future__ import annotations

import os

from t2t_revival.errors import UserError
from t2t_revival.files.json_file import read_json

EXPORT_CONFIG = "t2t_export.json"
"""The export's decode settings, written by the exporters."""

# The decode settings each export fixes (t2t-exporter --decode_hparams).
SAVED_MODEL_FIXES = ("beam_size", "alpha", "length_penalty", "extra_length", "early_stop",
                     "alignments",
                     "alignment_layer", "alignment_heads", "max_constraint_tokens")
CTRANSLATE2_FIXES = ("beam_size", "alpha", "extra_length", "batch_size")
LITERT_FIXES = ("beam_size", "alpha", "length_penalty", "extra_length", "early_stop")


def read_export_settings(export_dir: str, export_format: str) -> dict:
    """The `EXPORT_CONFIG` of a version directory of `t2t-exporter
    --format=<export_format>`; a UserError when it is missing or corrupt.
    (An export without "format" in it is a CTranslate2 export.)"""
    config_file = os.path.join(export_dir, EXPORT_CONFIG)
    settings = read_json(
        config_file,
        missing=f"{config_file} is missing; pass a version directory written by "
                f"t2t-exporter --format={export_format}. Received: export_dir={export_dir!r}",
        corrupt=f"{config_file} is corrupt ({{why}}); export again. "
                f"Received: export_dir={export_dir!r}")
    found = settings.get("format", "ctranslate2") if isinstance(settings, dict) else None
    if found != export_format:
        raise UserError(f"{export_dir} is not a {export_format} export (its format is "
                        f"{found!r}); export with t2t-exporter --format={export_format}. "
                        f"Received: export_dir={export_dir!r}")
    return settings


def newest_version(export_dir: str) -> str:
    """`export_dir` itself when it holds an export, else its highest numbered version
    (as TF Serving picks from its model base path)."""
    if os.path.isfile(os.path.join(export_dir, EXPORT_CONFIG)) or not os.path.isdir(export_dir):
        return export_dir
    versions = [int(n) for n in os.listdir(export_dir)
                if n.isascii() and n.isdecimal()   # (str.isdigit takes "²", int refuses it)
                and os.path.isfile(os.path.join(export_dir, n, EXPORT_CONFIG))]
    return os.path.join(export_dir, str(max(versions))) if versions else export_dir
