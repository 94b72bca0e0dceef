"""A device out of memory, as one line.

TensorFlow reports it as a `ResourceExhaustedError` whose message is the
allocation that failed ("OOM when allocating tensor with shape[...] ... on
/device:GPU:0", or XLA's "Out of memory while trying to allocate ..."),
then the allocator's statistics and the graph's nodes, dozens of lines. The
places that run the big computations (the trainer's update, the decoder's
search) turn it into a UserError: that first line, then what to lower.
"""

from __future__ import annotations

from t2t_revival.errors import UserError


class OutOfMemoryError(UserError):
    """`<what> ran out of memory: <reason>. <advice>` (`out_of_memory_error`).

    `reason` (the allocation that failed) is kept, so that a caller that knows
    more of what was running can say it again in its own words
    (`DevMetricEvaluator`: the dev decoding, and the trainer's flags)."""

    def __init__(self, what: str, reason: str, advice: str):
        super().__init__(f"{what} ran out of memory: {reason}. {advice}")
        self.reason = reason


def out_of_memory_error(what: str, error: Exception, advice: str) -> OutOfMemoryError:
    """`<what> ran out of memory: <the allocation that failed>. <advice>`.

    Args:
        what: what was running ("the update after step 12", "decoding").
        error: TensorFlow's ResourceExhaustedError.
        advice: the settings that need less, ending with `Received: ...`.
    """
    message = (getattr(error, "message", "") or str(error)).strip()
    reason = message.splitlines()[0][:300] if message else "no details"
    return OutOfMemoryError(what, reason, advice)
