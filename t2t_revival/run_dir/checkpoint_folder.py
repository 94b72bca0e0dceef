"""`CheckpointFolder`: the one owner of a folder of checkpoints.

A training directory has three (`TrainingDirectory`): its own (the
trainer's `ckpt-<step>`), `best/` and `averaged/`. Whoever reads or writes
a checkpoint (the trainer, the decoder, the exporters, t2t-avg-checkpoints,
--warm_start_from) goes through this class, like OpenNMT-tf's `Checkpoint`:

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
import sys
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from t2t_revival.errors import UserError
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.file_names import (BEST_DIR, CHECKPOINT_INDEX, CHECKPOINT_PREFIX, HPARAMS_FILE,
                                            RUN_FILE, VOCAB_FILE, checkpoint_step)

Log = Callable[[str], None]

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


def stderr_log(message: str) -> None:
    """Where a folder says what it skipped, by default."""
    print(message, file=sys.stderr, flush=True)


def quiet(message: str) -> None:
    """A log that says nothing (the problems are said elsewhere)."""


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


class CheckpointFolder:
    """A folder of checkpoints `<prefix>-<step>.index/.data-*` and TensorFlow's index.

    Args:
        path: the folder.
        keep: how many checkpoints `save` keeps (the oldest are deleted).
    """

    def __init__(self, path: str | os.PathLike, keep: int | None = None):
        self.path = str(path)
        self.keep = keep
        self._manager: tf.train.CheckpointManager | None = None
        self._saved: tf.train.Checkpoint | None = None   # what `_manager` saves

    # ------------------------------------------------------------ reading
    @staticmethod
    def problem(prefix: str) -> str | None:
        """Why the checkpoint `prefix` cannot be restored, or None when it looks intact.

        Cheap: reads the .index (the tensor table) and compares the sizes of
        the .data shards with the bytes the table needs, so a missing or
        truncated file is found without reading the weights. A damaged byte
        inside .data shows only when restoring (a checksum error).
        """
        if not os.path.isfile(prefix + ".index"):
            return "its .index file is missing"
        try:
            reader = tf.train.load_checkpoint(prefix)
        except (tf.errors.OpError, ValueError) as e:
            return f"its .index file is unreadable ({first_line(e)})"
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
        needed = sum(int(np.prod(shapes[k], dtype=np.int64)) * dtypes[k].size
                     for k in shapes if dtypes[k] != tf.string)
        shards = glob.glob(glob.escape(prefix) + ".data-*-of-*")
        match = re.search(r"-of-(\d+)$", shards[0]) if shards else None
        expected = int(match.group(1)) if match else 1
        if len(shards) < expected:
            return f"{expected - len(shards)} of its {expected} .data file(s) are missing"
        size = sum(os.path.getsize(p) for p in shards)
        if size < needed:
            return f"its .data file is truncated ({size} of at least {needed} bytes)"
        return None

    def candidates(self, log: Log = stderr_log) -> list[str]:
        """Checkpoint prefixes here, newest first: those the `checkpoint` index
        names and those whose `ckpt-N.index` file is here (a save killed before
        it updated the index leaves a complete checkpoint the index does not
        name). An unreadable index is said in one line and otherwise ignored."""
        named = []
        index = os.path.join(self.path, CHECKPOINT_INDEX)
        if os.path.exists(index):
            try:
                state = tf.train.get_checkpoint_state(self.path)
                if state is None:
                    raise ValueError("not a checkpoint index")
                # (TensorFlow has joined the index's relative names onto the folder.)
                named = list(state.all_model_checkpoint_paths)
                if state.model_checkpoint_path and not named:
                    named = [state.model_checkpoint_path]
            except (ValueError, tf.errors.OpError) as e:
                log(f"The checkpoint index {index} is unreadable ({first_line(e)}); "
                    f"using the checkpoint files found beside it.")
        found = [p[:-len(".index")] for p in
                 glob.glob(os.path.join(glob.escape(self.path), f"{CHECKPOINT_PREFIX}-*.index"))
                 if re.fullmatch(rf"{CHECKPOINT_PREFIX}-\d+", os.path.basename(p)[:-6])]
        unique = {os.path.normpath(p): p for p in [*named, *found]}
        return sorted(unique.values(), key=lambda p: (checkpoint_step(p) or -1, p),
                      reverse=True)

    def intact(self, log: Log = stderr_log) -> list[str]:
        """The intact checkpoints' prefixes, oldest first (others said and skipped)."""
        intact = []
        for prefix in self.candidates(log):
            problem = self.problem(prefix)
            if problem:
                log(f"Skipping the checkpoint {prefix}: {problem}.")
            else:
                intact.append(prefix)
        return intact[::-1]

    def restore_newest(self, restore: Callable[[str], None] = lambda prefix: None,
                       log: Log = stderr_log) -> str | None:
        """Call `restore(prefix)` on the newest intact checkpoint; return its prefix.

        A checkpoint that is missing files, truncated, or whose restore finds
        a damaged byte (`CorruptCheckpointError`), is skipped with one line
        saying which and why, and the next older one is tried. None when the
        folder holds no checkpoint; a UserError when it holds some but none
        is intact. With the default `restore`, the newest intact checkpoint.
        """
        candidates = self.candidates(log)
        for prefix in candidates:
            problem = self.problem(prefix)
            if problem is None:
                try:
                    restore(prefix)
                    return prefix
                except CorruptCheckpointError as e:
                    problem = e.reason
            log(f"Skipping the checkpoint {prefix}: {problem}.")
        if candidates:
            raise self.none_intact(len(candidates))
        return None

    def latest(self) -> str | None:
        """The newest intact checkpoint, quietly (None when there is none)."""
        return self.restore_newest(log=quiet)

    def none_intact(self, count: int) -> UserError:
        """The error for a folder whose `count` checkpoints are all damaged
        (each said before); it names the intact checkpoint of the folder's
        best/, where there is one."""
        best = os.path.join(self.path, BEST_DIR)
        kept = CheckpointFolder(best).latest() if os.path.isdir(best) else None
        if kept:
            return UserError(
                f"none of the {count} checkpoint(s) in {self.path} can be read (each is "
                f"named above), but {best} holds an intact one, {kept}: decode or export "
                f"with --checkpoint_path={best}, or train on from it in a new --output_dir "
                f"with --warm_start_from={kept}. Received: output_dir={self.path!r}")
        return UserError(f"none of the {count} checkpoint(s) in {self.path} can be read (each "
                         f"is named above); train again in a new --output_dir. "
                         f"Received: output_dir={self.path!r}")

    def check_named(self, prefix: str) -> None:
        """A one-line UserError when the checkpoint `prefix` was named but cannot be read."""
        if not tf.io.gfile.exists(prefix + ".index"):
            raise UserError(f"no checkpoint at {prefix} (its .index file "
                            f"is missing). Received: checkpoint_path={prefix!r}")
        problem = self.problem(prefix)
        if problem:
            raise CorruptCheckpointError(
                f"the checkpoint {prefix} is damaged: {problem}; name another "
                f"--checkpoint_path, or leave it out to use the newest intact checkpoint "
                f"of {self.path}. Received: checkpoint_path={prefix!r}", reason=problem)

    def find(self, checkpoint_path: str | None = None, log: Log = stderr_log) -> str:
        """`checkpoint_path` (checked), or the newest intact checkpoint here; a
        UserError when there is none or the named one is damaged.

        `checkpoint_path` is a checkpoint prefix, or a folder of checkpoints
        (`output_dir/best`, `output_dir/averaged`): then the newest intact in it.
        """
        if checkpoint_path and os.path.isdir(checkpoint_path):
            path = CheckpointFolder(checkpoint_path).restore_newest(log=log)
            if not path:
                raise UserError(f"no checkpoint in the folder {checkpoint_path}; pass a "
                                f"checkpoint prefix such as "
                                f"{os.path.join(checkpoint_path, CHECKPOINT_PREFIX)}-<step>. "
                                f"Received: checkpoint_path={checkpoint_path!r}")
            return path
        if checkpoint_path:
            self.check_named(checkpoint_path)
            return checkpoint_path
        path = self.restore_newest(log=log)
        if not path:
            raise UserError(f"no checkpoint in {self.path}; train first, or pass "
                            f"--checkpoint_path. Received: output_dir={self.path!r}")
        return path

    # ------------------------------------------------------------ writing
    def latest_saved(self) -> str | None:
        """The newest checkpoint `save` knows of (the index's, before the first save)."""
        if self._manager is not None:
            return self._manager.latest_checkpoint
        return tf.train.latest_checkpoint(self.path)

    def is_saved(self, step: int) -> bool:
        """Whether the newest checkpoint saved is of `step`."""
        latest = self.latest_saved()
        return latest is not None and checkpoint_step(latest) == step

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
            raise UserError(
                f"could not save the checkpoint at step {step} in {self.path} ({why}); "
                f"{kept} and this save's partial files are removed; {fix}, then rerun the "
                f"same command to resume. Received: output_dir={self.path!r}") from None

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
        intact = [p for p in self.candidates(quiet) if self.problem(p) is None
                  and (latest is None or (checkpoint_step(p) or -1) <= checkpoint_step(latest))]
        intact.reverse()
        try:
            state = tf.train.get_checkpoint_state(self.path)
        except (ValueError, tf.errors.OpError):
            state = None
        # (TensorFlow has joined the index's relative names onto the folder.)
        current = [os.path.normpath(p) for p in (state.all_model_checkpoint_paths if state else [])]
        wanted = [os.path.normpath(p) for p in intact]
        if state is not None and current == wanted and (
                not latest or os.path.normpath(state.model_checkpoint_path)
                == os.path.normpath(latest)):
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
