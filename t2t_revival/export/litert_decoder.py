"""`LiteRTDecoder`: t2t-decoder's small jobs on the run's LiteRT programs,
without TensorFlow in the process (issue 61).

    found = LiteRTDecoder.programs_for_job("t2t-decoder", "t2t_train/tiny", [],
                                           settings, sentences=2)
    if found:                          # else: the TensorFlow `Decoder`
        programs, checkpoint = found
        decoder = LiteRTDecoder(programs, settings, "t2t_train/tiny", checkpoint)
        decoder.translate(["A man is riding a bike."])

The programs (`LiteRTProgramCache`: the encoder and the cached decoder step,
converted once per checkpoint and beam setting) run through XNNPACK's CPU
kernels, one sentence at a time, under the decoder's own `beam_search`
(`LiteRTTranslator`); with Keras's numpy backend (the command line sets it
before Keras is first imported) neither TensorFlow nor a trace is waited
for. The translations equal the TensorFlow search's (1,000 of 1,000 on
Multi30k test_2016, for the tiny model after 300 and after 2,000 steps).
It has `Decoder`'s interface for what t2t-decoder calls.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Sequence

from t2t_revival.settings.decode_hparams import DecodeHParams, litert_unsupported
from t2t_revival.decode.decode_length import AUTO_LITERT_MAX_PARAMETERS, AUTO_LITERT_SENTENCES
from t2t_revival.export.litert_program_cache import (ConversionFailed, LiteRTProgramCache,
                                                     checkpoint_prefix, program_key)
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams
from t2t_revival.run_dir.training_directory import TrainingDirectory


def estimated_parameters(hparams: HParams) -> int:
    """The model's weights, about: the shared embedding and each layer's
    attention (4 d_model^2 a block; the decoder has two) and feed-forward
    (2 d_model d_ff) matrices."""
    d, layers = hparams.d_model, hparams.num_hidden_layers
    return hparams.vocab_size * d + layers * (12 * d * d + 4 * d * hparams.d_ff)


class LiteRTDecoder:
    """Beam search's best translations on LiteRT programs (see the module
    docstring).

    Args:
        programs: the programs' folder (`programs_for_job`; a LiteRT export).
        settings: the decode settings (`DecodeHParams`; the beam settings are
            the programs', long_inputs is read here).
        output_dir: the training directory (its run record and hparams).
        checkpoint_path: the checkpoint they were converted from (for the
            lines t2t-decoder prints; default the export's record).

    Attributes: programs (the folder), and as `Decoder`'s, for t2t-decoder: decode_hparams,
    checkpoint_path, run_record, hparams, cut_inputs (of the last
    `translate`), skipped (always empty: no guides), compiled (False).
    """

    compiled = False

    def __init__(self, programs: str, settings: DecodeHParams, output_dir: str,
                 checkpoint_path: str | None = None):
        from t2t_revival.export.litert_translator import LiteRTTranslator

        self.translator = LiteRTTranslator(programs, long_inputs=settings.long_inputs)
        self.programs = programs
        self.decode_hparams = settings
        self.checkpoint_path = checkpoint_path or self.translator.settings["checkpoint"]
        directory = TrainingDirectory(output_dir)
        self.run_record = directory.read_run_record()
        self.hparams = directory.read_hparams()
        self.cut_inputs = 0
        self.skipped: dict[int, str] = {}

    @staticmethod
    def programs_for_job(prog: str, output_dir: str, checkpoint_paths: Sequence[str],
                         settings: DecodeHParams, sentences: int,
                         interactive: bool = False, usr_dir: str | None = None
                         ) -> tuple[str, str] | None:
        """(the programs' folder, the checkpoint they are of) for this job, or
        None: decode with TensorFlow.

        litert=false: None. litert=auto: a job of at most
        `AUTO_LITERT_SENTENCES` sentences (or interactive) of one checkpoint
        of this run, with settings the programs serve (`litert_unsupported`),
        whose programs are cached, or converted now for a model of at most
        `AUTO_LITERT_MAX_PARAMETERS` weights where the cache is on.
        litert=true: any such job, converting where needed. A conversion that
        fails is said in one line (the TensorFlow path follows).
        """
        if settings.litert == "false" or (settings.litert == "auto" and settings.xla == "true"):
            return None
        directory = TrainingDirectory(output_dir)
        if len(checkpoint_paths) > 1 or (checkpoint_paths
                                         and directory.is_other_run(checkpoint_paths[0])):
            return _refused(settings, "an ensemble or another run's checkpoint")
        if litert_unsupported(settings):
            return None   # (litert=true with them is refused by DecodeHParams)
        if not interactive and sentences == 0:
            return None   # nothing to translate, so nothing to convert for
        if settings.litert == "auto" and not interactive and sentences > AUTO_LITERT_SENTENCES:
            return None
        prefix = checkpoint_prefix(output_dir, checkpoint_paths[0] if checkpoint_paths else None)
        if prefix is None:
            return None   # the TensorFlow path says what is wrong
        cache = LiteRTProgramCache.from_environment(prog)
        if settings.litert == "auto" and cache.root is None:
            return None   # nowhere to keep programs: not worth converting for one job
        try:
            key = program_key(output_dir, prefix, settings)
            hparams = directory.read_hparams()
        except (OSError, UserError):
            return None   # a run file missing or damaged: the TensorFlow path says which
        found = cache.find(key)
        if found:
            return found, prefix
        if settings.litert == "auto" and estimated_parameters(
                hparams) > AUTO_LITERT_MAX_PARAMETERS:
            return None
        print(f"Converting {prefix} to LiteRT programs for a quick start (once for this "
              f"checkpoint and beam setting; kept in {cache.root or 'a temporary folder'})",
              file=sys.stderr)
        start = time.time()
        try:
            programs = cache.convert(key, output_dir, prefix, settings, usr_dir)
            print(f"Converted in {time.time() - start:.1f} s", file=sys.stderr)
            return programs, prefix
        except ConversionFailed as e:
            print(f"{prog}: could not convert to LiteRT programs ({e}); decoding with "
                  f"TensorFlow", file=sys.stderr)
            return None

    def translate(self, sentences: Sequence[str],
                  progress: Callable[[int, int], None] | None = None,
                  compiling: Callable[[int], None] | None = None,
                  on_batch: Callable[[list[int], list[str]], None] | None = None,
                  prefixes: Sequence[str] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[str]:
        """`Decoder.translate` (no guides: `programs_for_job` refuses them),
        a sentence at a time: `on_batch` and `progress` after each."""
        if prefixes is not None or constraints is not None:
            raise ValueError("LiteRTDecoder serves no prefixes or constraints")

        def done(index: int, output: str) -> None:
            if on_batch:
                on_batch([index], [output])
            if progress:
                progress(index + 1, len(sentences))

        try:
            return self.translator.translate(sentences, on_sentence=done)
        finally:
            self.cut_inputs = self.translator.cut_inputs


def _refused(settings: DecodeHParams, what: str) -> None:
    """None for litert=auto; a UserError for litert=true."""
    if settings.litert == "true":
        raise UserError(f"decode hparam litert=true decodes one checkpoint of this run, not "
                        f"{what}; drop litert=true. Received: litert=true")
    return None
