"""The values the decode settings choose among, and the measured thresholds
of their automatic choices: one owner, importing nothing but `UserError`.

`DecodeHParams` checks its values against these names; the engines apply
them: `long_inputs` (`decode_length.fit_inputs`, every engine's
constructor through `check_long_inputs`), `early_stop` (`beam_search`),
`xla` (`Decoder.compiles`), `litert` (`EngineChoice`) and the parallel
batches of a CPU (`DecodeHParams.resolved`, `CTranslate2Translator`).
"""

from __future__ import annotations

from t2t_revival.errors import UserError

# What a decoder does with an input longer than max_length (`long_inputs`):
# cut it (the default, as the SavedModel does) or refuse it.
LONG_INPUTS = ("cut", "refuse")

# When a batch element's beam search stops (`beam_search`'s docstring):
# "exact" (tensor2tensor's bound: no live hypothesis can still win) or
# "best_finished" (the best finished one beats every live one as it stands).
EARLY_STOP_RULES = ("exact", "best_finished")

# `length_penalty` (HParams' default, the decode hparams): "gnmt" divides a
# finished hypothesis's log-probability by ((5 + length) / 6) ** alpha
# (tensor2tensor), "power" by length ** alpha (transformers, CTranslate2).
LENGTH_PENALTIES = ("gnmt", "power")

# `xla` in the decode hparams: "auto" (the default) compiles the search with
# XLA only where its compile time is repaid (`AUTO_XLA_SENTENCES_PER_PROGRAM`),
# "true" always, "false" never (the uncompiled search: the same translations).
XLA_CHOICES = ("auto", "true", "false")
# `litert`, the same three: "auto" where `AUTO_LITERT_SENTENCES` says.
LITERT_CHOICES = XLA_CHOICES

# With xla=auto, a decoder compiles the programs a call needs (one per batch
# bucket and padded length) once it has decoded, or is about to decode, this
# many sentences per program, counting its earlier uncompiled calls (so a
# trainer's dev decoding starts uncompiled and compiles once the evaluations
# add up, as a tiered JIT does). Measured on the tiny README model, 2 cores,
# loaded: 1,000 Multi30k sentences (5 programs) took 28 s compiled and 69 s
# uncompiled, after 227 s of compiling and 5 s of tracing; 100 took 4 s
# either way after 182 s and 5 s. So a short job answers in seconds
# uncompiled, and 200 a program keeps a 1,000-line test set on XLA, as
# before, for the larger models whose compiled search gains more
# (benchmarks/RESULTS.md).
AUTO_XLA_SENTENCES_PER_PROGRAM = 200

# With litert=auto (the decode hparams), t2t-decoder decodes a job of at most
# this many sentences (or --decode_interactive) on the run's LiteRT programs,
# without TensorFlow (`LiteRTTranslator`). Measured on the 2-core machine with
# the tiny README model (2026-11-28): a fresh process translates 2 lines in
# 3.5 s that way (the TensorFlow path: 15-17 s), 100 lines in 15 s (19-23 s),
# and 1,000 in 110-135 s, one sentence at a time at 7-9 a second, where the
# TensorFlow path's batched XLA search takes 33-62 s: so up to 100.
AUTO_LITERT_SENTENCES = 100
# ... and converts the programs first (once; kept in the compile cache) only
# for a model of at most this many weights (`estimated_parameters`): the tiny
# model (1.6 M) converts in about 10 s, as long as the TensorFlow path's
# trace; transformer_base's (60 M) would make a 2-line job wait for its
# conversion, and transformer_big's programs hold 1.7 GB. Larger models use
# programs already converted (litert=true converts them).
AUTO_LITERT_MAX_PARAMETERS = 20_000_000

# The batches a CPU decodes at once by default (`parallel_batches` = 0 in the
# decode hparams; `inter_threads` = 0 for `CTranslate2Translator`): on the
# 2-core machine 2 made our decoder 1.3-1.4x faster than 1 at batch 32 and
# 1.3-1.7x at batch 1 (the Multi30k recipe model and a transformer_base
# shape), and CTranslate2 2 x 1 thread 1.05x faster than 1 x 2 at batch 32
# and 2.1-2.8x at batch 1; more gained nothing at batch 32
# (benchmarks/RESULTS.md).
CPU_PARALLEL_BATCHES = 2
# ... and our decoder's at batch_size=1: 4 was 1.3x faster than 2 on the
# recipe model, the same as 2 at transformer_base's shape.
CPU_PARALLEL_SINGLE_SENTENCES = 4


def check_long_inputs(value: str, who: str, error: type[UserError] = UserError) -> str:
    """`value` if it is one of `LONG_INPUTS`, else an `error` naming `who`
    (the setting or the argument that took it): the one check of
    long_inputs, for `DecodeHParams` and every engine's constructor."""
    if value not in LONG_INPUTS:
        raise error(f"{who} must be one of {', '.join(LONG_INPUTS)}. "
                        f"Received: long_inputs={value!r}")
    return value
