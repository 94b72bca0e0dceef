"""Export a training directory as LiteRT (TensorFlow Lite) programs.

    export_litert("t2t_train/tiny")  ->  "t2t_train/tiny/export/litert/<step>"

For devices and runtimes without TensorFlow: the LiteRT interpreter
(`ai_edge_litert`, or TensorFlow's `tf.lite`) runs the programs through
XNNPACK's CPU kernels. The version directory holds:

    encoder.tflite      inputs int32 [1, max_input_length] (ids + EOS, PAD-padded)
                        -> the decoding cache's per-sentence part
    step.tflite         the decoder's cached step over beam_size rows:
                        ids [beam], index [], the cache -> logits [beam, vocab],
                        the new self-attention cache (cache_length positions)
    vocab.model or vocab.subwords   the vocabulary
    t2t_export.json     decode settings, the fixed lengths, the programs'
                        input and output names and the cache's shapes
    README.md           how to use it

Shapes are fixed (`litert_conversion`): one sentence at a time, sources of
up to max_input_length (the model's max_length) tokens, EOS included, and
outputs of up to cache_length positions: t2t-decoder's limit for the longest
source (max_length + extra_length, or max_length with learned positions).
`LiteRTTranslator` is the Python loop that translates with them.
"""

from __future__ import annotations

import json
import os
import shutil

from t2t_revival.settings.decode_hparams import DecodeOverrides
from t2t_revival.decode.decode_length import longest_decode_length
from t2t_revival.decode.export_settings import EXPORT_CONFIG
from t2t_revival.decode.litert_translator import ENCODER_FILE, STEP_FILE
from t2t_revival.export.version_directory import checkpoint_version, write_version_directory


def _readme(final: str, settings: dict) -> str:
    return f"""# LiteRT export of a t2t-revival model

Checkpoint: `{settings['checkpoint']}` (step {settings['step']}), float32.
Beam {settings['beam_size']}, alpha {settings['alpha']}, extra length
{settings['extra_length']}; sources of up to {settings['max_input_length']} tokens
(EOS included; longer ones are cut), outputs of up to {settings['cache_length']}.

```python
from t2t_revival.decode.litert_translator import LiteRTTranslator
translator = LiteRTTranslator("{final}")
print(translator.translate(["A man is riding a bike."]))
```

`LiteRTTranslator`'s module docstring describes the loop (encoder once per
sentence, then the step program under beam search); t2t_export.json names
every input and output of `encoder.tflite` and `step.tflite`.
"""


def export_litert(output_dir: str, checkpoint_path: str | None = None,
                  decode_overrides: DecodeOverrides | None = None,
                  export_dir: str | None = None, version: int | None = None) -> str:
    """Write a LiteRT export directory; return it.

    Args:
        output_dir: the training directory.
        checkpoint_path: a checkpoint prefix; default the latest in output_dir.
        decode_overrides: the parsed --decode_hparams over hparams.json's beam
            settings (beam_size, alpha, extra_length, early_stop; no other):
            the step program runs beam_size rows.
        export_dir: where to write `<version>/`; default
            `output_dir/export/litert`.
        version: the version number; default the checkpoint's step.

    Returns:
        The version directory.
    """
    import tensorflow as tf

    from t2t_revival.export.export_source import LITERT_FIXES, load_export_source
    from t2t_revival.decode.flat_cache import is_per_sentence
    from t2t_revival.export.litert_conversion import (cache_specs, encoder_function,
                                                      encoder_output_names, step_function,
                                                      step_output_names, to_litert)

    from t2t_revival.errors import UserError
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    # Before the model is loaded and converted (tens of seconds).
    export_dir = export_dir or TrainingDirectory(output_dir).litert_export_dir
    if os.path.exists(export_dir) and not os.path.isdir(export_dir):
        raise UserError(f"the export folder {export_dir} is a file; move it away or pass "
                        f"--export_dir. Received: export_dir={export_dir!r}")
    _, trained, dhp = load_export_source(output_dir, checkpoint_path, decode_overrides,
                                         LITERT_FIXES, "LiteRT")
    hparams, model = trained.hparams, trained.model
    source_length = hparams.max_length
    cache_length = longest_decode_length(hparams.max_length, dhp.extra_length,
                                         hparams.position_encoding)
    rows = dhp.beam_size
    specs = cache_specs(model, 1, rows, source_length, cache_length)
    encoder = to_litert(encoder_function(model, specs, 1, source_length, cache_length))
    step_program = to_litert(step_function(model, specs, rows))

    step = checkpoint_version(trained.checkpoint_path)
    version = step if version is None else int(version)
    final = os.path.join(export_dir, str(version))
    settings = {
        "format": "litert",
        "tensorflow_version": tf.__version__,
        "checkpoint": os.path.abspath(trained.checkpoint_path),
        "step": step,
        "beam_size": dhp.beam_size,
        "alpha": dhp.alpha,
        "length_penalty": dhp.length_penalty,
        "extra_length": dhp.extra_length,
        "early_stop": dhp.early_stop,
        # Inputs longer than this (EOS included) are cut to it, as by t2t-decoder.
        "max_input_length": source_length,
        # The self-attention cache's positions: the longest output.
        "cache_length": cache_length,
        "position_encoding": hparams.position_encoding,
        "problem": trained.run_record.problem,
        "encoder": {"inputs": ["inputs"], "outputs": encoder_output_names(specs)},
        "step": {"inputs": ["ids", "index", *specs], "outputs": step_output_names(specs)},
        "row_cache_shapes": {name: list(spec.shape) for name, spec in specs.items()
                             if not is_per_sentence(name)},
    }

    def write(tmp: str) -> None:
        os.makedirs(tmp)
        for name, program in ((ENCODER_FILE, encoder), (STEP_FILE, step_program)):
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(program)
        shutil.copyfile(trained.vocab.model_file,
                        os.path.join(tmp, trained.vocab.RUN_FILE_NAME))
        with open(os.path.join(tmp, EXPORT_CONFIG), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2, sort_keys=True)
            f.write("\n")
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
            f.write(_readme(final, settings))

    return write_version_directory(export_dir, version, write)
