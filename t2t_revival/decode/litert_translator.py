"""Translating text with a LiteRT export (`t2t-exporter --format=litert`).

    translator = LiteRTTranslator("t2t_train/tiny/export/litert/300")
    translator.translate(["A man is riding a bike."])

The export holds two LiteRT programs of fixed shapes (`litert_conversion`):
`encoder.tflite` (one sentence of `max_input_length` tokens -> the cache's
per-sentence part: the encoder's keys and values for every decoder layer,
and its padding) and `step.tflite` (the decoder's cached step over the
`beam_size` hypotheses of that sentence, with a self-attention cache of
`cache_length` positions), the vocabulary and t2t_export.json (the beam
settings and the programs' input and output names).

The loop, per sentence (a port to another runtime follows it):

1. ids = the vocabulary's ids of the sentence + EOS, cut to max_input_length
   (or refused: long_inputs="refuse"; `Translator.fit`), padded with PAD (0) to max_input_length;
2. the encoder program gives the per-sentence cache leaves;
3. the rows' self-attention leaves start as zeros;
4. `beam_search` (t2t_revival.decode.beam_search, the decoder's own pure
   search) runs with a step callback that calls the step program with the
   current ids [beam], the position `index` and every cache leaf, and hands
   back its logits and new self-attention leaves; beam search reorders them
   by parent between steps. The output length limit is t2t-decoder's
   (`decode_length.max_decode_length`), at most cache_length.
5. the best hypothesis, up to EOS, decoded by the vocabulary.

Sentences go one at a time (a device's usual batch); the translations equal
t2t-decoder's with the same beam settings, up to float rounding (LiteRT's
kernels against TensorFlow's: about 1e-6 on the logits).
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np

from t2t_revival.decode import decode_length
from t2t_revival.decode.export_settings import newest_version, read_export_settings
from t2t_revival.decode.translator import OnBatch, Progress, Translator
from t2t_revival.errors import UserError
from t2t_revival.files.text_lines import one_field
from t2t_revival.settings.decode_choices import check_long_inputs
from t2t_revival.process.usable_cores import usable_cores
from t2t_revival.special_ids import EOS_ID, PAD_ID

ENCODER_FILE = "encoder.tflite"
STEP_FILE = "step.tflite"


class LiteRTTranslator(Translator):
    """Beam-search (or greedy, beam_size 1) translation with a LiteRT export
    (a `Translator`: no prefixes or constraints).

    Args:
        export_dir: a version directory written by `export_litert`
            (encoder.tflite, step.tflite, the vocabulary, t2t_export.json), or
            the folder of versions above it: then the highest version.
        num_threads: the LiteRT interpreter's threads; 0 (the default): the
            usable cores.
        long_inputs: "cut" (the default) cuts a sentence longer than
            max_input_length tokens (EOS included) to it, as t2t-decoder does
            (`cut_inputs` counts them after each `translate`); "refuse" raises
            a UserError naming it.
        checkpoint_path: the checkpoint the programs are of, for messages
            (default: the one the export records).
        run_programs: whether these are a run's own programs, converted for
            t2t-decoder's quick start (`LiteRTProgramCache`), not an export
            (said by `describe`).

    Attributes:
        export_dir: the version directory read.
        settings: its t2t_export.json.
    """

    engine = "LiteRT"

    def __init__(self, export_dir: str, num_threads: int = 0, long_inputs: str = "cut",
                 checkpoint_path: str | None = None, run_programs: bool = False):
        from t2t_revival.data.vocabulary_file import load_vocabulary, vocabulary_in
        from t2t_revival.decode.litert_program import LiteRTProgram

        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
            raise UserError(f"LiteRTTranslator: num_threads must be an integer >= 0 "
                            f"(0: the usable cores). Received: num_threads={num_threads!r}")
        self.long_inputs = check_long_inputs(long_inputs,
                                                           "LiteRTTranslator: long_inputs")
        self.skipped: dict[int, str] = {}
        export_dir = newest_version(export_dir)
        self.settings = read_export_settings(export_dir, "litert")
        self.export_dir = export_dir
        self.max_length = int(self.settings["max_input_length"])
        self.checkpoint_path = checkpoint_path or self.settings.get("checkpoint", export_dir)
        self.run_programs = run_programs
        self.vocab = load_vocabulary(vocabulary_in(export_dir))
        threads = num_threads or usable_cores()
        encoder, step = self.settings["encoder"], self.settings["step"]
        self.encoder = LiteRTProgram(os.path.join(export_dir, ENCODER_FILE),
                                     encoder["inputs"], encoder["outputs"], threads)
        self.step = LiteRTProgram(os.path.join(export_dir, STEP_FILE),
                                  step["inputs"], step["outputs"], threads)

    def _limit(self, length: int) -> int:
        """The most output positions for a source of `length` ids (EOS included)."""
        max_input = int(self.settings["max_input_length"])
        limit = decode_length.max_decode_length(
            decode_length.padded_length(length, max_input), int(self.settings["extra_length"]),
            decode_length.position_limit(self.settings["position_encoding"], max_input))
        return min(limit, int(self.settings["cache_length"]))

    def translate_ids(self, ids: Sequence[int]) -> list[int]:
        """The best translation's ids (up to and without EOS) of one source's
        ids (EOS-terminated, at most max_input_length of them)."""
        from t2t_revival.decode.beam_search import beam_search
        from t2t_revival.decode.flat_cache import (LOGITS, flat_cache, is_per_sentence,
                                                   nested_cache)

        inputs = np.full((1, int(self.settings["max_input_length"])), PAD_ID, np.int32)
        inputs[0, :len(ids)] = ids
        cache = self.encoder(inputs=inputs)                      # the per-sentence leaves
        for name, shape in self.settings["row_cache_shapes"].items():
            cache[name] = np.zeros([1] + shape[1:], np.float32)  # beam search tiles them

        def step(step_ids, step_cache, index):
            flat = flat_cache(step_cache)
            out = self.step(ids=np.asarray(step_ids), index=np.asarray(index),
                            **{name: np.asarray(leaf) for name, leaf in flat.items()})
            # The per-sentence leaves go back as the same objects: beam search
            # then never reorders them (a sentence's, not a row's).
            return out[LOGITS], nested_cache(
                {name: leaf if is_per_sentence(name) else out[name]
                 for name, leaf in flat.items()})

        sequences, _ = beam_search(step, nested_cache(cache), 1,
                                   beam_size=int(self.settings["beam_size"]),
                                   alpha=float(self.settings["alpha"]),
                                   penalty=self.settings.get("length_penalty", "gnmt"),
                                   max_decode_length=self._limit(len(ids)),
                                   return_beams=False,
                                   early_stop=self.settings["early_stop"])
        best = [int(i) for i in np.asarray(sequences)[0]]
        return best[:best.index(EOS_ID)] if EOS_ID in best else best

    def describe(self) -> str:
        if self.run_programs:
            return f"{self.checkpoint_path} on its LiteRT programs ({self.export_dir})"
        return f"{self.checkpoint_path} on the LiteRT export {self.export_dir}"

    def translate(self, sentences: Sequence[str], progress: Progress | None = None,
                  compiling: Callable[[int], None] | None = None,
                  on_batch: OnBatch | None = None, prefixes: Sequence[str] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[str]:
        """`Translator.translate`, a sentence at a time (`on_batch` and
        `progress` after each); no prefixes or constraints (refused)."""
        self.refuse(prefixes=prefixes, constraints=constraints)
        encoded = self.fit(sentences, self.vocab.encode, EOS_ID, self.long_inputs)
        outputs = []
        for i, ids in enumerate(encoded):
            outputs.append(one_field(self.vocab.decode(self.translate_ids(ids))) if ids else "")
            if on_batch:
                on_batch([i], [outputs[-1]])
            if progress:
                progress(i + 1, len(sentences))
        return outputs
