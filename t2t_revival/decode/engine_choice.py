"""`EngineChoice`: which engine decodes a t2t-decoder job, and the
thresholds that pick it: one owner.

    choice = EngineChoice.for_job("t2t_train/tiny", [], settings, sentences=2,
                                  cache=LiteRTProgramCache.from_environment(log), log=log)
    choice.engine        # "litert" (choice.programs, choice.checkpoint) or "tensorflow"

A job is translated by one engine of the `Translator` contract: the
TensorFlow `Decoder` (XLA-compiled or not: `xla`, `Decoder.compiles`) or,
for a small job, the run's LiteRT programs (`litert`: `LiteRTTranslator`
over programs converted once and kept in `LiteRTProgramCache`), which answer
without TensorFlow in the process. The rule lives here (its thresholds:
`settings.decode_choices`; which checkpoints decode as an ensemble:
`TrainingDirectory.other_runs`), importing nothing heavy: t2t-decoder chooses before
it imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable, Sequence

from t2t_revival.settings.decode_choices import AUTO_LITERT_MAX_PARAMETERS, AUTO_LITERT_SENTENCES
from t2t_revival.decode.litert_program_cache import (ConversionFailed, LiteRTProgramCache,
                                                     checkpoint_prefix, program_key)
from t2t_revival.errors import UserError
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.settings.decode_hparams import DecodeHParams, litert_unsupported

if TYPE_CHECKING:
    from t2t_revival.settings.hparams import HParams


def estimated_parameters(hparams: HParams) -> int:
    """The model's weights, about: the shared embedding and each layer's
    attention (4 d_model^2 a block; the decoder has two) and feed-forward
    (2 d_model d_ff) matrices."""
    d = hparams.d_model
    return (hparams.vocab_size * d + hparams.encoder_layers * (4 * d * d + 2 * d * hparams.d_ff)
            + hparams.decoder_layers * (8 * d * d + 2 * d * hparams.decoder_ffn_width))


@dataclasses.dataclass(frozen=True)
class EngineChoice:
    """The engine of one job: "tensorflow", or "litert" with the programs'
    folder; the checkpoint chosen (the run directory's choice, already said),
    or None: the TensorFlow path chooses it."""

    engine: str = "tensorflow"
    programs: str | None = None
    checkpoint: str | None = None

    @classmethod
    def for_job(cls, output_dir: str, checkpoint_paths: Sequence[str],
                settings: DecodeHParams, sentences: int, cache: LiteRTProgramCache,
                log: Callable[[str], None],
                interactive: bool = False, usr_dir: str | None = None) -> "EngineChoice":
        """The engine of a job of `sentences` inputs (or `interactive`).

        litert=false: TensorFlow. litert=auto: LiteRT for a job of at most
        `AUTO_LITERT_SENTENCES` sentences (or interactive) of one checkpoint
        of this run (`other_runs`), with settings the programs serve
        (`litert_unsupported`), whose programs are in `cache` (a
        `LiteRTProgramCache`), or converted now for a model of at most
        `AUTO_LITERT_MAX_PARAMETERS` weights where the cache is on.
        litert=true: any such job, converting where needed; an ensemble or
        another run's checkpoint is a UserError. A conversion that fails is
        said in one line to `log` (then TensorFlow decodes)."""

        tensorflow = cls()
        if settings.litert == "false" or (settings.litert == "auto" and settings.xla == "true"):
            return tensorflow
        if TrainingDirectory(output_dir).other_runs(checkpoint_paths):
            if settings.litert == "true":
                raise UserError("decode hparam litert=true decodes one checkpoint of this "
                                "run, not an ensemble or another run's checkpoint; drop "
                                "litert=true. Received: litert=true")
            return tensorflow
        if litert_unsupported(settings):
            return tensorflow   # (litert=true with them is refused by DecodeHParams)
        if not interactive and sentences == 0:
            return tensorflow   # nothing to translate, so nothing to convert for
        if settings.litert == "auto" and not interactive and sentences > AUTO_LITERT_SENTENCES:
            return tensorflow
        # The run directory's choice (`TrainingDirectory.checkpoint_to_restore`),
        # said once: the TensorFlow path takes it too. None usable: its UserError.
        prefix = checkpoint_prefix(output_dir, checkpoint_paths[0] if checkpoint_paths else None,
                                   log)
        tensorflow = cls(checkpoint=prefix)
        if settings.litert == "auto" and cache.root is None:
            return tensorflow   # nowhere to keep programs: not worth converting for one job
        try:
            key = program_key(output_dir, prefix, settings)
            hparams = TrainingDirectory(output_dir).read_hparams()
        except (OSError, UserError):
            return tensorflow   # a run file missing or damaged: the TensorFlow path says which
        found = cache.find(key)
        if found:
            return cls("litert", found, prefix)
        if settings.litert == "auto" and estimated_parameters(
                hparams) > AUTO_LITERT_MAX_PARAMETERS:
            return tensorflow
        log(f"Converting {prefix} to LiteRT programs for a quick start (once for this "
            f"checkpoint and beam setting; kept in {cache.root or 'a temporary folder'})")
        start = time.time()
        try:
            programs = cache.convert(key, output_dir, prefix, settings, usr_dir)
        except ConversionFailed as e:
            log(f"{cache.prog}: could not convert to LiteRT programs ({e}); decoding with "
                "TensorFlow")
            return tensorflow
        log(f"Converted in {time.time() - start:.1f} s")
        return cls("litert", programs, prefix)
