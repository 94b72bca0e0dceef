"""`TrainingDirectory`: one owner for what a training run writes and every tool reads."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from t2t_revival import registry
from t2t_revival.atomic_file import copy_atomically, write_atomically
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.errors import UserError
from t2t_revival.hparams import HParams
from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
from t2t_revival.run_dir.file_names import (AVERAGED_DIR, CHECKPOINT_PREFIX,
                                            CTRANSLATE2_EXPORT_DIR, EXPORT_DIR, HPARAMS_FILE,
                                            RUN_FILE, VOCAB_FILE, checkpoint_step)
from t2t_revival.run_dir.run_record import RunRecord
from t2t_revival.run_dir.trained_model import TrainedModel

_AVERAGES_KEPT = 3
# Averaging smooths the noise of the last updates; checkpoints spread over more
# than this share of the run mix in a much weaker model (the paper averaged
# checkpoints written 10 minutes apart: a few percent of the run).
_AVERAGE_SPAN_WARNING = 0.25


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
            with open(self.run_file, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise UserError(f"{self.run_file} is missing; --output_dir must be a directory "
                            f"written by t2t-trainer. Received: path={self.run_file!r}") from None
        return RunRecord.from_json(text, self.run_file)

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
        return tf.train.latest_checkpoint(self.path)

    def checkpoints(self) -> list[str]:
        """The training checkpoints' prefixes, oldest first."""
        state = tf.train.get_checkpoint_state(self.path)
        return list(state.all_model_checkpoint_paths) if state else []

    def checkpoint_path(self, checkpoint_path: str | None = None) -> str:
        """`checkpoint_path`, or the latest checkpoint; a UserError when there is none.

        `checkpoint_path` is a checkpoint prefix, or a folder of checkpoints
        (`output_dir/best`, `output_dir/averaged`): then the latest in it.
        """
        path = checkpoint_path or self.latest_checkpoint()
        if path and os.path.isdir(path):
            folder, path = path, tf.train.latest_checkpoint(path)
            if not path:
                raise UserError(f"no checkpoint in the folder {folder} (it has no "
                                f"'checkpoint' index); pass a checkpoint prefix such as "
                                f"{os.path.join(folder, CHECKPOINT_PREFIX)}-<step>. "
                                f"Received: checkpoint_path={folder!r}")
        if not path:
            raise UserError(f"no checkpoint in {self.path}; train first, or pass "
                            f"--checkpoint_path. Received: output_dir={self.path!r}")
        if not tf.io.gfile.exists(path + ".index"):
            raise UserError(f"no checkpoint at {path} (its .index file "
                            f"is missing). Received: checkpoint_path={path!r}")
        return path

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
        paths = self.checkpoints()
        if not paths:
            raise UserError(f"no checkpoints in {self.path}; train first with t2t-trainer. "
                            f"Received: output_dir={self.path}")
        if num_last > len(paths):
            log(f"Only {len(paths)} checkpoints in {self.path}; averaging all of them.")
        paths = paths[-num_last:]
        first, last = checkpoint_step(paths[0]), checkpoint_step(paths[-1])
        if len(paths) > 1 and first is not None and last \
                and last - first > _AVERAGE_SPAN_WARNING * last:
            log(f"Warning: the {len(paths)} checkpoints span steps {first} to {last}, "
                f"{100.0 * (last - first) / last:.0f}% of the run; an average of checkpoints "
                f"that far apart is usually worse than the last one. Save them closer "
                f"together (t2t-trainer --save_checkpoints_steps) or average fewer "
                f"(--num_last_checkpoints).")
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
        path = manager.save(checkpoint_number=checkpoint_step(paths[-1]))
        log(f"Averaged {len(paths)} checkpoints into {path}")
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
    def restore_weights(model, checkpoint_path: str) -> None:
        """Load the model weights of a training or averaged checkpoint into `model`."""
        try:
            status = make_checkpoint(model).restore(checkpoint_path).expect_partial()
            status.assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            first = str(e).split("\n", 1)[0][:200]
            raise UserError(
                f"the checkpoint {checkpoint_path} does not hold this model's weights "
                f"({first}); it was written by another model or version. Decode with the "
                f"hparams.json it was trained with, or retrain. "
                f"Received: checkpoint_path={checkpoint_path!r}") from None

    def load(self, checkpoint_path: str | None = None) -> TrainedModel:
        """The run's model restored from `checkpoint_path` (default: the latest).

        Reads, in this order, each a one-line UserError when missing or
        corrupt: hparams.json, run.json, the vocabulary, the checkpoint.
        """
        hparams = self.read_hparams()
        record = self.read_run_record()
        vocab = self.vocabulary(record)
        checkpoint_path = self.checkpoint_path(checkpoint_path)
        model = self.build_model(hparams, record.model)
        self.restore_weights(model, checkpoint_path)
        return TrainedModel(hparams=hparams, run_record=record, vocab=vocab,
                            checkpoint_path=checkpoint_path, model=model)
