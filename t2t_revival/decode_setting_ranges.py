"""The valid range of each numeric decode setting, and the message for a value
outside it.

One owner for `DecodeHParams` (t2t-decoder, the exporters, the trainer's dev
decoding) and `CTranslate2Translator`'s overrides. Like `decode_length`, it
imports no TensorFlow, so that the CTranslate2 translator can check its
arguments without it.
"""

from __future__ import annotations

import math
import numbers

from t2t_revival.decode_length import MAX_EXTRA_LENGTH

# name: (smallest value, largest value or None, what it is).
RANGES: dict[str, tuple[float, float | None, str]] = {
    "beam_size": (1, None, "the beam width; 1 is greedy search"),
    "alpha": (0, None, "the length penalty exponent; 0 turns it off"),
    "extra_length": (0, MAX_EXTRA_LENGTH,
                     "output tokens allowed beyond the input's length; its cache is held "
                     "for every row"),
    "batch_size": (1, None, "sentences per decoding batch"),
    "parallel_batches": (0, None, "batches decoded at once, a thread each; 0 picks: "
                                  "2 on a CPU (4 at batch_size=1), 1 on a GPU or with "
                                  "sampling"),
    "batch_tokens": (0, None,
                     "source tokens per batch, padding included; 0 batches by sentences"),
}


def out_of_range(name: str, value) -> str | None:
    """Why `value` is not a valid `name` (a message ending in `Received: ...`),
    or None when it is. `name` is a key of `RANGES`."""
    low, high, why = RANGES[name]
    valid = f"[{low}, inf)" if high is None else f"[{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return (f"'{name}' must be a number in {valid} ({why}). "
                f"Received: {name}={value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        return (f"'{name}' must be a finite number in {valid} ({why}). "
                f"Received: {name}={value!r}")
    if value < low or (high is not None and value > high):
        return f"'{name}' must be in {valid} ({why}). Received: {name}={value!r}"
    return None
