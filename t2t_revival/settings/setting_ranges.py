"""The one table of valid ranges: every numeric hparam and decode setting.

`HParams` (`--hparams`), `DecodeHParams` (`--decode_hparams`, the exporters,
the trainer's dev decoding) and `CTranslate2Translator`'s overrides check
their values here, so a setting that two of them share (beam_size, alpha,
extra_length) has one range and one message. Like `decode_length`, it
imports no TensorFlow, so that the CTranslate2 translator can check its
arguments without it.

    out_of_range("beam_size", 0)
    -> "'beam_size' must be in [1, inf) (the beam width; 1 is greedy search). Received: beam_size=0"
"""

from __future__ import annotations

import dataclasses
import math
import numbers

# The most output tokens a decode may add beyond its input (`extra_length`,
# in `HParams` and `DecodeHParams` alike). The decoder's self-attention cache
# holds input + extra_length positions for every row of a batch, so an
# unbounded value is an out-of-memory kill, not a longer translation
# (extra_length=100000 reached 14 GB with a small model). 1024 is fairseq's
# default number of target positions and above Marian's 1000-token output
# limit; the paper's settings are 50 (translation) and 300 (parsing).
MAX_EXTRA_LENGTH = 1024

# The most constraint subwords a sentence may have (`max_constraint_tokens`,
# the width C of the search's constraint tensors). The search holds a [C, C]
# table per sentence (`lexical_constraints.phrase_tables`' `same`) and multiplies
# by it at every step, so memory and time grow with C squared: 1024 is 4 MB a
# sentence, 128 MB for a batch of 32 (1e8 was a 3.7 GB allocation failing in
# a traceback). No output is longer than its input's padded length +
# MAX_EXTRA_LENGTH, so more than that many phrase tokens could never all be met
# in a sentence of ordinary length; the default is 32.
MAX_CONSTRAINT_TOKENS = 1024


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of valid values, and what the setting is (for the message).

    Attributes:
        low: the smallest value (excluded when `low_open`).
        high: the largest (excluded when `high_open`); None for no bound.
        why: what the setting is, said after the interval.
    """

    low: float
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def text(self) -> str:
        """The interval, e.g. `[0, 1)`, `(0, inf)`, `[1, inf)`."""
        high = "inf" if self.high is None else f"{self.high:g}"
        return (f"{'(' if self.low_open else '['}{self.low:g}, {high}"
                f"{')' if self.high_open or self.high is None else ']'}")

    def contains(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = self.high is None or (value < self.high if self.high_open
                                      else value <= self.high)
        return above and below


_POSITIVE_INT = dict(low=1)
_NOT_NEGATIVE = dict(low=0)
_POSITIVE = dict(low=0, low_open=True)
_PROBABILITY = dict(low=0, high=1, high_open=True, why="a probability")
_DECAY = dict(low=0, high=1, high_open=True, why="Adam's decay rate")

RANGES: dict[str, Range] = {
    # The model (HParams, section 3 of the paper).
    "num_hidden_layers": Range(**_POSITIVE_INT, why="layers in each stack"),
    "d_model": Range(**_POSITIVE_INT, why="the model width"),
    "num_encoder_layers": Range(**_NOT_NEGATIVE, why="encoder layers; 0 is num_hidden_layers"),
    "num_decoder_layers": Range(**_NOT_NEGATIVE, why="decoder layers; 0 is num_hidden_layers"),
    "d_ff": Range(**_POSITIVE_INT, why="the feed-forward width"),
    "decoder_d_ff": Range(**_NOT_NEGATIVE, why="the decoder's feed-forward width; 0 is d_ff"),
    "target_vocab_size": Range(**_NOT_NEGATIVE, why="target embedding rows; 0 is vocab_size"),
    "num_heads": Range(**_POSITIVE_INT, why="attention heads"),
    "d_k": Range(**_NOT_NEGATIVE, why="per-head key size; 0 is d_model / num_heads"),
    "d_v": Range(**_NOT_NEGATIVE, why="per-head value size; 0 is d_model / num_heads"),
    "vocab_size": Range(**_NOT_NEGATIVE, why="embedding rows; 0 until the problem sets it"),
    "max_length": Range(**_POSITIVE_INT, why="the longest sequence in tokens"),
    "dropout": Range(**_PROBABILITY),
    "attention_dropout": Range(**_PROBABILITY),
    "relu_dropout": Range(**_PROBABILITY),
    "label_smoothing": Range(**_PROBABILITY),
    "layer_norm_epsilon": Range(**_POSITIVE),
    "target_space_id": Range(0, 31, why="a row of tensor2tensor's 32 target spaces"),
    # Subword regularization (HParams' input pipeline).
    "source_sampling_alpha": Range(0, 1, why="0 reads datagen's ids; BPE's dropout "
                                             "probability, unigram's smoothing"),
    "target_sampling_alpha": Range(0, 1, why="0 reads datagen's ids; BPE's dropout "
                                             "probability, unigram's smoothing"),
    "source_sampling_nbest_size": Range(-1, 512, why="-1 samples from all segmentations"),
    "target_sampling_nbest_size": Range(-1, 512, why="-1 samples from all segmentations"),
    # Training (HParams, section 5).
    "gradient_accumulation_steps": Range(**_POSITIVE_INT, why="micro-batches per update"),
    "learning_rate": Range(**_POSITIVE, why="the multiplier of the schedule"),
    "learning_rate_warmup_steps": Range(**_NOT_NEGATIVE),
    "learning_rate_cooldown_steps": Range(**_NOT_NEGATIVE, why="0 keeps the paper's schedule"),
    "adam_beta1": Range(**_DECAY),
    "adam_beta2": Range(**_DECAY),
    "adam_epsilon": Range(**_POSITIVE),
    "clip_grad_norm": Range(**_NOT_NEGATIVE, why="0 turns clipping off"),
    # One name, two meanings of one range: HParams' tokens per replica,
    # DecodeHParams' sentences per decoding batch.
    "batch_size": Range(**_POSITIVE_INT, why="tokens per replica when training, sentences "
                                             "per batch when decoding"),
    # Decoding (HParams' defaults, DecodeHParams, CTranslate2Translator; section 6).
    "beam_size": Range(**_POSITIVE_INT, why="the beam width; 1 is greedy search"),
    "alpha": Range(**_NOT_NEGATIVE, why="the length penalty exponent; 0 turns it off"),
    "extra_length": Range(0, MAX_EXTRA_LENGTH,
                          why="output tokens allowed beyond the input's length, a cache held "
                              "for every row; the paper uses 50, parsing 300"),
    "batch_tokens": Range(**_NOT_NEGATIVE,
                          why="source tokens per batch, padding included; 0 batches by "
                              "sentences"),
    "parallel_batches": Range(**_NOT_NEGATIVE,
                              why="batches decoded at once, a thread each; 0 picks: 2 on a "
                                  "CPU (4 at batch_size=1), 1 on a GPU or with sampling"),
    "alignment_heatmap": Range(**_NOT_NEGATIVE, why="the input line to draw, from 1; "
                                                   "0 draws none"),
    "max_constraint_tokens": Range(1, MAX_CONSTRAINT_TOKENS,
                                   why="constraint subwords per sentence, the width of "
                                       "the search's constraint tensors, whose memory "
                                       "grows with its square"),
    # Sampling (DecodeHParams).
    "temperature": Range(**_POSITIVE, why="logits / temperature; top_k=1 samples greedily"),
    "top_k": Range(**_NOT_NEGATIVE, why="0 keeps every token"),
    "top_p": Range(0, 1, low_open=True, why="1 keeps every token"),
    "samples_per_input": Range(**_POSITIVE_INT, why="outputs drawn per input"),
    # tensor2tensor's decode keys (DecodeHParams).
    "num_samples": Range(-1, why="inputs to decode; -1 decodes them all"),
    "max_input_size": Range(-1, why="input tokens kept, EOS included; -1 or 0 keeps all"),
    "shards": Range(**_POSITIVE_INT, why="input files of one decoding; 1 is none"),
    "shard_id": Range(**_NOT_NEGATIVE, why="the shard to decode, below shards"),
}


def out_of_range(name: str, value) -> str | None:
    """Why `value` is not a valid `name` (a message ending in `Received: ...`),
    or None when it is. `name` is a key of `RANGES`."""
    valid = RANGES[name]
    interval = valid.text() + (f" ({valid.why})" if valid.why else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"'{name}' must be a number in {interval}. Received: {name}={value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return (f"'{name}' must be a finite number in {interval}, not NaN or infinity. "
                f"Received: {name}={value!r}")
    if not valid.contains(value):
        return f"'{name}' must be in {interval}. Received: {name}={value!r}"
    return None
