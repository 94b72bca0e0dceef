"""`DecodeHParams`: the typed, frozen settings of one decoding run.

Defaults come from the resolved training `HParams` (which the problem and the
hparam set already filled: translation beam 4, alpha 0.6, extra 50; parsing
beam 21, alpha 0.3, extra 300), then the `--decode_hparams "beam_size=8,..."`
overrides, which the command line parses once (`parse_decode_hparams`, the
same parser as `--hparams`) into typed values that the library takes
(`DecodeHParams.from_hparams`). Ranges: `setting_ranges.RANGES`. No
TensorFlow here: a command line checks the string before loading anything.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping

from t2t_revival.settings.decode_choices import (AUTO_LITERT_SENTENCES, CPU_PARALLEL_BATCHES,
                                                  EARLY_STOP_RULES, LENGTH_PENALTIES,
                                                  check_long_inputs,
                                                  CPU_PARALLEL_SINGLE_SENTENCES, LITERT_CHOICES,
                                                  XLA_CHOICES)
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams
from t2t_revival.registry import closest
from t2t_revival.settings.t2t_hparam_names import T2T_DECODE_NO_EQUIVALENT
from t2t_revival.settings.typed_settings import check_settings, parse_typed_pairs

DecodeOverrides = Mapping[str, Any]
"""`--decode_hparams` parsed: {field name: typed value} (`parse_decode_hparams`)."""


class DecodeHParamsError(UserError):
    """A malformed `--decode_hparams` string, an unknown field or a bad value."""


@dataclasses.dataclass(frozen=True)
class DecodeHParams:
    """How to decode: beam width, length penalty, length limit, batching."""

    beam_size: int = 4
    """Beam width; 1 is greedy search (paper 6.1: 4; parsing 6.3: 21)."""
    alpha: float = 0.6
    """Length penalty alpha: scores are log_prob / ((5 + len) / 6) ** alpha
    (GNMT, tensor2tensor; paper 6.1: 0.6; parsing 0.3)."""
    length_penalty: str = "gnmt"
    """The penalty alpha is the exponent of: "gnmt", ((5 + len) / 6) ** alpha;
    "power", len ** alpha (transformers' `length_penalty`, CTranslate2's)."""
    extra_length: int = 50
    """max_decode_length = input length + extra_length (6.1: 50; parsing 300)."""
    batch_size: int = 32
    """Sentences per decoding batch (NOT tokens, unlike HParams.batch_size)."""
    batch_tokens: int = 0
    """When > 0, batches by tokens instead of sentences: as many sentences as
    fit in this many source tokens, padding included (fairseq's --max-tokens,
    OpenNMT-tf's batch_type=tokens); batch_size is then ignored."""
    return_beams: bool = False
    """Return every beam (n-best list, best first) instead of the top one
    (with sampling: every sample, best-scoring first)."""
    sampling: bool = False
    """Sample instead of beam search (e.g. for back-translation): each token is
    drawn from the model's distribution after temperature, top_k and top_p
    (`decode/sampling.py`); beam_size is then unused."""
    temperature: float = 1.0
    """Sampling: logits / temperature (< 1 sharper, > 1 flatter); > 0."""
    top_k: int = 0
    """Sampling: draw from the top_k most likely tokens only; 0 = all."""
    top_p: float = 1.0
    """Sampling (nucleus): draw from the smallest set of most likely tokens whose
    probability reaches top_p, in (0, 1]; 1.0 = all."""
    samples_per_input: int = 1
    """Sampling: outputs drawn per input; the best-scoring is written (all,
    best first, with return_beams)."""
    seed: int = 1
    """Sampling: the random seed; the same seed, inputs and batch_size give the
    same samples."""
    xla: str = "auto"
    """Compile the encoder and the whole search with XLA (jit_compile), one
    program per length and batch bucket: "true" always; "false" never (the
    uncompiled graph, traced once: the same translations, slower per
    sentence); "auto" (the default) where the compile time is repaid, i.e.
    from `AUTO_XLA_SENTENCES_PER_PROGRAM` sentences a program on (so a short
    file answers in seconds, a test set compiles). Python callers may pass a
    bool."""
    litert: str = "auto"
    """t2t-decoder only: decode on the run's LiteRT programs (the encoder and
    the cached decoder step through XNNPACK's CPU kernels, under the same
    beam search; `LiteRTTranslator`, `EngineChoice`), one sentence at a time, without
    TensorFlow in the process: "auto" (the default) for a job of at most
    `AUTO_LITERT_SENTENCES` sentences or --decode_interactive that they
    serve (beam search's best output, one checkpoint of this run;
    `litert_unsupported`), when the compile cache holds the programs or the
    model is small enough to convert in seconds
    (`AUTO_LITERT_MAX_PARAMETERS`); "true" for any such job (converting the
    programs first, once per checkpoint: `LiteRTProgramCache`); "false"
    never. The same translations as the TensorFlow search (1,000 of 1,000
    on test_2016). Python callers may pass a bool."""
    long_inputs: str = "cut"
    """An input longer than the model's max_length: "cut" it to max_length
    tokens (counted, reported at the end) or "refuse" it (stop with an error)."""
    early_stop: str = "exact"
    """When beam search stops a sentence: "exact" (tensor2tensor's rule: once no
    live hypothesis can still beat the best finished one, even with the
    length penalty of max_decode_length) or "best_finished" (once the best
    finished one beats every live one scored as if it ended at the next
    step; fewer steps, not guaranteed to find the same best)."""
    constraints: bool = False
    """t2t-decoder's input lines are `source<TAB>phrase<TAB>phrase...`: every
    output contains every phrase (hard lexical constraints, beam search
    only; `t2t_revival.decode.lexical_constraints`). With prefix=true too:
    `source<TAB>prefix<TAB>phrase...`."""
    prefix: bool = False
    """t2t-decoder's input lines are `source<TAB>prefix`: every output starts
    with the prefix's tokens, the rest searched as usual (beam search only)."""
    max_constraint_tokens: int = 32
    """The constraint tokens (subwords, all phrases of a sentence together)
    that a sentence may have: the fixed width of the compiled search's
    constraint tensors. A line with more is skipped (an empty output, counted
    and reported with its line number). At most
    `setting_ranges.MAX_CONSTRAINT_TOKENS` (1024)."""

    # ---- tensor2tensor's keys (its utils/decoding.py decode_hparams) ----
    num_samples: int = -1
    """tensor2tensor's: decode only the first num_samples inputs of
    --decode_from_file; -1 decodes them all. (The samples drawn per input
    with sampling=true are samples_per_input.)"""
    max_input_size: int = -1
    """tensor2tensor's: cut each input to this many tokens, EOS included
    (before max_length's cut, and not counted by it); -1 or 0: no such cut."""
    write_beam_scores: bool = False
    """tensor2tensor's: follow each output by a tab and its score (the
    length-penalized log-probability, "%.2f"); with return_beams, each beam."""
    delimiter: str = "\n"
    """tensor2tensor's: what separates the inputs of --decode_from_file and the
    outputs written to --decode_to_file (each input stripped of spaces around
    it); a newline by default. Written as-is in --decode_hparams (a space:
    delimiter=' ')."""
    shards: int = 1
    """tensor2tensor's: with shards > 1, decode shard shard_id only: the input
    file <decode_from_file>NNN (NNN = shard_id on three digits) into
    <decode_to_file>NNN, as its decoder named them."""
    shard_id: int = 0
    """tensor2tensor's: which shard to decode when shards > 1, in [0, shards)."""
    log_results: bool = False
    """tensor2tensor's: print every input and its output to standard error as
    they are written (its default was on; the progress bar is ours)."""

    parallel_batches: int = 0
    """Batches decoded at once, each in a thread of its own (CTranslate2's
    inter_threads): on a CPU a search leaves cores idle between its many
    small operations, and a second batch fills them (benchmarks/RESULTS.md:
    1.3-1.7x on 2 cores, for the Multi30k recipe model and a transformer_base
    shape alike). The same translations, in the same order; more memory.
    0 (the default) picks it: 2 on a CPU (4 at batch_size=1), 1 on a GPU and
    with sampling (one seeded stream), see `resolved`."""

    # ---- word alignments (`decode/word_alignment.py`) ----
    alignments: bool = False
    """Also write each output's source-target word alignment, Pharaoh format
    (`0-0 1-2 ...`), from the encoder-decoder attention: t2t-decoder writes
    them to <decode_to_file>.align, one line per output (with --decode_interactive,
    after a tab)."""
    alignment_layer: int = -1
    """The decoder layer whose encoder-decoder attention aligns (Python
    indexing: -1 is the last); benchmarks/word_alignments.py measures each
    (the last and max were best on Multi30k test_2016's references with the
    quick-start transformer_tiny: benchmarks/RESULTS.md)."""
    alignment_heads: str = "max"
    """How that layer's heads combine: mean, max, or one head's number."""
    alignment_heatmap: int = 0
    """With alignments: draw the word attention of input line N (1-based) as
    a labelled heatmap, <decode_to_file>.align<N>.png (needs matplotlib: pip
    install t2t-revival[plots]); 0 draws none."""

    def __post_init__(self):
        for name in ("xla", "litert"):   # xla=True (Python) or xla=True: "true"
            if isinstance(getattr(self, name), (bool, str)):
                object.__setattr__(self, name, str(getattr(self, name)).lower())
        for check in CHECKS:   # by concern, each one its own function
            check(self)

    def max_decode_length(self, input_length: int) -> int:
        """The longest output for an input of `input_length` tokens (no position
        cap, no padding: `decode_length.max_decode_length` has the whole rule)."""
        return input_length + self.extra_length

    def resolved(self, on_gpu: bool) -> "DecodeHParams":
        """These settings with parallel_batches=0 (the default) made a number:
        on a CPU (`on_gpu` False) `CPU_PARALLEL_BATCHES`, or
        `CPU_PARALLEL_SINGLE_SENTENCES` for batches of one sentence; 1 on a
        GPU (its kernels are not that small, and a second batch only takes
        memory) and with sampling."""
        if self.parallel_batches:
            return self
        if on_gpu or self.sampling:
            parallel_batches = 1
        elif self.batch_size == 1 and not self.batch_tokens:
            parallel_batches = CPU_PARALLEL_SINGLE_SENTENCES
        else:
            parallel_batches = CPU_PARALLEL_BATCHES
        return dataclasses.replace(self, parallel_batches=parallel_batches)

    @classmethod
    def from_hparams(cls, hparams: HParams,
                     overrides: DecodeOverrides | None = None) -> "DecodeHParams":
        """Defaults from the resolved `hparams`, then the parsed `--decode_hparams`."""
        base = cls(beam_size=hparams.beam_size, alpha=hparams.alpha,
                   length_penalty=hparams.length_penalty, extra_length=hparams.extra_length)
        return dataclasses.replace(base, **dict(overrides or {}))


def litert_unsupported(settings: DecodeHParams) -> list[str]:
    """The settings of `settings` that the LiteRT programs do not serve (they
    run beam search for the best output of each sentence): those changed from
    their defaults among sampling, return_beams, write_beam_scores,
    constraints, prefix, alignments and max_input_size."""
    defaults = DecodeHParams.__dataclass_fields__
    return [name for name in ("sampling", "return_beams", "write_beam_scores", "constraints",
                              "prefix", "alignments", "max_input_size")
            if getattr(settings, name) != defaults[name].default
            and not (name == "max_input_size" and settings.max_input_size <= 0)]   # no cut


ALIGNMENT_HEADS = ("mean", "max")
"""`alignment_heads`' names; a head's number (0, 1, ...) picks that head alone."""


def head_number(heads: str) -> int | None:
    """`alignment_heads` as a head's number (`"3"`: 3), or None for a name or
    anything else: ASCII decimal digits only (`str.isdigit` is true for `"²"`,
    which `int` refuses)."""
    return int(heads) if heads.isascii() and heads.isdecimal() else None

SAMPLING_ONLY = ("temperature", "top_k", "top_p", "samples_per_input", "seed")
"""The decode hparams that only sampling reads."""

def _values(s: DecodeHParams) -> None:
    """Each value in its range (`setting_ranges`) or among its choices."""
    check_settings(s, "decode hparam", DecodeHParamsError)
    check_long_inputs(s.long_inputs, "decode hparam 'long_inputs'", DecodeHParamsError)
    for name, choices in (("early_stop", EARLY_STOP_RULES), ("length_penalty", LENGTH_PENALTIES),
                          ("xla", XLA_CHOICES), ("litert", LITERT_CHOICES)):
        if getattr(s, name) not in choices:
            raise DecodeHParamsError(
                f"decode hparam '{name}' must be one of {', '.join(choices)}. "
                f"Received: {name}={getattr(s, name)!r}")


def _sampled_batches(s: DecodeHParams) -> None:
    """Sampling draws from one seeded stream: one batch at a time."""
    if s.sampling and s.parallel_batches > 1:
        raise DecodeHParamsError(
            "decode hparam 'parallel_batches' must be 1 with sampling=true: the "
            "samples come from one seeded stream, in batch order. "
            f"Received: parallel_batches={s.parallel_batches!r}")


def _t2t_files(s: DecodeHParams) -> None:
    """tensor2tensor's file keys: a shard of the shards, a delimiter."""
    if s.shards > 1 and not s.shard_id < s.shards:
        raise DecodeHParamsError(
            f"decode hparam 'shard_id' must be in [0, shards) (shards={s.shards}). "
            f"Received: shard_id={s.shard_id}")
    if not s.delimiter:
        raise DecodeHParamsError("decode hparam 'delimiter' must not be empty (it "
                                 "separates the inputs). Received: delimiter=''")


def _alignments(s: DecodeHParams) -> None:
    """The heads to combine; a heatmap only of alignments."""
    heads = s.alignment_heads
    if heads not in ALIGNMENT_HEADS and head_number(heads) is None:
        raise DecodeHParamsError(
            "decode hparam 'alignment_heads' must be mean, max or a head number. "
            f"Received: alignment_heads={heads!r}")
    if s.alignment_heatmap and not s.alignments:
        raise DecodeHParamsError(
            "decode hparam 'alignment_heatmap' draws an alignment; add "
            "alignments=true to --decode_hparams. "
            f"Received: alignment_heatmap={s.alignment_heatmap}")


def _engines(s: DecodeHParams) -> None:
    """One engine named; litert=true only with what its programs serve."""
    if s.litert == "true" and s.xla == "true":
        raise DecodeHParamsError(
            "decode hparams litert=true and xla=true name two engines for the search; "
            "keep one. Received: litert=true, xla=true")
    if s.litert == "true" and litert_unsupported(s):
        name = litert_unsupported(s)[0]
        raise DecodeHParamsError(
            f"decode hparam litert=true decodes beam search's best output (the LiteRT "
            f"programs); drop {name} or litert=true. Received: {name}="
            f"{getattr(s, name)!r}")


def _guides(s: DecodeHParams) -> None:
    """Prefixes and constraints guide beam search, not sampling."""
    if s.sampling and (s.constraints or s.prefix):
        raise DecodeHParamsError(
            "decode hparams 'constraints' and 'prefix' are for beam search; drop "
            f"sampling=true. Received: constraints={s.constraints}, prefix={s.prefix}")


def _sampling_only(s: DecodeHParams) -> None:
    """The sampling settings need sampling=true."""
    defaults = DecodeHParams.__dataclass_fields__
    changed = [name for name in SAMPLING_ONLY if getattr(s, name) != defaults[name].default]
    if changed and not s.sampling:
        raise DecodeHParamsError(
            f"decode hparam '{changed[0]}' is for sampling; add sampling=true to "
            f"--decode_hparams (or drop it for beam search). "
            f"Received: {changed[0]}={getattr(s, changed[0])!r}")


CHECKS = (_values, _sampled_batches, _t2t_files, _alignments, _engines, _guides,
          _sampling_only)
"""`DecodeHParams`' checks, one concern each, in the order they are told."""


_TYPES: dict[str, Any] = {f.name: typing.get_type_hints(DecodeHParams)[f.name]
                          for f in dataclasses.fields(DecodeHParams)}


def _unknown(key: str, raw: str) -> DecodeHParamsError:
    if key in T2T_DECODE_NO_EQUIVALENT:
        return DecodeHParamsError(
            f"tensor2tensor's decode hparam '{key}' has no equivalent here: "
            f"{T2T_DECODE_NO_EQUIVALENT[key]}. Received: {key}={raw}")
    near = closest(key, _TYPES)
    hint = f" Did you mean '{near}'?" if near else ""
    return DecodeHParamsError(
        f"Unknown decode hparam '{key}'.{hint} The fields are "
        f"{', '.join(_TYPES)}. Received: {key}={raw}")


def decode_hparams_help() -> str:
    """t2t-decoder's help of --decode_hparams: the keys and their defaults."""
    return ('"beam_size=4,alpha=0.6,extra_length=50,batch_size=32,return_beams=false,'
            'batch_tokens=0,xla=auto,long_inputs=cut" (batch_tokens > 0: batches of '
            'that many source tokens; xla=auto compiles the search with XLA where a '
            'job is big enough to repay it, xla=true always, xla=false never; '
            f'litert=auto decodes a job of up to {AUTO_LITERT_SENTENCES} lines, or '
            '--decode_interactive, '
            "on the run's LiteRT programs without TensorFlow (converted once, "
            'kept in T2T_COMPILE_CACHE), litert=true any job they serve, '
            'litert=false never; '
            'long_inputs=refuse: stop at a line longer than max_length; '
            'parallel_batches=N: N batches at once, a thread each; the default 0 '
            'decodes 2 at once on a CPU, 4 at batch_size=1, and 1 on a GPU); '
            'sampling instead of beam search: "sampling=true,temperature=1.0,'
            'top_k=0,top_p=1.0,samples_per_input=1,seed=1" (top_k 0 and top_p 1.0 keep '
            'every token; return_beams=true writes all samples_per_input, best first). '
            'constraints=true: input lines source<TAB>phrase<TAB>... (every output '
            'contains every phrase; max_constraint_tokens=32 subwords a line); '
            'prefix=true: lines source<TAB>prefix (outputs start with it). '
            "tensor2tensor's keys: num_samples=N decodes the first N inputs (-1 all), "
            'max_input_size, write_beam_scores, delimiter, shards, shard_id, '
            'log_results. Word alignments: "alignments=true,alignment_layer=-1,'
            'alignment_heads=max" writes <decode_to_file>.align (Pharaoh '
            '"0-0 1-2 ...", a line per output; interactive: after a tab), '
            'alignment_heatmap=N also draws input line N to '
            '<decode_to_file>.alignN.png.')


def parse_decode_hparams(text: str) -> DecodeOverrides:
    """Parse `"beam_size=4,alpha=0.6,return_beams=true"` into typed values,
    each in its range (a DecodeHParamsError saying the range otherwise).

    For the command line: it parses the flag once and hands the result to the
    library (`DecodeHParams.from_hparams`, `Decoder.load`, the exporters).
    """
    values = parse_typed_pairs(text, _TYPES, flag="--decode_hparams",
                               what="decode hparam", error=DecodeHParamsError,
                               unknown=_unknown)
    DecodeHParams(**values)  # the ranges, before any model is loaded
    return values
