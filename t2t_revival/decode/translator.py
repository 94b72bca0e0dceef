"""`Translator`: the contract every translation engine implements.

    translator.translate(["A man is riding a bike."])   # -> ["Ein Mann ..."]

The engines: the TensorFlow `Decoder` (beam search, sampling, prefixes and
constraints, XLA), `LiteRTTranslator` (a LiteRT export, or the run's LiteRT
programs for t2t-decoder's quick start) and `CTranslate2Translator` (a
CTranslate2 export; prefixes). t2t-decoder, the trainer's dev evaluation and
the benchmarks call them through this contract alone, so that they never ask
which engine they hold; `EngineChoice.for_job` picks one for a job.
(The SavedModel's `TranslationModule` is a graph, not a Python engine: it
applies the same input rule in the graph, `decode_length.cut_to_max_length`.)

What every engine does the same way:
- inputs: one sentence a string; a blank one gives an empty output;
- the input rule (`fit`, i.e. `decode_length.fit_inputs`): a sentence longer
  than `max_length` tokens, EOS included, is cut to it and counted in
  `cut_inputs`, or refused (long_inputs="refuse", checked once by
  `settings.decode_choices.check_long_inputs`);
- outputs: the translations in input order, one line each (`one_field`);
- progress(done, total) and on_batch(indices, outputs) after each batch;
- what it does not serve (`serves`) is refused with one line (`refuse`),
  never ignored.
"""

from __future__ import annotations

import abc
from typing import Callable, Sequence

from t2t_revival.decode.decode_length import fit_inputs
from t2t_revival.errors import UserError

Progress = Callable[[int, int], None]
"""progress(inputs done, all inputs), after each batch."""
OnBatch = Callable[[list[int], list[str]], None]
"""on_batch(the batch's input indices, their translations), as it is decoded."""

GUIDES = ("prefixes", "constraints")
"""What an engine may serve beyond the best translation of each sentence:
each output starting with a given prefix, or containing given phrases."""


class Translator(abc.ABC):
    """A translation engine (see the module docstring).

    Attributes (each engine sets them):
        engine: its name in messages ("TensorFlow", "LiteRT", "CTranslate2").
        serves: which of `GUIDES` it serves.
        max_length: the longest input in tokens, EOS included.
        checkpoint_path: the checkpoint (or export) its weights are of.
        cut_inputs: the inputs of the last `translate` cut to max_length.
        skipped: {index: why} of the last `translate`'s inputs whose prefix
            or constraints cannot be met (their outputs are empty).
    """

    engine: str = ""
    serves: frozenset[str] = frozenset()
    max_length: int
    checkpoint_path: str = ""
    cut_inputs: int = 0
    skipped: dict[int, str]

    @abc.abstractmethod
    def translate(self, sentences: Sequence[str], progress: Progress | None = None,
                  compiling: Callable[[int], None] | None = None,
                  on_batch: OnBatch | None = None, prefixes: Sequence[str] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[str]:
        """Translations in input order, one line each.

        compiling: called with the number of programs about to be compiled
            (seconds each) by an engine that compiles (the XLA search).
        prefixes, constraints: None, or each input's output start and
            phrases; an engine that does not serve them refuses them."""

    def describe(self) -> str:
        """What decodes, for the line t2t-decoder prints first."""
        return f"{self.checkpoint_path} on {self.engine}"

    def refuse(self, **asked) -> None:
        """A UserError for each of `asked` (name: value or None) that is
        given and that this engine does not serve."""
        for name, value in asked.items():
            if value is not None and name not in self.serves:
                served = ", ".join(sorted(self.serves)) or "neither prefixes nor constraints"
                raise UserError(f"the {self.engine} engine does not serve {name} (it "
                                f"serves {served}); decode with t2t-decoder's TensorFlow "
                                f"search (--decode_hparams=litert=false). Received: "
                                f"{name} for {len(value)} inputs")

    def fit(self, sentences: Sequence[str], encode: Callable[[str], list], end,
            long_inputs: str, max_input_size: int = -1) -> list[list]:
        """Each sentence's tokens by the input rule (`decode_length.fit_inputs`,
        ending in `end`), `cut_inputs` counting those cut to max_length."""
        tokens, self.cut_inputs = fit_inputs(sentences, encode, end, self.max_length,
                                             long_inputs, max_input_size)
        return tokens
