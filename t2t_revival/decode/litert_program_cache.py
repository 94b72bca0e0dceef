"""`LiteRTProgramCache`: a run's LiteRT programs kept on disk, so that a small
decoding job answers without TensorFlow (issue 61).

A fresh `t2t-decoder` on a few lines spends its wait importing TensorFlow
(5-7 s on 2 cores) and tracing and first running the search (8-13 s), before
steps of milliseconds. The run's LiteRT programs (`export_litert`: the
encoder and the cached decoder step, fixed shapes, XNNPACK's CPU kernels)
need neither: `LiteRTTranslator` runs them under our own beam search with
Keras's numpy backend, about 3 s from process start on the tiny model
(benchmarks/RESULTS.md, first_translation). So t2t-decoder keeps the programs
of each checkpoint and beam setting it decodes that way:

- Where: `<root>/litert/<key>/`, root being the compile cache's
  (`T2T_COMPILE_CACHE`, `xla_compile_cache.root_from_environment`; `off`
  keeps nothing: a `litert=true` job then converts into a folder of its own,
  removed at its end).
- The key (`program_key`): SHA-256 of the checkpoint's .index (its tensor
  table, which holds every tensor's checksum) and its .data files' sizes,
  hparams.json, the vocabulary, the beam settings the programs fix
  (`LITERT_FIXES`), this package's version and `FORMAT`. Read without
  TensorFlow, in milliseconds.
- An entry is an export (`export_litert`, run in a child process,
  `litert_conversion_worker`: the decoding process never imports
  TensorFlow), built at a temporary name and renamed into place whole, its
  files' sizes and SHA-256 in the folder's manifest. The folder, its lock,
  manifest, sweep of killed conversions' leftovers and eviction are
  `files.disk_cache.DiskCache`'s; a conversion holds the lock, so that two
  decoders wanting the same programs convert them once.
- `find` checks an entry against the manifest before use: one that fails
  (a file missing, truncated or changed) is removed and said in one line,
  and converted anew; so is one whose programs do not load (`discard`: not
  a valid Flatbuffer, another converter's output). An entry found or converted is held (`DiskCache.use`)
  until `close` or the process's end: another process's eviction leaves it.
- At most `MAX_ENTRIES` entries and `MAX_BYTES`: the least recently used go.
  With less than `MIN_FREE_BYTES` free nothing is converted (one line).

What it says goes to the `log` its caller passes (`prog: ...` lines).
"""

from __future__ import annotations

import atexit
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable

from t2t_revival import __version__
from t2t_revival.decode.conversion_failed import ConversionFailed
from t2t_revival.decode.export_settings import LITERT_FIXES
from t2t_revival.files.atomic_file import DiskWriteError
from t2t_revival.files.disk_cache import DiskCache, file_sha256
from t2t_revival.process.xla_compile_cache import ENV, MIN_FREE_BYTES, root_from_environment
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.settings.decode_hparams import DecodeHParams

FORMAT = 2
"""Bumped when the programs or the loop that runs them change meaning (2:
the manifest is the folder's, `DiskCache`)."""
MAX_ENTRIES = 8
MAX_BYTES = 2 << 30
FOLDER = "litert"
"""The programs' folder under the compile cache's root."""
WORKER = "t2t_revival.export.litert_conversion_worker"
"""The module the child process runs (`run_exporter`)."""

Log = Callable[[str], None]


def quiet(message: str) -> None:
    """A log that says nothing (the default: the caller passes its own)."""


def checkpoint_prefix(output_dir: str, checkpoint_path: str | None,
                      log: Log = quiet) -> str:
    """The checkpoint t2t-decoder would decode, chosen without TensorFlow by
    the run directory's rules (`TrainingDirectory.checkpoint_to_restore`: the
    `checkpoint` index, the integrity check, each checkpoint skipped said
    through `log`), so that the lines and the choice are the TensorFlow
    path's. A UserError, the TensorFlow path's, when none can be used (none
    there, all damaged, the one named damaged)."""
    return TrainingDirectory(output_dir).checkpoint_to_restore(checkpoint_path, log)


def program_key(output_dir: str, prefix: str, settings: DecodeHParams) -> str:
    """The cache key of `prefix`'s programs at `settings`' beam settings."""
    directory = TrainingDirectory(output_dir)
    digest = hashlib.sha256(json.dumps(
        {"format": FORMAT, "version": __version__,
         **{name: getattr(settings, name) for name in LITERT_FIXES}}, sort_keys=True).encode())
    for path in (prefix + ".index", directory.hparams_file,
                 directory.vocabulary_path(directory.read_run_record())):
        digest.update(file_sha256(path).encode())
    for path in sorted(glob.glob(glob.escape(prefix) + ".data-*")):
        digest.update(f"{os.path.basename(path)}:{os.path.getsize(path)}".encode())
    return digest.hexdigest()[:32]


class LiteRTProgramCache:
    """The LiteRT programs t2t-decoder keeps (see the module docstring).

    Args:
        root: the folder of entries (`<compile cache root>/litert`), or None:
            the cache is off, and `convert` writes to a temporary folder
            removed at `close` (or the process's end).
        prog: the program's name in the lines said.
        log: where those lines go (`prog: ...`, one line each).
    """

    def __init__(self, root: str | None, prog: str, log: Log = quiet):
        self.root = root
        self.prog = prog
        self.log = log
        self.disk = DiskCache(root, MAX_BYTES, MAX_ENTRIES) if root else None
        self._scratch: str | None = None
        atexit.register(self.close)

    @classmethod
    def from_environment(cls, prog: str, log: Log = quiet) -> "LiteRTProgramCache":
        root = root_from_environment()
        return cls(os.path.join(root, FOLDER) if root else None, prog, log)

    def close(self) -> None:
        """Let go of the entries in use; remove the temporary folder (cache off)."""
        if self.disk is not None:
            self.disk.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def find(self, key: str) -> str | None:
        """The entry `key`'s folder, checked against the manifest and held
        (`DiskCache.use`); None when there is none (a damaged one is said,
        removed, and None)."""
        if self.disk is None or not os.path.isdir(self.disk.path(key)):
            return None
        try:
            with self.disk.locked() as entries:
                return self._find_locked(entries, key)
        except (OSError, DiskWriteError):
            return None

    def _find_locked(self, entries: dict, key: str) -> str | None:
        path = self.disk.path(key)
        if not os.path.isdir(path):
            return None
        record = entries.get(key)
        problem = "not written by this cache" if record is None else self.disk.damage(key, record)
        if problem:
            self.log(f"{self.prog}: ignored a damaged LiteRT program cache entry {path} "
                     f"({problem}); removed, and converted anew")
            self.disk.remove(entries, key)
            return None
        self.disk.touch(entries, key)
        self.disk.use(key)
        return path

    def discard(self, path: str, problem: str, say: bool = True) -> None:
        """The entry at `path` (`find`'s or `convert`'s) passed its manifest
        but its programs do not load (`problem`): said in one line (`say`)
        and removed, so that the next `convert` converts anew."""
        if say:
            self.log(f"{self.prog}: ignored a damaged LiteRT program cache entry {path} "
                     f"({problem}); removed, and converted anew")
        key = os.path.basename(path)
        if self.disk is not None and os.path.dirname(path) == self.disk.folder:
            self.disk.release(key)
            try:
                with self.disk.locked() as entries:
                    self.disk.remove(entries, key)
                return
            except (OSError, DiskWriteError):
                pass
        shutil.rmtree(path, ignore_errors=True)

    def convert(self, key: str, output_dir: str, prefix: str, settings: DecodeHParams,
                usr_dir: str | None = None) -> str:
        """Convert `prefix` in a child process (`run_exporter`), keep the
        programs as entry `key`; return the entry's folder. Under the cache's
        lock: a decoder that waited for another's conversion of `key` finds
        it instead of converting again.

        Raises:
            ConversionFailed: the conversion failed (its last line), the disk
                has less than `MIN_FREE_BYTES` free, or the entry cannot be written.
        """
        if self.disk is None:
            if self._scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="t2t-litert-")
            disk = DiskCache(self._scratch, MAX_BYTES, MAX_ENTRIES)
        else:
            disk = self.disk
        root = disk.folder
        try:
            os.makedirs(root, exist_ok=True)
            free = shutil.disk_usage(root).free
        except OSError as e:
            raise ConversionFailed(f"cannot write {root} ({e.strerror}); set {ENV}=DIR "
                                   f"to a writable folder") from None
        if free < MIN_FREE_BYTES:
            raise ConversionFailed(f"{free >> 20} MB free on the disk of {root}; free some "
                                   f"space, or set {ENV}=DIR to another disk")
        work = None
        try:
            with disk.locked() as entries:
                disk.sweep()
                if disk is self.disk:
                    found = self._find_locked(entries, key)
                    if found:
                        return found
                work = disk.temporary(folder=True)
                run_exporter(work, output_dir, prefix, settings, usr_dir)
                disk.add(entries, key, os.path.join(work, "1"))
                if disk is self.disk:
                    disk.use(key)
                disk.evict(entries, keep={key})
            return disk.path(key)
        except (OSError, DiskWriteError) as e:
            raise ConversionFailed(f"cannot write the programs in {root} "
                                   f"({getattr(e, 'strerror', None) or e})") from None
        finally:
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)


def run_exporter(work: str, output_dir: str, prefix: str, settings: DecodeHParams,
                 usr_dir: str | None) -> None:
    """`export_litert` of `prefix` at `settings`' beam settings into `work/1/`,
    in a child process (`litert_conversion_worker`: TensorFlow stays out of
    this one; it ends when this process does, even killed: `parent_death`); a
    failure is `ConversionFailed` with the child's last line."""
    request = {"output_dir": output_dir, "checkpoint_path": prefix, "export_dir": work,
               "usr_dir": usr_dir or "", "parent_pid": os.getpid(),   # it dies with us
               "beam": {name: getattr(settings, name) for name in LITERT_FIXES}}
    done = subprocess.run([sys.executable, "-m", WORKER, json.dumps(request)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          errors="replace")
    if done.returncode:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise ConversionFailed(lines[-1] if lines else f"exit status {done.returncode}")
