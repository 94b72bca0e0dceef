"""`RunCheckpoints`: the trainer's model and optimizer in the run's checkpoint folder."""

from __future__ import annotations

import contextlib
import shutil
from typing import Callable, ContextManager

from t2t_revival.errors import UserError
from t2t_revival.run_dir.checkpoint_folder import CORRUPT_RESTORE_ERRORS, CheckpointFolder, Log
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.file_names import checkpoint_step
from t2t_revival.run_dir.training_directory import TrainingDirectory


class RunCheckpoints:
    """Saves and restores a run's model and optimizer through its `CheckpointFolder`.

    The chief saves into the training directory (`directory.checkpoints`,
    keeping --keep_checkpoint_max); a non-chief MultiWorker replica must save
    too (the save is a collective), into a folder of its own that is removed
    after each save.

    Args:
        directory: the training directory.
        model, optimizer: what a checkpoint holds (`make_checkpoint`).
        worker: None on the chief; else the worker's task id.

    Attributes:
        before_save: called with the step before each save (the trainer's
            check that the weights are finite).
        saving: a context manager around each save (the stop controller's:
            a stop signal waits for the save to end).
    """

    def __init__(self, directory: TrainingDirectory, model, optimizer,
                 worker: int | None = None):
        self.directory = directory
        self.chief = worker is None
        self.folder = directory.checkpoints if self.chief else \
            CheckpointFolder(directory.worker_dir(worker), directory.checkpoints.keep)
        self.optimizer = optimizer
        self.checkpoint = make_checkpoint(model, optimizer)
        self.before_save: Callable[[int], None] = lambda step: None
        self.saving: Callable[[], ContextManager] = contextlib.nullcontext

    def restore(self, mismatch: Callable[[str, str], UserError], log: Log) -> str | None:
        """Restore the newest intact checkpoint of the run and say so; return its
        prefix (None when there is none). Damaged ones are skipped with one
        line each, and the chief then makes the `checkpoint` index name the
        intact ones.

        `mismatch(prefix, why)`: the error for a checkpoint of another model.
        """
        def restore(prefix: str) -> None:
            try:
                self.checkpoint.restore(prefix).assert_existing_objects_matched()
            except CORRUPT_RESTORE_ERRORS as e:
                raise CorruptCheckpointError.on_restore(prefix, e) from None
            except (AssertionError, ValueError) as e:
                raise mismatch(prefix, str(e).strip().split("\n", 1)[0][:200]) from None

        latest = self.directory.checkpoints.restore_newest(restore, log)
        if latest:
            log(f"Resumed from {latest} at step {int(self.optimizer.iterations.numpy())}.")
        if self.chief:
            self.directory.checkpoints.repair_index(latest, log)
        return latest

    def latest(self) -> str | None:
        """The newest checkpoint saved (or restored from)."""
        return self.folder.latest_saved()

    def save(self, step: int) -> str:
        """Save `ckpt-<step>` (`before_save` first); returns its prefix."""
        self.before_save(step)
        with self.saving():
            path = self.folder.save(self.checkpoint, step)
            if not self.chief:
                shutil.rmtree(self.folder.path, ignore_errors=True)
        return path

    def save_unless_saved(self, step: int) -> str:
        """The checkpoint of `step`: saved now unless it is already."""
        latest = self.latest()
        if latest is not None and checkpoint_step(latest) == step:
            return latest
        return self.save(step)
