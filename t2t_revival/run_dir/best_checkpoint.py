"""`BestCheckpoint`: `output_dir/best/`, the checkpoint with the best dev metric so far.

    output_dir/best/
      ckpt-<step>.index, ckpt-<step>.data-*   a copy (not a link) of the training
                                              checkpoint: it outlives the
                                              --keep_checkpoint_max rotation
      checkpoint                              TensorFlow's index (relative path),
                                              so the folder itself is a
                                              --checkpoint_path
      best.json                               `BestRecord`: step, metric, value

A new best is built complete in `output_dir/.best.incomplete/` (its record
written first as best.json.pending, renamed best.json last), then swapped in
by `atomic_file.replace_directory`: the old best/ stays until the new one is
complete, and a kill at any moment leaves a readable best/ (or, where the
system cannot swap folders in one step, a complete folder that `recover`
puts back on the next start). The better checkpoint of an update a kill
interrupted is not lost: `recover` swaps in its complete folder, or copies
it again from the training checkpoint it names.

No TensorFlow here: the `checkpoint` index is a two-line text file.
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Callable

from t2t_revival.files.atomic_file import (FILE_MODE, disk_failure, disk_failure_fix,
                                     old_directory_name, replace_directory, write_atomically)
from t2t_revival.errors import UserError
from t2t_revival.run_dir.best_record import BestRecord
from t2t_revival.run_dir.file_names import (BEST_DIR, BEST_FILE, BEST_PENDING_FILE,
                                            CHECKPOINT_INDEX)


class BestCheckpoint:
    """The best/ folder of the training directory `output_dir`.

    The trainer's chief writes it (`update`, `recover`); the decoder and the
    exporters read it as any checkpoint folder (`--checkpoint_path=.../best`).
    """

    def __init__(self, output_dir: str):
        self.output_dir = str(output_dir)
        self.path = os.path.join(self.output_dir, BEST_DIR)
        self.incomplete = os.path.join(self.output_dir, f".{BEST_DIR}.incomplete")
        self.old = old_directory_name(self.path)

    @property
    def record_file(self) -> str:
        return os.path.join(self.path, BEST_FILE)

    def record(self) -> BestRecord | None:
        """best.json, or None when there is no best/ yet."""
        try:
            return BestRecord.load(self.record_file)
        except FileNotFoundError:
            return None

    def checkpoint_path(self) -> str | None:
        """The prefix of the best checkpoint (`output_dir/best/ckpt-<step>`), or None."""
        record = self.record()
        return os.path.join(self.path, record.checkpoint) if record else None

    # ------------------------------------------------------------- writing
    def recover(self, log: Callable[[str], None] | None = None) -> list[str]:
        """Finish or clean what an interrupted `update` left; put best/ back if
        it is missing. Returns the leftover folders removed.

        Called when the trainer starts (on the chief: `clean_leftovers`) and
        before the first evaluation. A complete new folder (best.json is
        written last) wins over the old one when its record supersedes
        best/'s; a folder cut short whose record (best.json.pending) does is
        copied again from the training checkpoint it names, when that is still
        there. `log` (optional) hears which update was finished.
        """
        if not os.path.isdir(self.path):
            for candidate in (self.incomplete, self.old):
                if os.path.isfile(os.path.join(candidate, BEST_FILE)):
                    os.replace(candidate, self.path)
                    break
        finished = self._finish_interrupted_update()
        if finished is not None and log is not None:
            log(f"Finished the best/ update a kill interrupted: best/ holds "
                f"{finished.describe()}.")
        removed = [leftover for leftover in (self.incomplete, self.old)
                   if os.path.lexists(leftover)]
        for leftover in removed:
            shutil.rmtree(leftover, ignore_errors=True)
        return removed

    def _finish_interrupted_update(self) -> BestRecord | None:
        """Swap in .best.incomplete if complete, or redo its copy from the
        training checkpoint its pending record names, when that record
        supersedes best/'s (not the old folder an interrupted swap left there).
        Returns the record now in best/, or None when nothing was finished."""
        current = self.record() if os.path.isdir(self.path) else None
        for name, complete in ((BEST_FILE, True), (BEST_PENDING_FILE, False)):
            try:
                record = BestRecord.load(os.path.join(self.incomplete, name))
            except (OSError, UserError):
                continue
            if not record.supersedes(current):
                return None
            if complete:
                replace_directory(self.incomplete, self.path)
                return record
            source = os.path.join(self.output_dir, record.checkpoint)
            if not os.path.isfile(source + ".index"):
                return None   # rotated away since: nothing left to copy
            self.update(source, record)
            return record
        return None

    def update(self, checkpoint_prefix: str, record: BestRecord) -> str:
        """Make a copy of the checkpoint `checkpoint_prefix` the new best/; return
        its new prefix.

        `record.checkpoint` must be the prefix's base name (e.g. "ckpt-300").
        """
        name = os.path.basename(checkpoint_prefix)
        if record.checkpoint != name:
            raise ValueError(f"the record names {record.checkpoint}, the checkpoint is {name}")
        files = [p for p in glob.glob(glob.escape(checkpoint_prefix) + ".*")
                 if p.endswith(".index") or ".data-" in p]
        if not any(p.endswith(".index") for p in files):
            raise UserError(f"no checkpoint at {checkpoint_prefix} to copy into "
                            f"{self.path}. Received: checkpoint_prefix={checkpoint_prefix!r}")
        shutil.rmtree(self.incomplete, ignore_errors=True)
        try:
            os.makedirs(self.incomplete)
            os.chmod(self.incomplete, 0o755)
            # First: what is being copied, so `recover` can finish a copy a kill cut short.
            pending = os.path.join(self.incomplete, BEST_PENDING_FILE)
            write_atomically(pending, record.to_json())
            for source in files:
                target = os.path.join(self.incomplete, os.path.basename(source))
                shutil.copyfile(source, target)
                os.chmod(target, FILE_MODE)
            write_atomically(os.path.join(self.incomplete, CHECKPOINT_INDEX),
                             f'model_checkpoint_path: "{name}"\n'
                             f'all_model_checkpoint_paths: "{name}"\n')
            # Last: its presence marks the folder complete (see `recover`).
            os.replace(pending, os.path.join(self.incomplete, BEST_FILE))
        except (OSError, UserError) as e:
            shutil.rmtree(self.incomplete, ignore_errors=True)
            reason = disk_failure(e)
            if reason is None:
                raise
            kept = "best/ still holds the previous best" if os.path.isdir(self.path) \
                else "there is no best/ yet"
            raise UserError(f"could not copy the new best checkpoint {checkpoint_prefix} "
                            f"into {self.path} ({reason}); {kept}, and the checkpoint itself "
                            f"is saved; {disk_failure_fix(reason)}, then rerun the same "
                            f"command to resume. Received: output_dir={self.output_dir!r}"
                            ) from None
        replace_directory(self.incomplete, self.path)
        return os.path.join(self.path, name)
