"""Translating text with a trained model directory.

A training `output_dir` holds everything decoding needs (the resolved
hparams, the run record with the problem and model names, the shared
SentencePiece vocabulary and the checkpoints; see `TrainingDirectory`), so no
training flag is needed again.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
from typing import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from t2t_revival.decode.beam_search import OnStep, beam_search
from t2t_revival.decode.device_pool import DevicePool, copy_to_device, copy_weights
from t2t_revival.decode.ensemble import Ensemble
from t2t_revival.decode.pair_scorer import PairScorer
from t2t_revival.decode.sampling import sample_search
from t2t_revival.decode.compiled_searches import CompiledSearches
from t2t_revival.decode.search_guides import SearchGuides, search_arguments
from t2t_revival.decode.search_memory import (available_bytes, beam_batch_size,
                                              out_of_memory_advice, sample_in_chunks)
from t2t_revival.settings.decode_hparams import DecodeHParams, DecodeOverrides
from t2t_revival.decode.decode_length import (batch_bucket, decode_in_length_order,
                                              length_sorted_batches, max_decode_length,
                                              padded_length, position_limit)
from t2t_revival.settings.decode_choices import AUTO_XLA_SENTENCES_PER_PROGRAM
from t2t_revival.decode.translator import GUIDES, Translator
from t2t_revival.process.device_memory import out_of_memory_error
from t2t_revival.models.trained_model import TrainedModel
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.special_ids import EOS_ID, PAD_ID
# Re-exported for callers: the decoder reads and writes text files.
from t2t_revival.files.text_lines import one_field
from t2t_revival.files.text_lines import read_text_lines, write_text_lines  # noqa: F401
from t2t_revival.process.logical_devices import short_name
from t2t_revival.process.usable_cores import usable_cores
from t2t_revival.run_dir.checkpoint_folder import stderr_log
from t2t_revival.files.atomic_file import disk_failure
from t2t_revival.process.xla_compile_cache import cache_disk_full, xla_cache_full_warning


class Decoder(Translator):
    """Translation (beam search or sampling) and scoring with a trained model:
    the TensorFlow engine of the `Translator` contract (prefixes and
    constraints served).

        decoder = Decoder.load("t2t_train/tiny", overrides={"beam_size": 8})
        decoder.translate(["A dog runs."])

    Args:
        trained: the model, its hparams, run record and vocabulary (a
            `TrainedModel`, or an `Ensemble.load`'s; the trainer's model in
            memory at its dev evaluations).
        decode_hparams: the settings (`DecodeHParams`; parallel_batches=0 is
            resolved here: 2 on a CPU, 4 at batch_size=1, 1 on a GPU).
        devices: the devices to decode on, one copy of the model each
            (`DevicePool`; `logical_devices.decode_devices`), the first the
            model's own; none or one: where the model is, as ever.
        log: where a device that runs out of memory is said.
    """

    engine = "TensorFlow"
    serves = frozenset(GUIDES)

    def __init__(self, trained: TrainedModel, decode_hparams: DecodeHParams,
                 devices: Sequence[str] = (), log: Callable[[str], None] = stderr_log):
        self.hparams, self.run_record = trained.hparams, trained.run_record
        self.max_length = trained.hparams.max_length
        self.decode_hparams = on_this_device(trained.hparams, decode_hparams)
        self.vocab, self.checkpoint_path = trained.vocab, trained.checkpoint_path
        self.model = trained.model
        self.skipped: dict[int, str] = {}   # {index: why}: `SearchGuides.refuse_unmet`
        # autograph=False: the model and beam search use no Python control flow
        # on tensors (beam search loops with ops.while_loop), and autograph's
        # conversion cache can hand back a stale function in long processes.
        # With xla, the encoder and the search loop are one XLA program per
        # (batch bucket, padded length). Sampling runs uncompiled.
        self.compiled = False
        """Whether the last `translate` call ran the XLA search (`compiled_search`),
        else `uncompiled_search` (`xla`: "true", "false", or "auto", see
        `compiles`)."""
        # Sentences decoded uncompiled so far (xla=auto counts them).
        self._uncompiled_sentences = 0
        self.search = tf.function(self.search_batch, reduce_retracing=True, autograph=False)
        """The uncompiled search: (inputs int32 [B, S], max_decode_length) -> outputs."""
        # Its step, a function of its own that beam search's loops (one per buffer
        # length) call: traced twice, not thrice (history 2026-11-28).
        self._uncompiled_step = tf.function(self.model.decode_step, autograph=False,
                                            reduce_retracing=True)
        self.uncompiled_search = tf.function(
            lambda inputs: self._search_padded(inputs, step=self._uncompiled_step),
            autograph=False, input_signature=[tf.TensorSpec([None, None], tf.int32)])
        """The uncompiled beam search traced once for every batch size and
        input length: inputs int32 [B, S] -> outputs (a new shape costs no
        tracing, which takes seconds)."""
        self._xla = CompiledSearches(self._search_padded,
                                     self.decode_hparams.max_constraint_tokens)
        self._scorer: PairScorer | None = None   # `score`'s, made on its first call
        self._seed_generator = keras.random.SeedGenerator(self.decode_hparams.seed) \
            if self.decode_hparams.sampling else None
        self.on_beam_step: OnStep | None = None
        """None, or beam search's observer of its steps (`beam_search`'s `on_step`)."""
        self.devices = DevicePool([(devices[0] if devices else "", self)] + [
            (device, Decoder(dataclasses.replace(trained, model=copy_to_device(
                trained.model, device)), self.decode_hparams)) for device in devices[1:]],
            self.decode_hparams.parallel_batches, log)
        """The copies of this search, one per device (`DevicePool`), this one first."""

    @classmethod
    def load(cls, output_dir: str, checkpoint_paths: str | Sequence[str] | None = None,
             overrides: DecodeOverrides | DecodeHParams | None = None,
             devices: Sequence[str] = ()) -> "Decoder":
        """The decoder of a training directory.

        Args:
            output_dir: the training directory (`TrainingDirectory`).
            checkpoint_paths: a checkpoint prefix (e.g.
                `output_dir/averaged/ckpt-5000`) or a folder of checkpoints
                (`output_dir/best`); default the newest intact in output_dir.
                Several decode as an `Ensemble` (prefixes or directories, one
                vocabulary); so does one checkpoint of another training
                directory (`TrainingDirectory.other_runs`).
            overrides: the decode settings resolved at the door (a
                `DecodeHParams`, used as they are), or the parsed
                `--decode_hparams` (`parse_decode_hparams`) over the defaults
                of hparams.json.
            devices: the devices to decode on (`Decoder`'s).
        """
        paths = [checkpoint_paths] if isinstance(checkpoint_paths, str) \
            else list(checkpoint_paths or [])
        directory = TrainingDirectory(output_dir)
        if directory.other_runs(paths):
            trained = Ensemble.load(output_dir, paths)
        else:
            trained = TrainedModel.load(directory, paths[0] if paths else None)
        settings = overrides if isinstance(overrides, DecodeHParams) else \
            DecodeHParams.from_hparams(trained.hparams, overrides)
        return cls(trained, settings, devices)

    # ------------------------------------------------------------------
    @property
    def compiled_searches(self) -> dict[int, tf.types.experimental.PolymorphicFunction]:
        """{rows (or (rows, guides)): the compiled search of `rows` inputs} made so far."""
        return dict(self._xla.searches)

    def search_batch(self, inputs, max_decode_length, samples_per_input: int | None = None,
                     guides: dict | None = None, step=None, on_choice=None):
        """inputs int32 [B, S] -> (sequences [B, (beam,) L], scores [B, (beam)]).

        The search itself, in Python (`search` and `compiled_search` are its
        tf.functions). max_decode_length: a Python int, or an int32 scalar
        tensor that follows from S (`compiled_search`: a constant under XLA).
        samples_per_input: with sampling, the samples of this call (default
        the decode hparams'; `sample_in_chunks` draws them in chunks).
        guides: beam search's prefixes and constraints (`SearchGuides.tensors`).
        step, on_choice: beam search's (default the model's `decode_step`; None)."""
        encoder_output, encoder_padding = self.model.encode(inputs, training=False)
        cache = self.model.init_cache(encoder_output, encoder_padding, max_decode_length)
        dhp = self.decode_hparams
        if dhp.sampling:
            return sample_search(self.model.decode_step, cache, tf.shape(inputs)[0],
                                 max_decode_length, self._seed_generator,
                                 temperature=dhp.temperature, top_k=dhp.top_k,
                                 top_p=dhp.top_p,
                                 samples_per_input=samples_per_input or dhp.samples_per_input,
                                 alpha=dhp.alpha, penalty=dhp.length_penalty,
                                 return_beams=dhp.return_beams)
        # A static batch size (the compiled search always has one) lets the
        # search drop the batch elements that have stopped (`beam_search`).
        batch = inputs.shape[0] if inputs.shape[0] is not None else tf.shape(inputs)[0]
        return beam_search(step or self.model.decode_step, cache, batch,
                           beam_size=dhp.beam_size, alpha=dhp.alpha, penalty=dhp.length_penalty,
                           max_decode_length=max_decode_length,
                           return_beams=dhp.return_beams, early_stop=dhp.early_stop,
                           resize_cache=self.model.resize_cache, on_step=self.on_beam_step,
                           on_choice=on_choice, **search_arguments(guides))

    def _search_padded(self, inputs, guides=None, step=None):
        """inputs int32 [B, S] -> `search_batch`'s outputs, the length limit
        following from S (in the graph); guides, step: `search_batch`'s."""
        hp = self.hparams
        return self.search_batch(inputs, max_decode_length(
            tf.shape(inputs)[1], self.decode_hparams.extra_length,
            position_limit(hp.position_encoding, hp.max_length)), guides=guides, step=step)

    def compiles(self, sentences: int, programs: int) -> bool:
        """Whether a `translate` call of `sentences` non-empty inputs that needs
        `programs` XLA programs not compiled yet runs the XLA search (`xla_compiles`)."""
        return xla_compiles(self.decode_hparams, self._uncompiled_sentences, sentences, programs)

    def compiled_search(self, rows: int, guided: tuple[str, ...] = ()):
        """The XLA search of batches of `rows` inputs (`CompiledSearches.get`)."""
        return self._xla.get(rows, guided)

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """EOS-terminated ids by the input rule (`Translator.fit`: cut to
        max_length, counted in `cut_inputs`, or refused, as `long_inputs`
        says; tensor2tensor's max_input_size first)."""
        dhp = self.decode_hparams
        return self.fit(sentences, self.vocab.encode, EOS_ID, dhp.long_inputs,
                        dhp.max_input_size)

    def describe(self) -> str:
        pool = self.devices
        return self.checkpoint_path + (f" on {pool.describe()}" if len(pool.devices) > 1 else "")

    def copy_weights(self) -> None:
        """The other devices' copies take this model's weights as they are now
        (the trainer's dev evaluation, before each decode)."""
        for _, copy in self.devices.members[1:]:
            copy_weights(self.model, copy.model)

    def translate(self, sentences: Sequence[str],
                  progress: Callable[[int, int], None] | None = None,
                  compiling: Callable[[int], None] | None = None,
                  on_batch: Callable[[list[int], list[str]], None] | None = None,
                  prefixes: Sequence[str] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[str]:
        """Translations in input order, one line each (a line break or tab a
        model spells becomes a space); an empty line gives an empty line.

        Inputs are sorted by length for batching (`batch_size` sentences or
        `batch_tokens` tokens at a time; see `decode_length`). An input longer
        than max_length is cut to it (`cut_inputs` counts them) unless
        `long_inputs=refuse`. With return_beams, each output line holds the
        beams, best first, separated by tabs; with write_beam_scores, each
        output is followed by a tab and its score (tensor2tensor's "%.2f").

        progress: called with (inputs done, all inputs) after each batch.
        compiling: with xla, called with the number of XLA programs this call
            compiles (seconds each), before it compiles them; not called
            when it compiles none.
        on_batch: called with each batch's input indices and translations as
            it is decoded (`decode_in_length_order`'s).
        prefixes, constraints: None, or each input's output start and phrases (`SearchGuides`).
        """
        encoded, done = self.encode(sentences), {}
        hp, dhp = self.hparams, self.decode_hparams
        for _, copy in self.devices.members[1:]:
            copy.on_beam_step = self.on_beam_step
        limit = position_limit(hp.position_encoding, hp.max_length)
        guides = SearchGuides.of_inputs(self.vocab, dhp, prefixes, constraints)
        self.skipped = guides.refuse_unmet(encoded, lambda n: max_decode_length(
            padded_length(n, hp.max_length), dhp.extra_length, limit)) if guides else {}
        program = functools.partial(
            batch_program, encoded=encoded, dhp=dhp, max_length=hp.max_length,
            full_batches=sum(1 for ids in encoded if ids) > dhp.batch_size)

        def decode_batch(chunk: list[int]) -> list[str]:
            rows, length = program(chunk, compiled=self.compiled)
            rows = list(chunk) + [chunk[-1]] * (rows - len(chunk))
            inputs = [encoded[i] + [PAD_ID] * (length - len(encoded[i])) for i in rows]
            decode_length = max_decode_length(length, dhp.extra_length, limit)
            extra = guides and guides.tensors(rows, decode_length)
            sequences, scores = self.devices.run(lambda copy: copy.search_rows(
                inputs, decode_length, extra, guides.kinds if guides else (), self.compiled,
                seed_key=min(chunk)))
            return output_lines(self.vocab, sequences[:len(chunk)], scores[:len(chunk)], dhp)

        lengths = [len(ids) for ids in encoded]
        first = {} if dhp.xla == "false" or dhp.sampling else \
            first_batch_of_each_program(lengths, program, dhp, self.hparams.max_length,
                                        self._xla.programs)
        count = sum(1 for n in lengths if n)
        self.compiled = self.compiles(count, len(first))
        if not self.compiled:
            first = {}
            self._uncompiled_sentences += count
        if first and compiling:
            compiling(len(first))
        try:
            ahead = decode_side_by_side(first, decode_batch)

            def decode_or_take(chunk: list[int]) -> list[str]:
                outputs = ahead.pop(tuple(chunk), None)
                return decode_batch(chunk) if outputs is None else outputs

            return decode_in_length_order(
                lengths, dhp.batch_size, decode_or_take, progress, batch_tokens=dhp.batch_tokens,
                max_length=hp.max_length, on_batch=functools.partial(taken, done, on_batch),
                parallel_batches=dhp.parallel_batches * len(self.devices.devices))
        except tf.errors.ResourceExhaustedError as e:
            # A device out of memory (the decode hparams that need less), or
            # the XLA compile cache's disk full (`cache_disk_full`: the rest uncompiled).
            if cache_disk_full(e) is not None and self.compiled:
                return translate_the_rest_without_xla(self, e, sentences, done, progress,
                                                      on_batch, prefixes, constraints)
            lost = ", ".join(short_name(d) for d in self.devices.lost)
            raise cache_disk_full(e) or out_of_memory_error(
                f"decoding on {lost}" if lost else "decoding", e,
                self.out_of_memory_advice()) from None

    def search_rows(self, rows: list[list[int]], decode_length: int, guides=None,
                    kinds: tuple[str, ...] = (), compiled: bool = False, seed_key: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
        """The search of one batch of padded input rows (ids, one length) on
        this copy's model and device: (sequences, scores) as numpy.
        compiled: the XLA search (`compiled_search`); guides, kinds:
        `SearchGuides.tensors` and `.kinds`; seed_key: with sampling, the
        batch's own random stream ([seed, seed_key << 20]: the batch's first
        input), so that a batch draws the same samples on any device, in
        any order."""
        dhp, inputs = self.decode_hparams, tf.constant(rows, tf.int32)
        if compiled:
            sequences, scores = self.compiled_search(len(rows), kinds)(inputs, guides) \
                if guides else self.compiled_search(len(rows))(inputs)
            self._xla.ran(len(rows), len(rows[0]))
        elif dhp.sampling:
            self._seed_generator.state.assign([dhp.seed, seed_key << 20])
            sequences, scores = sample_in_chunks(self.search, inputs, decode_length,
                                                 self.hparams, dhp)
        else:
            sequences, scores = self.uncompiled_search(inputs) if guides is None else \
                self.search(inputs, decode_length, guides=guides)
        return np.asarray(sequences), np.asarray(scores)

    def out_of_memory_advice(self, settings: str = "the decode hparams'", then: str = "") -> str:
        """`search_memory.out_of_memory_advice` of these decode hparams."""
        return out_of_memory_advice(self.decode_hparams, settings, then)

    # ------------------------------------------------------------------ scoring
    @property
    def scorer(self) -> PairScorer:
        """The forced scoring of this decoder's model (made on first use)."""
        if self._scorer is None:
            self._scorer = PairScorer(self.model, self.hparams, self.vocab, self.decode_hparams)
        return self._scorer

    def score(self, pairs: Sequence[tuple[str, str]],
              progress: Callable[[int, int], None] | None = None
              ) -> list[tuple[float, float]]:
        """(log-probability, length-penalized score) of each (source, target)
        pair, by forced decoding (`PairScorer.score`)."""
        return self.scorer.score(pairs, progress)


def batch_program(chunk: list[int], encoded: list[list[int]], dhp: DecodeHParams,
                  max_length: int, full_batches: bool, compiled: bool = True) -> tuple[int, int]:
    """(rows, padded length) of the inputs that decode `chunk` (indices of
    `encoded`): with xla, one compiled program each, of a fixed number of
    rows (the last one repeated). Sentence batches, `full_batches` (more
    non-empty inputs than one batch holds): the last, partial batch runs the
    full batches' program too, as decoding the extra rows costs far less
    than tracing and compiling a program of its own (seconds)."""
    length = padded_length(max(len(encoded[i]) for i in chunk), max_length)
    if not compiled:
        return len(chunk), length
    if full_batches and not dhp.batch_tokens:
        return dhp.batch_size, length
    return batch_bucket(len(chunk), None if dhp.batch_tokens else dhp.batch_size), length


def on_this_device(hparams, dhp: DecodeHParams) -> DecodeHParams:
    """The decode settings as this device runs them: parallel_batches=0 made
    a number (`DecodeHParams.resolved`: 2 on a CPU, 4 at batch_size=1, 1 on a
    GPU), and beam search's batch_size lowered to what the memory holds."""
    dhp = dhp.resolved(on_gpu=bool(tf.config.list_physical_devices("GPU")))
    if not dhp.sampling and not dhp.batch_tokens:   # beams of bounded memory
        sentences = beam_batch_size(hparams, dhp, available_bytes() // 4)
        if sentences < dhp.batch_size:
            return dataclasses.replace(dhp, batch_size=sentences)
    return dhp


def output_lines(vocab, sequences, scores, dhp: DecodeHParams) -> list[str]:
    """The output line of each input: its best sequence (with return_beams,
    every beam, tab-separated), each followed by a tab and its score with
    write_beam_scores (tensor2tensor's "%.2f")."""

    def text(sequence, score) -> str:
        # one_field: a model's byte pieces can spell a newline or a tab,
        # which would split a translation over lines or n-best columns.
        out = one_field(vocab.decode(sequence))
        return f"{out}\t{score:.2f}" if dhp.write_beam_scores else out

    if dhp.return_beams:
        return ["\t".join(text(s, score) for s, score in zip(beams, beam_scores))
                for beams, beam_scores in zip(sequences, scores)]
    return [text(s, score) for s, score in zip(sequences, scores)]


def taken(done: dict, on_batch, chunk: list[int], outputs: list[str]) -> None:
    """A batch decoded: its outputs kept in `done` ({index: output}), then `on_batch`."""
    done.update(zip(chunk, outputs))
    if on_batch:
        on_batch(chunk, outputs)


def xla_compiles(dhp: DecodeHParams, uncompiled: int, sentences: int, programs: int) -> bool:
    """`Decoder.compiles`: with xla=auto, once the decoder's `uncompiled`
    sentences so far and these reach `AUTO_XLA_SENTENCES_PER_PROGRAM` a
    program (or none is left to compile)."""
    if dhp.xla == "false" or dhp.sampling:
        return False
    if dhp.xla == "true" or not programs:
        return True
    return uncompiled + sentences >= AUTO_XLA_SENTENCES_PER_PROGRAM * programs


def translate_the_rest_without_xla(decoder: Decoder, error: Exception, sentences, done: dict,
                                   progress, on_batch, prefixes, constraints) -> list[str]:
    """`Decoder.translate` after TensorFlow failed a compile because the XLA
    compile cache's disk is full (`error`; TensorFlow fails a compile whose
    program it cannot write): said in one line, the decoder's XLA turned off
    for the process, and the sentences not yet decoded (`done`: {index:
    output}) decoded uncompiled. The job goes on, its output complete."""
    decoder.devices.log(xla_cache_full_warning(disk_failure(error)))
    decoder.decode_hparams = dataclasses.replace(decoder.decode_hparams, xla="false")
    cut, skipped, total = decoder.cut_inputs, decoder.skipped, len(sentences)
    rest = [i for i in range(total) if i not in done]

    def pick(values):
        return None if values is None else [values[i] for i in rest]

    outputs = decoder.translate(
        pick(sentences), progress and (lambda n, _: progress(total - len(rest) + n, total)),
        None, on_batch and (lambda chunk, out: on_batch([rest[i] for i in chunk], out)),
        pick(prefixes), pick(constraints))
    decoder.cut_inputs, decoder.skipped = cut, skipped
    done.update(zip(rest, outputs))
    return [done[i] for i in range(total)]


def decode_side_by_side(first: dict[tuple[int, int], list[int]], decode_batch
                        ) -> dict[tuple[int, ...], list[str]]:
    """{batch: outputs} of the batches of `first` (the first batch of each
    program not compiled yet), decoded all at once, before the rest.

    XLA compiles a program on its first batch, in the thread that runs
    it (8-9 s a program for the Multi30k recipe model on 2 cores, using
    about 1.4 of them); decoded one after the other, a file of 3
    input-length buckets waits for 3 compilations in a row. Here they
    run side by side, as many at a time as there are cores (at least
    2): 21 s instead of 25 for those 3 (benchmarks/RESULTS.md). Nothing
    to gain from one program.
    """
    if len(first) < 2:
        return {}
    workers = min(len(first), max(2, usable_cores()))
    with concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix="compile_ahead") as pool:
        return {tuple(chunk): outputs for chunk, outputs in
                zip(first.values(), pool.map(decode_batch, first.values()))}


def first_batch_of_each_program(lengths: list[int], program, dhp: DecodeHParams,
                                max_length: int, done: set[tuple[int, int]]
                                ) -> dict[tuple[int, int], list[int]]:
    """{program: its first batch} of each compiled program a file needs that
    is not in `done` (`Decoder.translate`'s `program`: (rows, padded length))."""
    first: dict[tuple[int, int], list[int]] = {}
    for chunk in length_sorted_batches(lengths, dhp.batch_size, dhp.batch_tokens, max_length):
        key = program(chunk)
        if key not in done:
            first.setdefault(key, chunk)
    return first
