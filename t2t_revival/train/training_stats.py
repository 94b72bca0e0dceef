"""`TrainingStats`: throughput, ETA, the progress line and the training summaries."""

from __future__ import annotations

import time

import tensorflow as tf


class TrainingStats:
    """What the trainer reports between updates (OpenNMT-tf's `TrainingStats`).

    Counts the target tokens of the updates since the last report (the
    throughput window) and the time since training started (the ETA and the
    time budget); `report` turns them into the progress line and writes the
    same figures as TensorBoard scalars.

    Args:
        start_step: the step training (re)started from.
        train_steps: the step training ends at.
        writer: a `tf.summary` writer for the scalars (a no-op one off the chief).
        clock: seconds, monotonic enough for durations (tests pass a fake).
    """

    def __init__(self, start_step: int, train_steps: int, writer, clock=time.time):
        self.start_step = start_step
        self.train_steps = train_steps
        self.writer = writer
        self.clock = clock
        self.started = clock()
        self._window_tokens = 0.0
        self._window_start = self.started

    def update(self, tokens: float) -> None:
        """Count one update's target tokens."""
        self._window_tokens += float(tokens)

    def elapsed(self) -> float:
        """Seconds since training started."""
        return self.clock() - self.started

    def report(self, step: int, loss, learning_rate: float, grad_norm,
               loss_scale=None) -> str:
        """The progress line of `step`; writes the scalars and starts a new window.

        `loss_scale` (mixed_float16's dynamic loss scale) is written when given.
        """
        now = self.clock()
        tokens_per_second = self._window_tokens / max(now - self._window_start, 1e-9)
        per_step = (now - self.started) / max(step - self.start_step, 1)
        eta = per_step * (self.train_steps - step)
        line = (f"step {step}/{self.train_steps}  loss {float(loss):.4f}  "
                f"lr {learning_rate:.3g}  grad_norm {float(grad_norm):.3g}  "
                f"{tokens_per_second:,.0f} tokens/s  ETA {format_eta(eta)}")
        with self.writer.as_default(step=step):
            tf.summary.scalar("loss", loss)
            tf.summary.scalar("learning_rate", learning_rate)
            tf.summary.scalar("tokens_per_second", tokens_per_second)
            tf.summary.scalar("grad_norm", grad_norm)
            if loss_scale is not None:
                tf.summary.scalar("loss_scale", loss_scale)
        self._window_tokens, self._window_start = 0.0, self.clock()
        return line


def format_eta(seconds: float) -> str:
    """`1h02m03s`."""
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"
