"""A stand-in for `UpdateStep`, for the tests of what the training loop
schedules around the updates (progress lines, saves, evaluations, the
learning rate logged, the time budget, stops, faults): the loop, the
checkpoints, the evaluator and the optimizer's schedule are the trainer's
own, built by `Trainer` as always; only the update computes nothing.

    trainer = Trainer(config, log=lines.append, update_step=FakeUpdateStep)

Each update reads one batch from the training iterator (so the input
pipeline and its faults are real), moves the optimizer's iteration by one
(the step: the learning rate logged is the schedule's at it) and reports a
fixed loss, token count and gradient norm. The weights stay as built, so
checkpoints are real, finite and quick to save. Tracing the real update,
which takes seconds, is what this saves; `tests/test_trainer.py` and the
README run train for real.
"""

from __future__ import annotations

import durations_record


class FakeUpdateStep:
    """`UpdateStep`'s interface (made with its arguments) without compute.

    Attributes:
        calls: the updates of each call, in order (1 for `run`, n for
            `run_many`), to check the calls' sizes.
        loss, tokens, grad_norm: what each update reports (a test may set
            them, e.g. NaN, before or during training).
    """

    def __init__(self, model, optimizer, strategy, hparams, xla: bool = True,
                 loss: float = 5.0, tokens: float = 100.0, grad_norm: float = 1.0):
        self.model, self.optimizer, self.strategy, self.hparams = \
            model, optimizer, strategy, hparams
        self.xla = xla
        self.fp16 = hparams.mixed_precision == "mixed_float16"
        self.fused = False
        self.loss, self.tokens, self.grad_norm = loss, tokens, grad_norm
        self.calls: list[int] = []

    def run(self, iterator):
        """One update: (distributed iterator) -> (loss, target tokens, gradient norm)."""
        return self._updates(iterator, 1)

    def run_many(self, iterator, n):
        """`n` updates in one call (n an int or a scalar tensor)."""
        return self._updates(iterator, int(n))

    def _updates(self, iterator, n: int):
        if not self.calls and int(self.optimizer.iterations.numpy()) == 0:
            durations_record.FAKE_TRAININGS[0] += 1   # a training from scratch, counted
        self.calls.append(n)
        for _ in range(n * self.hparams.gradient_accumulation_steps):
            next(iterator)
        self.optimizer.iterations.assign_add(n)
        return self.loss, self.tokens * n, self.grad_norm
