"""`CheckpointFolder`: the one owner of a folder of checkpoints.

A training directory has three (`TrainingDirectory`): its own (the
trainer's `ckpt-<step>`), `best/` and `averaged/`. Whoever reads or writes
a checkpoint (the trainer, the decoder, the exporters, t2t-avg-checkpoints,
--warm_start_from) goes through this class, like OpenNMT-tf's `Checkpoint`.
Which checkpoint to restore is `CheckpointFiles`'s (read without
TensorFlow, so that the LiteRT path chooses as the TensorFlow one does);
this class adds TensorFlow's writers:

    folder = CheckpointFolder("t2t_train/tiny")
    folder.intact()                    # ["…/ckpt-1000", "…/ckpt-2000"], oldest first
    folder.find(None)                  # the newest intact one (a UserError if none)
    folder.restore_newest(restore)     # restore(prefix) on the newest intact one
    folder.save(checkpoint, step)      # ckpt-<step>, keeping the last `keep`
    folder.average(model, prefixes)    # the mean of their model weights, saved here

A damaged checkpoint (a file missing, a truncated .data, a checksum error on
restore) is skipped with one line saying which and why, and the next older
one is used; an unreadable `checkpoint` index is said and worked around.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shutil
from typing import Sequence

import numpy as np
import tensorflow as tf

from t2t_revival.errors import UserError
from t2t_revival.files.atomic_file import DiskWriteError, disk_failure
from t2t_revival.run_dir.checkpoint_files import (CheckpointFiles, Log, quiet,  # noqa: F401
                                                   read_checkpoint_index, stderr_log)
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.file_names import (CHECKPOINT_INDEX, CHECKPOINT_PREFIX, HPARAMS_FILE,
                                            RUN_FILE, VOCAB_FILE, checkpoint_step)

# What TensorFlow raises when a save cannot write (ENOSPC is ResourceExhaustedError).
_WRITE_ERRORS = (OSError, tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                 tf.errors.FailedPreconditionError, tf.errors.UnknownError,
                 tf.errors.NotFoundError)
# Restoring a damaged checkpoint: a checksum mismatch (DataLossError), a short
# read of a truncated .data file (IndexError "Read less bytes than requested",
# raised by TensorFlow's Python restore), a missing file (NotFoundError).
CORRUPT_RESTORE_ERRORS = (tf.errors.DataLossError, tf.errors.NotFoundError, IndexError)
# Leftovers of a killed save or write, by the writer that leaves them:
# CheckpointManager's `ckpt-N_temp/` and its index's `checkpoint.tmp<hex>`,
# atomic_file's `.<name>.<random>.incomplete` of the run files.
_CHECKPOINT_TEMP = re.compile(rf"^{CHECKPOINT_PREFIX}-\d+_temp$")
_INDEX_TEMP = re.compile(rf"^{CHECKPOINT_INDEX}\.tmp[0-9a-f]+$")
_RUN_FILE_TEMP = re.compile(
    rf"^\.({'|'.join(re.escape(n) for n in (HPARAMS_FILE, RUN_FILE, VOCAB_FILE))})"
    rf"\.[^.]+\.incomplete$")


def first_line(error: BaseException) -> str:
    """The first line of a TensorFlow error, without its `{{function_node ...}}` prefix."""
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", text.strip().split("\n", 1)[0])
    return text[:200]


def restore_model_weights(model, prefix: str) -> None:
    """Load the model weights of any of our checkpoints (training, best/,
    averaged/) into the built `model`; damaged files are a
    CorruptCheckpointError, another model's weights a UserError."""
    try:
        status = make_checkpoint(model).restore(prefix).expect_partial()
        status.assert_existing_objects_matched()
    except CORRUPT_RESTORE_ERRORS as e:
        raise CorruptCheckpointError.on_restore(prefix, e) from None
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        raise UserError(
            f"the checkpoint {prefix} does not hold this model's weights "
            f"({str(e).split(chr(10), 1)[0][:200]}); it was written by another model or "
            f"version. Decode with the hparams.json it was trained with, or retrain. "
            f"Received: checkpoint_path={prefix!r}") from None


class CheckpointFolder(CheckpointFiles):
    """A folder of checkpoints `<prefix>-<step>.index/.data-*` and TensorFlow's
    index: `CheckpointFiles`'s reading, and TensorFlow's saving.

    Args:
        path: the folder.
        keep: how many checkpoints `save` keeps (the oldest are deleted).
    """

    def __init__(self, path: str | os.PathLike, keep: int | None = None):
        super().__init__(path)
        self.keep = keep
        self._manager: tf.train.CheckpointManager | None = None
        self._saved: tf.train.Checkpoint | None = None   # what `_manager` saves

    # ------------------------------------------------------------ writing
    def latest_saved(self) -> str | None:
        """The newest checkpoint `save` knows of (the index's, before the first save)."""
        if self._manager is not None:
            return self._manager.latest_checkpoint
        return tf.train.latest_checkpoint(self.path)

    def save(self, checkpoint: tf.train.Checkpoint, step: int) -> str:
        """Save `checkpoint` as `ckpt-<step>`, keeping the last `keep`; a save
        that cannot write loses nothing.

        TensorFlow's CheckpointManager writes the data first and the index
        last. When the disk is full or the folder read-only, what this save
        wrote (`ckpt-<step>_temp/`, a partial `ckpt-<step>.*` that did not
        exist before) is removed, the previous checkpoints and the index are
        left as they were, and a UserError says why in one line.
        """
        if self._manager is None or self._saved is not checkpoint:
            # A manager saves the one object it was made with: another object
            # (the next average's model) gets a manager of its own, which reads
            # the index and keeps rotating the same files.
            os.makedirs(self.path, exist_ok=True)
            self._manager = tf.train.CheckpointManager(checkpoint, self.path,
                                                       max_to_keep=self.keep,
                                                       checkpoint_name=CHECKPOINT_PREFIX)
            self._saved = checkpoint
        prefix = os.path.join(self.path, f"{CHECKPOINT_PREFIX}-{step}")
        before = set(glob.glob(glob.escape(prefix) + ".*"))
        try:
            return self._manager.save(checkpoint_number=step)
        except _WRITE_ERRORS as e:
            shutil.rmtree(prefix + "_temp", ignore_errors=True)
            for path in set(glob.glob(glob.escape(prefix) + ".*")) - before:
                with contextlib.suppress(OSError):
                    os.remove(path)
            for name in os.listdir(self.path):
                if _INDEX_TEMP.match(name):
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(self.path, name))
            latest = self._manager.latest_checkpoint
            kept = f"the latest saved checkpoint {latest} is intact" if latest else \
                "no earlier checkpoint was lost"
            why = e.strerror if isinstance(e, OSError) and e.strerror else first_line(e)
            full = (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)) or \
                isinstance(e, tf.errors.ResourceExhaustedError)
            fix = "free some space (or lower --keep_checkpoint_max)" if full else \
                "make the folder writable"
            message = (f"could not save the checkpoint at step {step} in {self.path} ({why}); "
                       f"{kept} and this save's partial files are removed; {fix}, then rerun "
                       f"the same command to resume. Received: output_dir={self.path!r}")
            reason = disk_failure(e) or (os.strerror(errno.ENOSPC) if full else None)
            if reason:   # (a caller that says it otherwise knows it: t2t-import)
                raise DiskWriteError(message, reason) from None
            raise UserError(message) from None

    def average(self, model, prefixes: Sequence[str], log: Log = print) -> str:
        """Save here the mean of the model weights of `prefixes` (paper 6.1), as
        `ckpt-<step of the last>` (model weights only); return its prefix.

        `model` is a built model of the checkpoints' hparams: each checkpoint
        is restored into it in turn (`restore_model_weights`), then it holds
        the mean.
        """
        sums = [np.zeros(w.shape, np.float64) for w in model.weights]
        for prefix in prefixes:
            restore_model_weights(model, prefix)
            for total, w in zip(sums, model.weights):
                total += np.asarray(w.numpy(), np.float64)
            log(f"read {prefix}")
        for total, w in zip(sums, model.weights):
            w.assign((total / len(prefixes)).astype(w.dtype))
        return self.save(make_checkpoint(model), checkpoint_step(prefixes[-1]))

    def repair_index(self, latest: str | None, log: Log = stderr_log) -> None:
        """Make the `checkpoint` index name the intact checkpoints up to `latest`.

        Called once a resume has worked: an index that is unreadable, names
        deleted or damaged checkpoints, or does not name `latest`, is
        rewritten (atomically) so that `save` keeps and deletes the right files
        from now on. A sound index is left as it is.
        """
        from t2t_revival.files.atomic_file import write_atomically

        index = os.path.join(self.path, CHECKPOINT_INDEX)
        intact = [p for p in self._candidates(quiet) if self.problem(p) is None
                  and (latest is None or (checkpoint_step(p) or -1) <= checkpoint_step(latest))]
        intact.reverse()
        try:
            named = read_checkpoint_index(self.path)   # joined onto the folder
        except (OSError, ValueError):
            named = None
        current = [os.path.normpath(p) for p in (named or [])]
        wanted = [os.path.normpath(p) for p in intact]
        if named is not None and current == wanted and (
                not latest or (current and current[-1] == os.path.normpath(latest))):
            return
        if not intact:
            if os.path.exists(index):
                os.remove(index)
            return
        # CheckpointManager's format: relative names, and the save times it
        # keeps and deletes by (an entry older than last_preserved_timestamp
        # would be kept forever and dropped from the index).
        names = [os.path.basename(p) for p in intact]
        times = [os.path.getmtime(p + ".index") for p in intact]
        write_atomically(index, "".join(
            [f'model_checkpoint_path: "{names[-1]}"\n'] +
            [f'all_model_checkpoint_paths: "{n}"\n' for n in names] +
            [f"all_model_checkpoint_timestamps: {t!r}\n" for t in times] +
            [f"last_preserved_timestamp: {min(times) - 1.0!r}\n"]))
        log(f"Rewrote the checkpoint index {index}: it names "
            f"{', '.join(os.path.basename(p) for p in intact)}.")

    def leftovers(self, run_files: bool = False) -> list[str]:
        """What killed saves left here: `ckpt-N_temp/`, `checkpoint.tmp*`; with
        `run_files`, also the run files' `.hparams.json.*.incomplete` (and
        run.json's, vocab.model's)."""
        try:
            names = os.listdir(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [os.path.join(self.path, n) for n in sorted(names)
                if _CHECKPOINT_TEMP.match(n) or _INDEX_TEMP.match(n)
                or (run_files and _RUN_FILE_TEMP.match(n))]
