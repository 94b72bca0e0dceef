"""`TrainingDirectory`: one owner for what a training run writes and every tool reads."""

from __future__ import annotations

import contextlib
import os
import functools
import shutil
from typing import TYPE_CHECKING, Any, Callable, Sequence

from t2t_revival.files.atomic_file import copy_atomically
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.data.vocabulary_file import load_vocabulary, vocabulary_in
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams
from t2t_revival.run_dir.best_checkpoint import BestCheckpoint
from t2t_revival.run_dir.file_names import (AVERAGED_DIR, CTRANSLATE2_EXPORT_DIR, EXPORT_DIR,
                                            LITERT_EXPORT_DIR,
                                            HPARAMS_FILE, RUN_FILE, VOCAB_FILE, checkpoint_step)
from t2t_revival.run_dir.run_lock import RunLock
from t2t_revival.run_dir.run_record import RunRecord

if TYPE_CHECKING:   # TensorFlow's; imported on first use (see `checkpoints`)
    from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder, Log

_AVERAGES_KEPT = 3
# Averaging smooths the noise of the last updates; checkpoints spread over more
# than this share of the run mix in a much weaker model (the paper averaged
# checkpoints written 10 minutes apart: a few percent of the run).
_AVERAGE_SPAN_WARNING = 0.25


class TrainingDirectory:
    """A training directory (`--output_dir`): its files and its checkpoint folders.

    Knows the directory's layout (`file_names`), reads and writes the run
    files (hparams.json, run.json, the vocabulary copy), and hands out its
    three checkpoint folders (`CheckpointFolder`): `checkpoints` (the
    trainer's), `best` (`BestCheckpoint`) and `averaged`. The trainer writes
    through it; the decoder, the exporters and t2t-avg-checkpoints read
    through it (a model is built from it by `models.TrainedModel.load`).
    It answers, once for every engine, which checkpoint a reader restores
    (`checkpoint_to_restore`, without TensorFlow) and which run holds a
    checkpoint (`of_checkpoint`).

    Args:
        path: the directory; the trainer creates it, the readers need it.
        keep: how many training checkpoints `checkpoints.save` keeps.
    """

    def __init__(self, path: str | os.PathLike, keep: int | None = None):
        self.path = str(path)
        self._keep = keep

    # The checkpoint folders import TensorFlow (seconds), so they are made on
    # first use: reading the run files (a decoder checking hparams.json before
    # the model loads) imports none of it.
    @functools.cached_property
    def checkpoints(self) -> CheckpointFolder:
        """The training checkpoints `ckpt-<step>` (`CheckpointFolder`)."""
        from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder

        return CheckpointFolder(self.path, self._keep)

    @functools.cached_property
    def averaged(self) -> CheckpointFolder:
        """t2t-avg-checkpoints' output, `averaged/ckpt-<step>`."""
        from t2t_revival.run_dir.checkpoint_folder import CheckpointFolder

        return CheckpointFolder(self.averaged_dir, _AVERAGES_KEPT)

    @classmethod
    def of_checkpoint(cls, checkpoint: str) -> "TrainingDirectory | None":
        """The training directory holding `checkpoint` (a prefix, or a folder of
        checkpoints: `best/`, `averaged/`, a run itself): its own folder or the
        one above, whichever holds hparams.json or run.json; None when neither
        does (a bare checkpoint). The one answer to "which run is this"."""
        folder = checkpoint if os.path.isdir(checkpoint) else \
            os.path.dirname(checkpoint) or "."
        for candidate in (folder, os.path.dirname(os.path.abspath(folder))):
            if any(os.path.isfile(os.path.join(candidate, name))
                   for name in (HPARAMS_FILE, RUN_FILE)):
                return cls(candidate)
        return None

    @classmethod
    def holding(cls, checkpoint: str, default: str) -> str:
        """The path of `of_checkpoint(checkpoint)`; `default` when there is none."""
        directory = cls.of_checkpoint(checkpoint)
        return directory.path if directory is not None else default

    def checkpoint_to_restore(self, checkpoint_path: str | None, log: Log,
                              restore: Callable[[str], None] | None = None) -> str:
        """The checkpoint a reader of this run restores, whichever engine reads
        it (`CheckpointFiles.find`, no TensorFlow): `checkpoint_path` checked
        (a prefix), or the newest intact checkpoint of that folder (`best/`,
        `averaged/`) or of this directory, the `checkpoint` index read first;
        an unreadable index and each damaged checkpoint skipped said in one
        line through `log`. With `restore` (the TensorFlow path's), it is
        called on the one chosen, and one whose restore finds a damaged byte
        is skipped too. A one-line UserError when none can be restored.
        """
        from t2t_revival.run_dir.checkpoint_files import CheckpointFiles

        return CheckpointFiles(self.path).find(checkpoint_path, log, restore)

    def is_other_run(self, checkpoint: str | None) -> bool:
        """Whether the checkpoint (or folder) `checkpoint` lies in another
        training directory than this one (whose hparams and vocabulary would
        not be its own)."""
        if not checkpoint:
            return False
        run = self.holding(checkpoint, self.path)
        return os.path.realpath(run) != os.path.realpath(self.path)

    def other_runs(self, checkpoint_paths: Sequence[str]) -> bool:
        """Whether `checkpoint_paths` decode as an ensemble rather than as this
        run's own model: several of them, or one of another training
        directory (built from its own hparams.json, its vocabulary checked
        against this run's: `Ensemble.load`). The one definition of the rule:
        the TensorFlow decoder then loads an `Ensemble`, the LiteRT path
        declines (its programs are one run's model) and an export refuses (it
        would pair this run's hparams and vocabulary with other weights)."""
        return len(checkpoint_paths) > 1 or bool(
            checkpoint_paths and self.is_other_run(checkpoint_paths[0]))

    # ------------------------------------------------------------------ paths
    @property
    def hparams_file(self) -> str:
        return os.path.join(self.path, HPARAMS_FILE)

    @property
    def run_file(self) -> str:
        return os.path.join(self.path, RUN_FILE)

    @property
    def vocab_file(self) -> str:
        """The run's vocabulary copy: vocab.model, or vocab.subwords (a
        tensor2tensor vocabulary) where only that one is there (`run.json`
        may name another)."""
        return vocabulary_in(self.path)

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
    def litert_export_dir(self) -> str:
        return os.path.join(self.export_dir, LITERT_EXPORT_DIR)

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
        except OSError as e:   # no permission to read it
            raise RunRecord.corrupt(self.run_file, e.strerror or str(e)) from None

    def write_run_files(self, hparams: HParams, record: RunRecord, vocab_source: str) -> None:
        """hparams.json, a copy of the vocabulary `vocab_source`, then run.json.

        Each is written atomically, with mode 0644, so other users (a serving
        container, a teammate) can read the directory.
        """
        os.makedirs(self.path, exist_ok=True)
        hparams.save(self.hparams_file)
        copy_atomically(vocab_source, os.path.join(self.path, record.vocab_file))
        record.save(self.run_file)

    def vocabulary_path(self, record: RunRecord) -> str:
        """The path of the run's vocabulary: run.json's `vocab_file`; a run.json
        without one (the default, vocab.model) in a directory that holds only
        vocab.subwords names that one."""
        if record.vocab_file == VOCAB_FILE:
            return self.vocab_file
        return os.path.join(self.path, record.vocab_file)

    def vocabulary(self, record: RunRecord) -> SubwordVocabulary | T2TSubwordVocabulary:
        """The run's copy of the shared vocabulary (SentencePiece or tensor2tensor's)."""
        path = self.vocabulary_path(record)
        if not os.path.isfile(path):
            raise UserError(f"the vocabulary {path} is missing from the training "
                            f"directory; rerun t2t-trainer there to restore it. "
                            f"Received: output_dir={self.path!r}")
        return load_vocabulary(path)

    # ------------------------------------------------------------ maintenance
    def clean_leftovers(self, log: Log | None = None, averaged: bool = False) -> list[str]:
        """Remove what killed saves and writes left behind; return the paths.

        Only our own patterns, only inside this directory: by default (the
        trainer, holding the directory's `RunLock`, so no live save is
        removed) its own folder's checkpoint leftovers, run-file
        temporaries and an interrupted best/ update's folders; with `averaged` (t2t-avg-checkpoints, holding
        averaged/'s lock) the checkpoint leftovers of averaged/. (A killed
        export's leftovers are removed by the next export:
        `write_version_directory`.)
        """
        if log is None:
            from t2t_revival.run_dir.checkpoint_folder import stderr_log as log
        removed = self.averaged.leftovers() if averaged else \
            self.checkpoints.leftovers(run_files=True)
        for path in removed:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(path)
        if not averaged:   # a best/ update a kill interrupted (`BestCheckpoint.recover`)
            removed += self.best.recover(log)
        if removed:
            log(f"Removed {len(removed)} leftover(s) of an interrupted run: "
                f"{', '.join(os.path.relpath(p, self.path) for p in removed)}.")
        return removed

    def average_last(self, build_model: Callable[[HParams], Any], num_last: int,
                     log: Log = print) -> str:
        """Average the model weights of the last `num_last` intact checkpoints
        into `averaged/ckpt-<last step>` (paper 6.1); return its prefix.

        `build_model(hparams)`: the model the checkpoints are read into, built
        for this run's hparams (`models.build_model`); it ends up holding the
        average. `t2t-decoder --checkpoint_path` reads the result like any
        checkpoint.
        """
        paths = self.checkpoints.intact(log)
        if not paths:
            damaged = self.checkpoints.none_intact()
            if damaged:
                raise damaged
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
        with RunLock(self.averaged.path, "t2t-avg-checkpoints"):
            self.clean_leftovers(log, averaged=True)
            model = build_model(self.read_hparams())
            # A kill mid-save leaves the previous average readable (the index is written last).
            path = self.averaged.average(model, paths, log)
        log(f"Averaged {_checkpoints(len(paths))} into {path}")
        return path


def require_directory(output_dir: str) -> None:
    """A UserError when the training directory `output_dir` does not exist."""
    if not os.path.isdir(output_dir):
        raise UserError(f"the training directory {output_dir} does not exist; pass the "
                        f"--output_dir of t2t-trainer. Received: output_dir={output_dir!r}")


def _checkpoints(n: int) -> str:
    """"1 checkpoint", "3 checkpoints"."""
    return f"{n} checkpoint{'' if n == 1 else 's'}"
