"""`LiteRTProgramCache`: a run's LiteRT programs kept on disk, so that a small
decoding job answers without TensorFlow (issue 61).

A fresh `t2t-decoder` on a few lines spends its wait importing TensorFlow
(5-7 s on 2 cores) and tracing and first running the search (8-13 s), before
steps of milliseconds. The run's LiteRT programs (`export_litert`: the
encoder and the cached decoder step, fixed shapes, XNNPACK's CPU kernels)
need neither: `LiteRTDecoder` runs them under our own beam search with
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
- An entry is an export (`t2t-exporter --format=litert`, run as a child
  process: the decoding process never imports TensorFlow) plus
  `manifest.json` (each file's size and SHA-256), written in a temporary
  folder and renamed into place whole.
- `find` checks an entry against its manifest before use: one that fails
  (a file missing, truncated or changed) is removed and said in one line,
  and converted anew. Interrupted conversions' folders (their process gone)
  are removed.
- At most `MAX_ENTRIES` entries and `MAX_BYTES`: the least recently used go.
  With less than `MIN_FREE_BYTES` free nothing is converted (one line).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from t2t_revival import __version__
from t2t_revival.files.atomic_file import pid_alive, write_atomically
from t2t_revival.settings.decode_hparams import DecodeHParams
from t2t_revival.export.export_source import LITERT_FIXES
from t2t_revival.run_dir.file_names import CHECKPOINT_PREFIX
from t2t_revival.run_dir.training_directory import TrainingDirectory
from t2t_revival.process.xla_compile_cache import ENV, MIN_FREE_BYTES, file_sha256, root_from_environment

FORMAT = 1
"""Bumped when the programs or the loop that runs them change meaning."""
MAX_ENTRIES = 8
MAX_BYTES = 2 << 30
FOLDER = "litert"
"""The programs' folder under the compile cache's root."""
_MANIFEST = "manifest.json"
_TMP_PREFIX = ".tmp-"


class ConversionFailed(Exception):
    """The child `t2t-exporter --format=litert` failed: its last line."""


def checkpoint_prefix(output_dir: str, checkpoint_path: str | None) -> str | None:
    """The checkpoint t2t-decoder would decode, found without TensorFlow: a
    named prefix whose .index exists, else the highest-step `ckpt-N` of the
    folder (`checkpoint_path` a folder, or output_dir). None when there is
    none (the decoder's TensorFlow path then says why)."""
    if checkpoint_path and not os.path.isdir(checkpoint_path):
        return checkpoint_path if os.path.isfile(checkpoint_path + ".index") else None
    folder = checkpoint_path or output_dir
    steps = []
    for path in glob.glob(os.path.join(glob.escape(folder), f"{CHECKPOINT_PREFIX}-*.index")):
        match = re.fullmatch(rf"{CHECKPOINT_PREFIX}-(\d+)\.index", os.path.basename(path))
        if match:
            steps.append((int(match.group(1)), path[:-len(".index")]))
    return max(steps)[1] if steps else None


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
            removed at the process's end.
        prog: the program's name in the lines said.
    """

    def __init__(self, root: str | None, prog: str):
        self.root = root
        self.prog = prog

    @classmethod
    def from_environment(cls, prog: str) -> "LiteRTProgramCache":
        root = root_from_environment()
        return cls(os.path.join(root, FOLDER) if root else None, prog)

    def find(self, key: str) -> str | None:
        """The entry `key`'s folder, checked against its manifest; None when
        there is none (a damaged one is said, removed, and None)."""
        if self.root is None:
            return None
        path = os.path.join(self.root, key)
        if not os.path.isdir(path):
            return None
        problem = _entry_problem(path)
        if problem:
            _say(self.prog, f"ignored a damaged LiteRT program cache entry {path} "
                            f"({problem}); removed, and converted anew")
            shutil.rmtree(path, ignore_errors=True)
            return None
        with contextlib.suppress(OSError):   # the least recently used go first
            os.utime(os.path.join(path, _MANIFEST))
        return path

    def convert(self, key: str, output_dir: str, prefix: str, settings: DecodeHParams,
                usr_dir: str | None = None) -> str:
        """Convert `prefix` in a child `t2t-exporter --format=litert`, check its
        files, keep them as entry `key`; return the entry's folder.

        Raises:
            ConversionFailed: the exporter failed (its last line), the disk has
                less than `MIN_FREE_BYTES` free, or the entry cannot be written.
        """
        root = self.root or _process_folder()
        try:
            os.makedirs(root, exist_ok=True)
            free = shutil.disk_usage(root).free
        except OSError as e:
            raise ConversionFailed(f"cannot write {root} ({e.strerror}); set {ENV}=DIR "
                                   f"to a writable folder") from None
        if free < MIN_FREE_BYTES:
            raise ConversionFailed(f"{free >> 20} MB free on the disk of {root}; free some "
                                   f"space, or set {ENV}=DIR to another disk")
        _remove_abandoned(root)
        work = os.path.join(root, f"{_TMP_PREFIX}{os.getpid()}-{time.time_ns()}")
        try:
            os.mkdir(work)
            run_exporter(work, output_dir, prefix, settings, usr_dir)
            exported = os.path.join(work, "1")
            _write_manifest(exported)
            final = os.path.join(root, key)
            try:
                os.rename(exported, final)
            except OSError:
                if _entry_problem(final):   # not another process's whole entry
                    raise
            _evict(root, keep=key)
            return final
        except OSError as e:
            raise ConversionFailed(f"cannot write the programs in {root} "
                                   f"({e.strerror})") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)


def run_exporter(work: str, output_dir: str, prefix: str, settings: DecodeHParams,
                 usr_dir: str | None) -> None:
    """`t2t-exporter --format=litert` of `prefix` at `settings`' beam settings
    into `work/1/`, in a child process (TensorFlow stays out of this one); a
    failure is `ConversionFailed` with the exporter's last line."""
    beam = ",".join(f"{name}={getattr(settings, name)}" for name in LITERT_FIXES)
    command = [sys.executable, "-m", "t2t_revival.cli.exporter", f"--output_dir={output_dir}",
               "--format=litert", f"--checkpoint_path={prefix}", f"--export_dir={work}",
               "--version=1", f"--decode_hparams={beam}"]
    if usr_dir:
        command.append(f"--t2t_usr_dir={usr_dir}")
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          errors="replace")
    if done.returncode:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        raise ConversionFailed(why.removeprefix("t2t-exporter: "))


def _write_manifest(folder: str) -> None:
    files = {name: {"size": os.path.getsize(os.path.join(folder, name)),
                    "sha256": file_sha256(os.path.join(folder, name))}
             for name in sorted(os.listdir(folder))}
    write_atomically(os.path.join(folder, _MANIFEST),
                     json.dumps({"format": FORMAT, "files": files}, indent=1) + "\n")


def _entry_problem(folder: str) -> str | None:
    """Why the entry `folder` cannot be used, or None when every file its
    manifest lists is there with its size and SHA-256."""
    try:
        with open(os.path.join(folder, _MANIFEST), encoding="utf-8") as f:
            files = json.load(f)["files"]
        for name, record in files.items():
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                return f"{name} is missing"
            size = os.path.getsize(path)
            if size != record["size"]:
                return f"{name} has {size:,} bytes of {record['size']:,}"
            if file_sha256(path) != record["sha256"]:
                return f"{name} has changed"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "its manifest is missing or unreadable"
    return None


def _remove_abandoned(root: str) -> None:
    """The temporary folders of conversions whose process is gone."""
    for path in glob.glob(os.path.join(glob.escape(root), _TMP_PREFIX + "*")):
        pid = os.path.basename(path)[len(_TMP_PREFIX):].split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _evict(root: str, keep: str) -> None:
    """The least recently used entries (by their manifest's time) beyond
    `MAX_ENTRIES` or `MAX_BYTES`; `keep` stays."""
    entries = []
    for path in glob.glob(os.path.join(glob.escape(root), "[0-9a-f]*")):
        with contextlib.suppress(OSError):
            size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(path, "*")))
            entries.append((os.path.getmtime(os.path.join(path, _MANIFEST)), size, path))
    entries.sort(reverse=True)   # the newest first
    total = 0
    for number, (_, size, path) in enumerate(entries):
        total += size
        if os.path.basename(path) != keep and (number >= MAX_ENTRIES or total > MAX_BYTES):
            shutil.rmtree(path, ignore_errors=True)


_own_folder: list[str] = []


def _process_folder() -> str:
    """With the cache off: a temporary folder for this process's programs."""
    if not _own_folder:
        import atexit

        _own_folder.append(tempfile.mkdtemp(prefix="t2t-litert-"))
        atexit.register(shutil.rmtree, _own_folder[0], True)
    return _own_folder[0]


def _say(prog: str, message: str) -> None:
    print(f"{prog}: {message}", file=sys.stderr)
