"""`TrainingDirectory`: one owner for what a training run writes and every tool reads."""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import re
import shutil
import sys
from typing import Callable

import numpy as np
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.atomic_file import copy_atomically, write_atomically
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.errors import UserError
from t2t_revival.hparams import HParams
from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.corrupt_checkpoint_error import CorruptCheckpointError
from t2t_revival.run_dir.file_names import (AVERAGED_DIR, CHECKPOINT_INDEX, CHECKPOINT_PREFIX,
                                            CTRANSLATE2_EXPORT_DIR, EXPORT_DIR, HPARAMS_FILE,
                                            RUN_FILE, VOCAB_FILE, checkpoint_step)
from t2t_revival.run_dir.run_lock import RunLock
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.trained_model import TrainedModel

_AVERAGES_KEPT = 3
# Averaging smooths the noise of the last updates; checkpoints spread over more
# than this share of the run mix in a much weaker model (the paper averaged
# checkpoints written 10 minutes apart: a few percent of the run).
_AVERAGE_SPAN_WARNING = 0.25
# What TensorFlow raises when a save cannot write (ENOSPC is ResourceExhaustedError).
_WRITE_ERRORS = (OSError, tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                 tf.errors.FailedPreconditionError, tf.errors.UnknownError,
                 tf.errors.NotFoundError)
# Leftovers of a killed save, export or write, by the writer that leaves them:
# CheckpointManager's `ckpt-N_temp/` and its index's `checkpoint.tmp<hex>`,
# atomic_file's `.<name>.<random>.incomplete` (an export's leftovers are
# version_directory's to clean).
_CHECKPOINT_TEMP = re.compile(rf"^{CHECKPOINT_PREFIX}-\d+_temp$")
_INDEX_TEMP = re.compile(rf"^{CHECKPOINT_INDEX}\.tmp[0-9a-f]+$")
_RUN_FILE_TEMP = re.compile(
    rf"^\.({'|'.join(re.escape(n) for n in (HPARAMS_FILE, RUN_FILE, VOCAB_FILE))})"
    rf"\.[^.]+\.incomplete$")


def _not_said_already(record: logging.LogRecord) -> bool:
    """False for TensorFlow's warnings about what this module says in one line:
    the values a failed restore (a damaged checkpoint, skipped or reported)
    left unread, at garbage collection, and an unreadable `checkpoint` index."""
    message = record.getMessage()
    return not (record.levelno == logging.WARNING and (
        "Value in checkpoint could not be found in the restored object" in message
        or "is being deleted with unrestored values" in message
        or (record.filename == "checkpoint_management.py"
            and (message.startswith("ParseError") or "Checkpoint ignored" in message))))


logging.getLogger("tensorflow").addFilter(_not_said_already)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _none_intact(directory: str, count: int) -> UserError:
    """The error for a folder whose `count` checkpoints are all damaged (each said before)."""
    return UserError(f"none of the {count} checkpoint(s) in {directory} can be read (each "
                     f"is named above); train again in a new --output_dir. "
                     f"Received: output_dir={directory!r}")


def _first_line(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    # TensorFlow prefixes "{{function_node ...}} "; keep what follows.
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", text.strip().split("\n", 1)[0])
    return text[:200]


class TrainingDirectory:
    """A training directory (`--output_dir`): its files, checkpoints and model.

    Like OpenNMT-tf's `Checkpoint`, one object knows the directory's layout
    (`file_names`), reads and writes the run files (hparams.json, run.json,
    the vocabulary copy), builds the model they describe, and saves,
    lists, restores and averages its checkpoints. The trainer writes through
    it; the decoder, the exporters and t2t-avg-checkpoints read through it.

        trained = TrainingDirectory("t2t_train/tiny").load()   # the latest checkpoint
        trained.model, trained.vocab, trained.hparams, trained.run_record

    Args:
        path: the directory; the trainer creates it, the readers need it.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)

    @staticmethod
    def holding(checkpoint: str, default: str) -> str:
        """The training directory of `checkpoint` (a prefix, or a folder of
        checkpoints): the folder holding its hparams.json, its own or the one
        above (`averaged/`, `best/`); `default` when neither has one."""
        folder = checkpoint if os.path.isdir(checkpoint) else \
            os.path.dirname(checkpoint) or "."
        for candidate in (folder, os.path.dirname(os.path.abspath(folder))):
            if os.path.isfile(os.path.join(candidate, HPARAMS_FILE)):
                return candidate
        return default

    def is_other_run(self, checkpoint: str | None) -> bool:
        """Whether the checkpoint (or folder) `checkpoint` lies in another
        training directory than this one (whose hparams and vocabulary would
        not be its own)."""
        if not checkpoint:
            return False
        run = self.holding(checkpoint, self.path)
        return os.path.realpath(run) != os.path.realpath(self.path)

    # ------------------------------------------------------------------ paths
    @property
    def hparams_file(self) -> str:
        return os.path.join(self.path, HPARAMS_FILE)

    @property
    def run_file(self) -> str:
        return os.path.join(self.path, RUN_FILE)

    @property
    def vocab_file(self) -> str:
        """Where the trainer copies the vocabulary (`run.json` may name another)."""
        return os.path.join(self.path, VOCAB_FILE)

    @property
    def averaged_dir(self) -> str:
        return os.path.join(self.path, AVERAGED_DIR)

    @property
    def export_dir(self) -> str:
        """TF Serving's model base path: one SavedModel per version below it."""
        return os.path.join(self.path, EXPORT_DIR)

    @property
    def ctranslate2_export_dir(self) -> str:
        return os.path.join(self.export_dir, CTRANSLATE2_EXPORT_DIR)

    @property
    def best(self) -> BestCheckpoint:
        """`best/`: a copy of the checkpoint with the best dev metric so far."""
        return BestCheckpoint(self.path)

    def worker_dir(self, task_id: int) -> str:
        """Where a non-chief MultiWorker replica saves (it must save too, for the
        collectives); its files are removed after each save."""
        return os.path.join(self.path, f".worker_{task_id}")

    # -------------------------------------------------------------- run files
    def read_hparams(self) -> HParams:
        """The resolved HParams of the run (a UserError when hparams.json is missing)."""
        return HParams.load(self.hparams_file)

    def read_run_record(self) -> RunRecord:
        try:
            return RunRecord.load(self.run_file)
        except FileNotFoundError:
            raise UserError(f"{self.run_file} is missing; --output_dir must be a directory "
                            f"written by t2t-trainer. Received: path={self.run_file!r}") from None
        except OSError as e:   # a folder in its place, no permission to read it
            raise RunRecord._corrupt(self.run_file, e.strerror or str(e)) from None

    def write_run_files(self, hparams: HParams, record: RunRecord, vocab_source: str) -> None:
        """hparams.json, a copy of the vocabulary `vocab_source`, then run.json.

        Each is written atomically, with mode 0644, so other users (a serving
        container, a teammate) can read the directory.
        """
        os.makedirs(self.path, exist_ok=True)
        hparams.save(self.hparams_file)
        copy_atomically(vocab_source, os.path.join(self.path, record.vocab_file))
        write_atomically(self.run_file, record.to_json())

    def vocabulary(self, record: RunRecord) -> SubwordVocabulary:
        """The run's copy of the shared vocabulary."""
        path = os.path.join(self.path, record.vocab_file)
        if not os.path.isfile(path):
            raise UserError(f"the vocabulary {path} is missing from the training "
                            f"directory; rerun t2t-trainer there to restore it. "
                            f"Received: output_dir={self.path!r}")
        return SubwordVocabulary(path)

    # ------------------------------------------------------------ checkpoints
    def latest_checkpoint(self) -> str | None:
        """The newest intact checkpoint (see `newest_intact_checkpoint`), quietly."""
        return self.newest_intact_checkpoint(log=lambda _: None)

    def checkpoint_problem(self, prefix: str) -> str | None:
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
            return f"its .index file is unreadable ({_first_line(e)})"
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

    def _checkpoint_candidates(self, directory: str, log: Callable[[str], None]) -> list[str]:
        """Checkpoint prefixes in `directory`, newest first: those its `checkpoint`
        index names and those whose `ckpt-N.index` file is there (a save killed
        before it updated the index leaves a complete checkpoint the index does
        not name). An unreadable index is said in one line and otherwise ignored."""
        named = []
        index = os.path.join(directory, CHECKPOINT_INDEX)
        if os.path.exists(index):
            try:
                state = tf.train.get_checkpoint_state(directory)
                if state is None:
                    raise ValueError("not a checkpoint index")
                # (TensorFlow has joined the index's relative names onto `directory`.)
                named = list(state.all_model_checkpoint_paths)
                if state.model_checkpoint_path and not named:
                    named = [state.model_checkpoint_path]
            except (ValueError, tf.errors.OpError) as e:
                log(f"The checkpoint index {index} is unreadable ({_first_line(e)}); "
                    f"using the checkpoint files found beside it.")
        found = [p[:-len(".index")] for p in
                 glob.glob(os.path.join(glob.escape(directory), f"{CHECKPOINT_PREFIX}-*.index"))
                 if re.fullmatch(rf"{CHECKPOINT_PREFIX}-\d+", os.path.basename(p)[:-6])]
        unique = {os.path.normpath(p): p for p in [*named, *found]}
        return sorted(unique.values(), key=lambda p: (checkpoint_step(p) or -1, p),
                      reverse=True)

    def restore_newest_intact(self, restore: Callable[[str], None],
                              log: Callable[[str], None] = _stderr,
                              directory: str | None = None) -> str | None:
        """Call `restore(prefix)` on the newest intact checkpoint; return its prefix.

        A checkpoint that is missing files, truncated, or whose restore finds
        a damaged byte (`CorruptCheckpointError`), is skipped with one line
        saying which and why, and the next older one is tried. None when
        `directory` (default: this one) holds no checkpoint; a UserError when
        it holds some but none is intact.
        """
        directory = directory or self.path
        candidates = self._checkpoint_candidates(directory, log)
        for prefix in candidates:
            problem = self.checkpoint_problem(prefix)
            if problem is None:
                try:
                    restore(prefix)
                    return prefix
                except CorruptCheckpointError as e:
                    problem = e.reason
            log(f"Skipping the checkpoint {prefix}: {problem}.")
        if candidates:
            raise _none_intact(directory, len(candidates))
        return None

    def newest_intact_checkpoint(self, log: Callable[[str], None] = _stderr) -> str | None:
        """The newest checkpoint whose files are complete, skipping (and saying) others."""
        return self.restore_newest_intact(lambda prefix: None, log)

    def checkpoints(self, log: Callable[[str], None] = _stderr) -> list[str]:
        """The intact training checkpoints' prefixes, oldest first (others said and skipped)."""
        intact = []
        for prefix in self._checkpoint_candidates(self.path, log):
            problem = self.checkpoint_problem(prefix)
            if problem:
                log(f"Skipping the checkpoint {prefix}: {problem}.")
            else:
                intact.append(prefix)
        return intact[::-1]

    def checkpoint_path(self, checkpoint_path: str | None = None,
                        log: Callable[[str], None] = _stderr) -> str:
        """`checkpoint_path` (checked), or the newest intact checkpoint; a UserError
        when there is none or the named one is damaged.

        `checkpoint_path` is a checkpoint prefix, or a folder of checkpoints
        (`output_dir/best`, `output_dir/averaged`): then the newest intact in it.
        """
        if checkpoint_path and os.path.isdir(checkpoint_path):
            folder = checkpoint_path
            path = self.restore_newest_intact(lambda prefix: None, log, directory=folder)
            if not path:
                raise UserError(f"no checkpoint in the folder {folder}; pass a checkpoint "
                                f"prefix such as {os.path.join(folder, CHECKPOINT_PREFIX)}-<step>. "
                                f"Received: checkpoint_path={folder!r}")
            return path
        if checkpoint_path:
            self.check_named_checkpoint(checkpoint_path)
            return checkpoint_path
        path = self.newest_intact_checkpoint(log)
        if not path:
            raise UserError(f"no checkpoint in {self.path}; train first, or pass "
                            f"--checkpoint_path. Received: output_dir={self.path!r}")
        return path

    def check_named_checkpoint(self, path: str) -> None:
        """A one-line UserError when the checkpoint `path` was named but cannot be read."""
        if not tf.io.gfile.exists(path + ".index"):
            raise UserError(f"no checkpoint at {path} (its .index file "
                            f"is missing). Received: checkpoint_path={path!r}")
        problem = self.checkpoint_problem(path)
        if problem:
            raise CorruptCheckpointError(
                f"the checkpoint {path} is damaged: {problem}; name another "
                f"--checkpoint_path, or leave it out to use the newest intact checkpoint "
                f"of {self.path}. Received: checkpoint_path={path!r}", reason=problem)

    def repair_checkpoint_index(self, latest: str | None, log: Callable[[str], None] = _stderr,
                                directory: str | None = None) -> None:
        """Make the `checkpoint` index name the intact checkpoints up to `latest`.

        Called once a resume has worked: an index that is unreadable, names
        deleted or damaged checkpoints, or does not name `latest`, is
        rewritten (atomically, by TensorFlow) so that CheckpointManager keeps
        and deletes the right files from now on. A sound index is left as it is.
        """
        directory = directory or self.path
        index = os.path.join(directory, CHECKPOINT_INDEX)
        quiet = lambda _: None  # noqa: E731  (the problems were said by the restore)
        intact = [p for p in self._checkpoint_candidates(directory, quiet)
                  if self.checkpoint_problem(p) is None
                  and (latest is None or (checkpoint_step(p) or -1) <= checkpoint_step(latest))]
        intact.reverse()
        try:
            state = tf.train.get_checkpoint_state(directory)
        except (ValueError, tf.errors.OpError):
            state = None
        # (TensorFlow has joined the index's relative names onto `directory`.)
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
        if os.path.exists(index):
            log(f"Rewrote the checkpoint index {index}: it names "
                f"{', '.join(os.path.basename(p) for p in intact)}.")

    def save_checkpoint(self, manager: tf.train.CheckpointManager, step: int) -> str:
        """`manager.save(step)`; a save that cannot write loses nothing.

        When the disk is full or the folder read-only, what this save wrote
        (`ckpt-<step>_temp/`, a partial `ckpt-<step>.*` that did not exist
        before) is removed, the previous checkpoints and the `checkpoint` index
        (written last, atomically) are left as they were, and a UserError says
        why in one line.
        """
        directory = manager.directory
        prefix = os.path.join(directory, f"{CHECKPOINT_PREFIX}-{step}")
        before = set(glob.glob(glob.escape(prefix) + ".*"))
        try:
            return manager.save(checkpoint_number=step)
        except _WRITE_ERRORS as e:
            shutil.rmtree(prefix + "_temp", ignore_errors=True)
            for path in set(glob.glob(glob.escape(prefix) + ".*")) - before:
                with contextlib.suppress(OSError):
                    os.remove(path)
            for name in os.listdir(directory):
                if _INDEX_TEMP.match(name):
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(directory, name))
            latest = manager.latest_checkpoint
            kept = f"the latest saved checkpoint {latest} is intact" if latest else \
                "no earlier checkpoint was lost"
            why = e.strerror if isinstance(e, OSError) and e.strerror else _first_line(e)
            full = (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)) or \
                isinstance(e, tf.errors.ResourceExhaustedError)
            fix = "free some space (or lower --keep_checkpoint_max)" if full else \
                "make the folder writable"
            raise UserError(
                f"could not save the checkpoint at step {step} in {directory} ({why}); "
                f"{kept} and this save's partial files are removed; {fix}, then rerun the "
                f"same command to resume. Received: output_dir={self.path!r}") from None

    def clean_stale_temporaries(self, log: Callable[[str], None] = _stderr,
                                folders: str = "run") -> list[str]:
        """Remove what killed saves, writes and exports left behind; return the paths.

        Only our own patterns, only inside this directory: with `folders="run"`
        (the trainer, holding the directory's `RunLock`, so no live save is
        removed) its top level's `ckpt-N_temp/` and `checkpoint.tmp*` of a
        killed checkpoint save and `.hparams.json.*.incomplete` (and
        run.json's, vocab.model's) of a killed run-file write; with
        `folders="averaged"` (t2t-avg-checkpoints, holding averaged/'s lock)
        the same checkpoint leftovers in averaged/. (A killed export's
        leftovers are removed by the next export: `write_version_directory`.)
        """
        removed = []

        def remove(path: str) -> None:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(path)
            removed.append(path)

        folder = self.averaged_dir if folders == "averaged" else self.path
        for name in _listdir(folder):
            if _CHECKPOINT_TEMP.match(name) or _INDEX_TEMP.match(name) or (
                    folder == self.path and _RUN_FILE_TEMP.match(name)):
                remove(os.path.join(folder, name))
        if removed:
            log(f"Removed {len(removed)} leftover(s) of an interrupted run: "
                f"{', '.join(os.path.relpath(p, self.path) for p in removed)}.")
        return removed

    def checkpoint_manager(self, checkpoint: tf.train.Checkpoint, max_to_keep: int,
                           directory: str | None = None) -> tf.train.CheckpointManager:
        """A CheckpointManager writing `ckpt-<step>` into this directory (or `directory`)."""
        return tf.train.CheckpointManager(checkpoint, directory or self.path,
                                          max_to_keep=max_to_keep,
                                          checkpoint_name=CHECKPOINT_PREFIX)

    def average_checkpoints(self, num_last: int, model_name: str = "transformer",
                            log=print) -> str:
        """Average the model weights of the last `num_last` checkpoints (paper 6.1).

        Writes `averaged/ckpt-<last step>` (model weights only), which
        `t2t-decoder --checkpoint_path` reads like any checkpoint. Returns its
        path. `model_name` is the registered model the checkpoints hold.
        """
        paths = self.checkpoints(log)
        if not paths:
            damaged = self._checkpoint_candidates(self.path, lambda _: None)
            if damaged:
                raise _none_intact(self.path, len(damaged))
            raise UserError(f"no checkpoints in {self.path}; train first with t2t-trainer. "
                            f"Received: output_dir={self.path}")
        if num_last > len(paths):
            log(f"Only {_checkpoints(len(paths))} in {self.path}; averaging "
                f"{'it' if len(paths) == 1 else 'all of them'}.")
        paths = paths[-num_last:]
        first, last = checkpoint_step(paths[0]), checkpoint_step(paths[-1])
        if len(paths) > 1 and first is not None and last \
                and last - first > _AVERAGE_SPAN_WARNING * last:
            log(f"Warning: the {len(paths)} checkpoints span steps {first} to {last}, "
                f"{100.0 * (last - first) / last:.0f}% of the run; an average of checkpoints "
                f"that far apart is usually worse than the last one. Save them closer "
                f"together (t2t-trainer --save_checkpoints_steps) or average fewer "
                f"(--num_last_checkpoints).")
        with RunLock(self.averaged_dir, "t2t-avg-checkpoints"):
            self.clean_stale_temporaries(log, folders="averaged")
            model = self.build_model(self.read_hparams(), model_name)
            sums = [np.zeros(w.shape, np.float64) for w in model.weights]
            for path in paths:
                self.restore_weights(model, path)
                for total, w in zip(sums, model.weights):
                    total += np.asarray(w.numpy(), np.float64)
                log(f"read {path}")
            for total, w in zip(sums, model.weights):
                w.assign((total / len(paths)).astype(w.dtype))
            os.makedirs(self.averaged_dir, exist_ok=True)
            # CheckpointManager writes the data first and the `checkpoint` index last,
            # so a kill mid-save leaves the previous average readable.
            manager = self.checkpoint_manager(make_checkpoint(model), _AVERAGES_KEPT,
                                              directory=self.averaged_dir)
            path = self.save_checkpoint(manager, checkpoint_step(paths[-1]))
        log(f"Averaged {_checkpoints(len(paths))} into {path}")
        return path

    # -------------------------------------------------------------- the model
    @staticmethod
    def build_model(hparams: HParams, model_name: str = "transformer"):
        """The registered model `model_name` for `hparams`, its weights created."""
        registry.load_all()
        model = registry.models.get(model_name)(hparams)
        dummy = tf.zeros([1, 8], tf.int32)
        model({"inputs": dummy, "targets": dummy}, training=False)
        return model

    @staticmethod
    def inference_hparams(hparams: HParams) -> HParams:
        """`hparams` for decoding and exporting: float32 compute.

        Mixed precision is a training setting (as in OpenNMT-tf and fairseq):
        the checkpoint's weights are float32 under every policy, and a model
        trained in bfloat16 or float16 decodes in float32 as it would have
        with a float32 run, its beam scores at full precision (XLA's CPU dots
        are no faster in bfloat16 either, benchmarks/RESULTS.md).
        """
        return hparams.replace(mixed_precision="float32")

    @staticmethod
    def restore_weights(model, checkpoint_path: str) -> None:
        """Load the model weights of a training or averaged checkpoint into `model`."""
        try:
            status = make_checkpoint(model).restore(checkpoint_path).expect_partial()
            status.assert_existing_objects_matched()
        except CORRUPT_RESTORE_ERRORS as e:
            raise CorruptCheckpointError.on_restore(checkpoint_path, e) from None
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            first = str(e).split("\n", 1)[0][:200]
            raise UserError(
                f"the checkpoint {checkpoint_path} does not hold this model's weights "
                f"({first}); it was written by another model or version. Decode with the "
                f"hparams.json it was trained with, or retrain. "
                f"Received: checkpoint_path={checkpoint_path!r}") from None

    def load(self, checkpoint_path: str | None = None,
             log: Callable[[str], None] = _stderr) -> TrainedModel:
        """The run's model restored from `checkpoint_path` (default: the newest
        intact checkpoint; each one skipped is said through `log`). A folder of
        checkpoints (`output_dir/best`, `output_dir/averaged`) means its newest
        intact one.

        Reads, in this order, each a one-line UserError when missing or
        corrupt: hparams.json, run.json, the vocabulary, the checkpoint. The
        model computes in float32 whatever the run trained in
        (`inference_hparams`).
        """
        hparams = self.inference_hparams(self.read_hparams())
        record = self.read_run_record()
        vocab = self.vocabulary(record)
        folder = checkpoint_path if checkpoint_path and os.path.isdir(checkpoint_path) \
            else None   # a folder of checkpoints (best/, averaged/): its newest intact
        if checkpoint_path and folder is None:
            self.check_named_checkpoint(checkpoint_path)
        model = self.build_model(hparams, record.model)
        if checkpoint_path and folder is None:
            self.restore_weights(model, checkpoint_path)
        else:
            checkpoint_path = self.restore_newest_intact(
                lambda prefix: self.restore_weights(model, prefix), log, directory=folder)
            if checkpoint_path is None:
                where = folder or self.path
                raise UserError(f"no checkpoint in {where}; train first, or pass "
                                f"--checkpoint_path. Received: output_dir={self.path!r}"
                                + (f", checkpoint_path={folder!r}" if folder else ""))
        return TrainedModel(hparams=hparams, run_record=record, vocab=vocab,
                            checkpoint_path=checkpoint_path, model=model)


# Restoring a damaged checkpoint: a checksum mismatch (DataLossError), a short
# read of a truncated .data file (IndexError "Read less bytes than requested",
# raised by TensorFlow's Python restore), a missing file (NotFoundError).
CORRUPT_RESTORE_ERRORS = (tf.errors.DataLossError, tf.errors.NotFoundError, IndexError)


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _checkpoints(n: int) -> str:
    """"1 checkpoint", "3 checkpoints"."""
    return f"{n} checkpoint{'' if n == 1 else 's'}"
