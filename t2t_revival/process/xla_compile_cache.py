"""`XlaCompileCache`: compiled XLA programs kept on disk between processes,
written atomically, checked before use, a damaged entry reported and ignored
(issue 61).

Compiling is most of what a fresh `t2t-decoder` spends before its first
output on a test set (seconds per search program). (Not the trainer: its
programs' keys differ from run to run, measured 2026-11-28, so a cache
would only fill up.) TensorFlow can keep what XLA compiles on disk
(`TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR`), but it writes an
entry in place, with no temporary name, and reads one back with no check:
a truncated entry (a kill or a full disk mid-write) makes every later run
fail on its first batch, and two processes sharing the folder read each
other's half-written entries (benchmarks/history/decoding.md, 2026-11-27).
So TensorFlow never sees the shared folder itself:

- The cache is a folder per TensorFlow version and CPU
  (`<root>/tf<version>-<cpu>/`; a program compiled for one CPU may not run on
  another) holding the entries and `manifest.json`: each entry's size,
  modification time and SHA-256, written when it was published.
- A process (`open`) checks every entry the manifest lists against the file
  (size and time; the SHA-256 when those changed) and hard-links those that
  pass into a private folder of its own, which it names to TensorFlow. An
  entry that fails (truncated, garbage, written by another TensorFlow version
  or CPU, or not in the manifest) is deleted and said in one line; it is
  compiled anew.
- At the end of the process (or at `publish`), what TensorFlow wrote into the
  private folder is checked (a complete protocol-buffer message), copied into
  the shared folder under a temporary name and renamed, and the manifest is
  rewritten atomically, under a lock; the private folder goes. A process
  killed before that leaves only its private folder, which the next `open`
  removes. (The folder, its lock, manifest, temporary names, sweep and
  eviction are `files.disk_cache.DiskCache`'s.)
- The least recently used entries go once the folder passes `MAX_BYTES` or
  `MAX_ENTRIES`. With less than `MIN_FREE_BYTES` free on its disk the cache
  stays off for the process (one line): TensorFlow fails a compile whose
  program it cannot write. Should the disk fill up during the job anyway,
  the decoder says so in one line and decodes the rest without XLA
  (`xla_cache_full_warning`; `Decoder.translate`).

`T2T_COMPILE_CACHE` names the root (default `~/.cache/t2t-revival/xla`, or
`$XDG_CACHE_HOME/t2t-revival/xla`); `T2T_COMPILE_CACHE=off` turns it off. A
`--tf_xla_persistent_cache_directory` of the user's own in `TF_XLA_FLAGS` is
left alone (and this cache stays off). What the cache has to say (an entry
ignored, the cache off) goes to the `log` its caller passes (`open`).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import os
import platform
import shutil
from typing import Callable

from t2t_revival.files.atomic_file import (TEMPORARY_PREFIX, DiskWriteError, disk_failure,
                                           disk_failure_fix)
from t2t_revival.files.disk_cache import DiskCache

ENV = "T2T_COMPILE_CACHE"
"""The environment variable naming the cache's root folder, or `off`."""
OFF = ("off", "none", "0", "false")
MAX_BYTES = 2 << 30
"""The shared folder's size beyond which the least recently used entries go."""
MIN_FREE_BYTES = 512 << 20
"""Free space below which the cache stays off: TensorFlow fails a compile
whose program it cannot write (the decoder then says so in one line)."""
MAX_ENTRIES = 500
"""As many entries, at most (each process checks every entry the manifest lists)."""
_FLAG = "--tf_xla_persistent_cache_directory"
_ENTRY_SUFFIX = ".pb"

Log = Callable[[str], None]


def quiet(message: str) -> None:
    """A log that says nothing (the default: the caller passes its own)."""


def default_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "t2t-revival", "xla")


def root_from_environment() -> str | None:
    """The cache root `T2T_COMPILE_CACHE` names (or the default); None when off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    return os.path.expanduser(value) if value else default_root()


@functools.lru_cache(maxsize=None)
def _cpu_fingerprint() -> str:
    """A short hash of this CPU's model and instruction-set flags."""
    described = platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n\n", 1)[0].splitlines()
        described += "".join(line for line in lines
                             if line.startswith(("model name", "flags", "Features")))
    return hashlib.sha256(described.encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def _tensorflow_version() -> str:
    from importlib import metadata

    for name in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(name)
    return "unknown"


def is_complete_message(data: bytes) -> bool:
    """Whether `data` parses as protocol-buffer fields to its last byte with
    the three fields of TensorFlow's XlaSerializedCacheEntry (key, the HLO
    module, the executable): what a truncated or garbled entry is not."""
    from t2t_revival.files.protobuf_wire import top_level_fields

    try:
        numbers = {number for number, _ in top_level_fields(data)}
    except ValueError:
        return False
    return {1, 2, 3} <= numbers


@dataclasses.dataclass
class XlaCompileCache:
    """The compile cache of this process: `open` it before the first XLA
    compile, and hold it (it publishes and cleans up at `close`, or at the
    process's end)."""

    disk: DiskCache
    """The folder of this TensorFlow version and CPU: entries and manifest."""
    private: str
    """This process's folder, named to TensorFlow (entries hard-linked in)."""
    prog: str
    log: Log = quiet
    published: bool = False
    _linked: set = dataclasses.field(default_factory=set)
    """The entries linked in from, or published to, the shared folder."""

    @property
    def shared(self) -> str:
        return self.disk.folder

    @classmethod
    def open(cls, prog: str, root: str | None = None,
             log: Log = quiet) -> "XlaCompileCache | None":
        """Check the shared entries, link the good ones into a private folder,
        and name it to TensorFlow (`TF_XLA_FLAGS`). None (nothing done) when
        the cache is off, the user named a folder of their own, or the root
        cannot be written (said in one line, `prog: ...`, through `log`)."""
        root = root_from_environment() if root is None else root
        flags = _strip_private_folder(os.environ.get("TF_XLA_FLAGS", ""))
        if root is None or _FLAG in flags:
            return None
        disk = DiskCache(os.path.join(root, f"tf{_tensorflow_version()}-{_cpu_fingerprint()}"),
                         MAX_BYTES, MAX_ENTRIES)
        try:
            os.makedirs(disk.folder, exist_ok=True)
            free = shutil.disk_usage(disk.folder).free
            if free < MIN_FREE_BYTES:   # TensorFlow fails a compile it cannot write
                log(f"{prog}: the XLA compile cache is off: {free >> 20} MB free on the disk "
                    f"of {root}; free some space, or set {ENV}=DIR to another "
                    f"disk, or {ENV}=off")
                return None
            private = disk.temporary(folder=True)
        except OSError as e:
            log(f"{prog}: the XLA compile cache is off: cannot write {root} ({e.strerror}); "
                f"set {ENV}=DIR to a writable folder, or {ENV}=off")
            return None
        cache = cls(disk, private, prog, log)
        with contextlib.suppress(OSError, DiskWriteError):   # a full disk: start empty
            cache._link_good_entries()
        os.environ["TF_XLA_FLAGS"] = f"{flags} {_FLAG}={private}".strip()
        atexit.register(cache.close)
        return cache

    def _link_good_entries(self) -> None:
        bad: dict[str, str] = {}
        with self.disk.locked() as manifest:
            self.disk.sweep()
            for name in self.disk.names():
                path = self.disk.path(name)
                if not name.endswith(_ENTRY_SUFFIX) or not os.path.isfile(path):
                    continue
                problem = _entry_problem(self.disk, name, manifest.get(name))
                if problem:
                    bad[name] = problem
                    self.disk.remove(manifest, name)
                    continue
                link = os.path.join(self.private, name)
                try:
                    os.link(path, link)
                except OSError:
                    shutil.copyfile(path, link)
                self.disk.touch(manifest, name)
                self._linked.add(name)
            for name in set(manifest) - set(self.disk.names()):
                manifest.pop(name)
        if bad:
            kinds = sorted(set(bad.values()))
            self.log(f"{self.prog}: ignored {len(bad)} damaged XLA compile cache "
                     f"entr{'y' if len(bad) == 1 else 'ies'} in {self.shared} "
                     f"({'; '.join(kinds)}); removed, and compiled anew when needed")

    def publish(self) -> int:
        """Move what TensorFlow wrote since `open` (complete entries only) into
        the shared folder; returns how many entries it added."""
        added = 0
        with contextlib.suppress(OSError, DiskWriteError), self.disk.locked() as manifest:
            for name in sorted(os.listdir(self.private)):
                path = os.path.join(self.private, name)
                if not name.endswith(_ENTRY_SUFFIX) or name in manifest:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                if name in self._linked or not is_complete_message(data):
                    continue   # linked in (or rewritten), or half-written
                tmp = self.disk.temporary()
                try:
                    with open(tmp, "wb") as f:
                        f.write(data)
                        f.flush()
                        os.fsync(f.fileno())
                    self.disk.add(manifest, name, tmp, tensorflow=_tensorflow_version(),
                                  cpu=_cpu_fingerprint())
                finally:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)
                self._linked.add(name)
                added += 1
            self.disk.evict(manifest)
        return added

    def close(self) -> None:
        """`publish`, then remove the private folder (at the process's end)."""
        if self.published:
            return
        self.published = True
        with contextlib.suppress(Exception):
            self.publish()
        shutil.rmtree(self.private, ignore_errors=True)


def cache_disk_full(error: BaseException) -> DiskWriteError | None:
    """The one line for a search whose compile failed because TensorFlow could
    not write the program into the cache (it fails the compile, with a
    ResourceExhaustedError naming the file); None for any other error."""
    reason = disk_failure(error)
    if reason is None:
        return None
    return DiskWriteError(
        f"decoding stopped: TensorFlow could not write a compiled program to the XLA "
        f"compile cache ({reason}); {disk_failure_fix(reason)}, or set {ENV}=off, "
        f"then rerun", reason)


def xla_cache_full_warning(reason: str) -> str:
    """The line of a decode that goes on without XLA because TensorFlow could
    not write a compiled program into the cache (`reason`: no space, ...)."""
    return (f"Warning: TensorFlow could not write a compiled program to the XLA compile "
            f"cache ({reason}): decoding on without XLA (slower, the output complete); "
            f"{disk_failure_fix(reason)} (the cache's), or set {ENV}=DIR to another disk, "
            f"or {ENV}=off")


def _strip_private_folder(flags: str) -> str:
    """TF_XLA_FLAGS without a private folder of ours (a parent process's, inherited)."""
    kept = [flag for flag in flags.split()
            if not (flag.startswith(f"{_FLAG}=")
                    and os.path.basename(flag.split("=", 1)[1]).startswith(TEMPORARY_PREFIX))]
    return " ".join(kept)


def _entry_problem(disk: DiskCache, name: str, record: dict | None) -> str | None:
    """Why entry `name` cannot be used, or None when it can."""
    if record is None:
        return "not written by this cache"
    if record.get("cpu") != _cpu_fingerprint():
        return f"written by TensorFlow {record.get('tensorflow')} on another CPU"
    if record.get("tensorflow") != _tensorflow_version():
        return f"written by TensorFlow {record.get('tensorflow')}"
    return disk.damage(name, record)
