"""Export a training directory as a TF Serving SavedModel.

    export_saved_model("t2t_train/tiny")  ->  "t2t_train/tiny/export/<version>"

The layout is TF Serving's `--model_base_path`: `export/` holds one folder per
version (an integer: the checkpoint's step, or the Unix time when the
checkpoint name has no step), each a complete SavedModel with
`assets.extra/tf_serving_warmup_requests`. A version is written under a
temporary name and renamed when complete, so a server polling `export/` never
loads half a model.
"""

from __future__ import annotations

import os

from t2t_revival.settings.decode_hparams import DecodeOverrides
from t2t_revival.export.version_directory import checkpoint_version, write_version_directory


def export_saved_model(output_dir: str, checkpoint_path: str | None = None,
                       decode_overrides: DecodeOverrides | None = None,
                       export_dir: str | None = None,
                       version: int | None = None, xla: bool = False) -> str:
    """Write a SavedModel for TF Serving; return the version directory.

    Args:
        output_dir: the training directory (hparams.json, run.json, vocab.model
            or vocab.subwords, checkpoints).
        checkpoint_path: a checkpoint prefix; default the latest in output_dir.
        decode_overrides: the parsed --decode_hparams, over the beam settings
            of hparams.json (beam_size, alpha, extra_length, early_stop;
            alignments, alignment_layer, alignment_heads add the
            translate_with_alignments signature; no
            other), fixed in the export.
        export_dir: the model base path; default `output_dir/export`.
        version: the version number; default the checkpoint's step.
        xla: compile the encoder and beam search with XLA (`jit_compile`):
            several times faster per batch on CPU, but TF Serving then needs
            `--xla_cpu_compilation_enabled=true` (see `TranslationModule`).
    """
    import tensorflow as tf

    from t2t_revival.export.export_source import SAVED_MODEL_FIXES, load_export_source
    from t2t_revival.export.translation_module import TranslationModule
    from t2t_revival.data.language_tokens import tokens_of
    from t2t_revival.export.warmup_requests import (DEFAULT_WARMUP_SENTENCES, WARMUP_FILE,
                                                    write_warmup_requests)

    from t2t_revival.errors import UserError

    if "xla" in (decode_overrides or {}):
        raise UserError("the export's XLA is chosen with t2t-exporter --xla (or "
                        "export_saved_model(xla=True)), not --decode_hparams. "
                        f"Received: xla={decode_overrides['xla']!r}")
    directory, trained, settings = load_export_source(output_dir, checkpoint_path,
                                                      decode_overrides, SAVED_MODEL_FIXES,
                                                      "SavedModel")
    module = TranslationModule(trained.model, trained.hparams, settings, trained.vocab, xla=xla)
    export_dir = export_dir or directory.export_dir
    version = checkpoint_version(trained.checkpoint_path) if version is None else int(version)

    def write(tmp: str) -> None:
        signatures = {
            "serving_default": module.serve.get_concrete_function(),
            "translate_ids": module.translate_ids.get_concrete_function(),
            "translate_constrained": module.translate_constrained.get_concrete_function(),
            "translate_nbest": module.translate_nbest.get_concrete_function(),
        }
        if settings.alignments:   # --decode_hparams alignments=true
            signatures["translate_with_alignments"] = \
                module.translate_with_alignments.get_concrete_function()
        tf.saved_model.save(module, tmp, signatures=signatures)
        extra = os.path.join(tmp, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        # A multilingual model's requests start with a language token (the
        # first), as every request to it must (TF Serving fails a model
        # whose warm-up fails).
        tokens = tokens_of(trained.vocab)
        write_warmup_requests(os.path.join(extra, WARMUP_FILE), [
            f"{tokens[0]} {s}" if tokens and s else s for s in DEFAULT_WARMUP_SENTENCES])

    return write_version_directory(export_dir, version, write)
