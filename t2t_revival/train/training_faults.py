"""`TrainingFaults`: the faults of a training run as one line, the run saved first.

A device out of memory (TensorFlow's ResourceExhaustedError, dozens of lines
of allocator statistics), a damaged or vanished data shard (a DataLossError
that names no file), a model whose weights went NaN: each becomes one
UserError saying what to change, after the run was saved where that is safe,
so that rerunning the same command resumes.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable

import tensorflow as tf

from t2t_revival.data.data_error import DataError
from t2t_revival.process.device_memory import OutOfMemoryError, out_of_memory_error
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams
from t2t_revival.train.run_checkpoints import RunCheckpoints


class TrainingFaults:
    """Maps the faults of training, where they arise, to one-line errors.

    Args:
        hparams: the run's hparams (the advice names them).
        problem: the run's problem (it names a damaged or missing shard).
        data_dir: where its data is.
        model: the model (its weights are checked for NaN and infinity).
        checkpoints: the run's checkpoints (a fault saves first).
        step: the current step.
        can_save: whether a fault may save now (training has begun, `arm`).
    """

    def __init__(self, hparams: HParams, problem, data_dir: str, model,
                 checkpoints: RunCheckpoints, step: Callable[[], int],
                 can_save: Callable[[], bool]):
        self.hparams, self.problem, self.data_dir, self.model = hparams, problem, data_dir, model
        self.checkpoints, self.step, self.can_save = checkpoints, step, can_save

    # ------------------------------------------------------- saving first
    def save_at_fault(self) -> str:
        """Save the run at its step (unless saved already) after a fault that
        changed nothing: reading the next batch, or running out of memory in
        an update, fails before the update assigns a weight (and the updates
        before it in a call of several are whole); an evaluation assigns
        none. Returns "training stopped at step N and saved it
        (<checkpoint>)", or "" where there is nothing to save (before
        training, or at step 0)."""
        step = self.step()
        if not (self.can_save() and step > 0):
            return ""
        return f"training stopped at step {step} and saved it " \
               f"({self.checkpoints.save_unless_saved(step)})"

    # --------------------------------------------------------- the faults
    @contextlib.contextmanager
    def out_of_memory_named(self, what: str):
        """A device out of memory in `what` ("the update after step 3", "the
        dev loss at step 4"; TensorFlow's ResourceExhaustedError) or in the
        dev decoding (`DevMetricEvaluator`'s OutOfMemoryError): one line
        saying which settings need less, the run saved first."""
        try:
            yield
        except (tf.errors.ResourceExhaustedError, OutOfMemoryError) as e:
            saved = self.save_at_fault()   # first: the advice names its checkpoint
            error = e if isinstance(e, OutOfMemoryError) else \
                out_of_memory_error(what, e, self.lighter_training_advice())
            raise (UserError(f"{saved}: {error}") if saved else error) from None

    @contextlib.contextmanager
    def data_errors_named(self):
        """The data's faults as one line (a DataError), the run saved first.

        TensorFlow's DataLossError names no file: the corrupt shard is found
        and named. A NotFoundError names a shard that went missing (deleted
        while training read the data). Where every shard is intact (the error
        came from elsewhere) the traceback stays.
        """
        try:
            yield
        except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
            error = (self.problem.corrupt_data_error(self.data_dir)
                     if isinstance(e, tf.errors.DataLossError)
                     else self.problem.missing_data_error(self.data_dir))
            if error is None:
                raise
            saved = self.save_at_fault()
            if saved:
                error = DataError(f"{saved}; repair the data, then rerun the same command "
                                  f"to resume: {error}")
            raise error from None

    def check_diverged(self, step: int, loss, grad_norm) -> None:
        """Stop the run (UserError) if the update to `step` left NaN or
        infinity in the weights: every later update and checkpoint would hold
        them too, and the kept checkpoints (`keep_checkpoint_max`) would be
        overwritten one by one with a model that translates nothing.

        Checked where the loss or the gradient norm is not finite (reading
        them back costs nothing more: the token count already is, every
        call). With float16 loss scaling an overflowing gradient is expected
        now and then: its update is skipped and the weights stay finite, so
        the run goes on. (`refuse_non_finite` checks the weights before a save.)
        """
        loss, grad_norm = float(loss), float(grad_norm)
        if math.isfinite(loss) and math.isfinite(grad_norm):
            return
        if not self.weights_are_finite():
            raise self.diverged(step, f" (its update's loss {loss:g}, gradient norm "
                                      f"{grad_norm:g})")

    def refuse_non_finite(self, step: int) -> None:
        """Before a save: a model whose weights are no longer finite is never saved."""
        if not self.weights_are_finite():
            raise self.diverged(step, "")

    def weights_are_finite(self) -> bool:
        return all(bool(tf.reduce_all(tf.math.is_finite(v)))
                   for v in self.model.trainable_variables)

    def diverged(self, step: int, figures: str) -> UserError:
        """The error of a run whose weights went NaN or infinite at `step`."""
        hp, latest = self.hparams, self.checkpoints.latest()
        kept = (f"the last checkpoint, {latest}, is from before it" if latest else
                "no checkpoint was saved before it")
        return UserError(
            f"the model diverged at step {step}: its weights hold NaN or infinity{figures}, "
            f"so it is not saved; {kept}. Lower learning_rate (now {hp.learning_rate:g}), "
            f"lengthen learning_rate_warmup_steps (now {hp.learning_rate_warmup_steps}) or "
            f"set clip_grad_norm (now {hp.clip_grad_norm:g}), and {self.rerun_advice()}. "
            f"Received: step={step}")

    # ------------------------------------------------------------ advice
    def rerun_advice(self) -> str:
        """How to go on with other hparams: a resume keeps the run's own, so
        a run with checkpoints continues from its latest in a new output_dir."""
        latest = self.checkpoints.latest()
        if latest:
            return f"train a new --output_dir with --warm_start_from={latest}"
        return "rerun (with no checkpoint saved, the output_dir takes the new hparams)"

    def lighter_training_advice(self) -> str:
        """The hparams that make an update (or the dev loss) take less device memory."""
        hp = self.hparams
        half = max(hp.batch_size // 2, 1)
        lighter = "" if hp.mixed_precision != "float32" else \
            ", or train in mixed_precision=mixed_bfloat16 (now float32)"
        return (f"Lower batch_size (now {hp.batch_size} tokens per replica; batch_size={half},"
                f"gradient_accumulation_steps={2 * hp.gradient_accumulation_steps} keeps "
                f"the tokens per update) or max_length (now {hp.max_length}){lighter}, and "
                f"{self.rerun_advice()}. Received: batch_size={hp.batch_size}")
