"""`DiskCache`: one owner for a folder of entries that processes share.

The XLA compile cache (`process/xla_compile_cache.py`: a file an entry) and
the LiteRT program cache (`export/litert_program_cache.py`: a folder an
entry) keep what they keep the same way, here:

- `locked`: the folder's exclusive lock (fcntl), held by whoever reads or
  writes its manifest or its entries' names; it yields the manifest's
  entries, written back atomically at the block's end.
- `manifest.json`: each entry's size and, per file, size, modification time
  and SHA-256 (`fingerprint`), with whatever else its cache records; `damage`
  says why an entry no longer matches (truncated, changed, a file missing,
  its record damaged: a field missing or of the wrong type).
- An entry is built at a `temporary` name in the folder and renamed into
  place whole (`add`); what a killed process left at such a name is removed
  by the next `sweep` (`atomic_file.remove_dead_temporaries`: one naming
  scheme, one sweeper).
- `evict`: the least recently used entries go once the folder holds over
  `max_bytes` or `max_entries`, except those asked to stay and those in use:
  `use` holds a shared lock on an entry until `close` (or the process ends),
  so another process's eviction leaves it alone.

    cache = DiskCache(folder, max_bytes=2 << 30, max_entries=8)
    with cache.locked() as entries:
        cache.sweep()
        built = cache.temporary(folder=True)
        ...                                    # write the entry's files in `built`
        cache.add(entries, "key", built)
        cache.evict(entries, keep={"key"})
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from typing import Iterator

from t2t_revival.files.atomic_file import (remove_dead_temporaries, temporary_folder,
                                           temporary_name, write_atomically)

MANIFEST = "manifest.json"
LOCK = ".lock"
FORMAT = 1


def file_sha256(path: str) -> str:
    """The SHA-256 of a file's bytes, hex (read a megabyte at a time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_record(path: str) -> dict:
    stat = os.stat(path)
    return {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(path)}


def fingerprint(path: str) -> dict:
    """What `damage` checks an entry against: a file's size, modification
    time and SHA-256; a folder's size and those of each of its files."""
    if not os.path.isdir(path):
        return _file_record(path)
    files = {name: _file_record(os.path.join(path, name)) for name in sorted(os.listdir(path))}
    return {"bytes": sum(record["bytes"] for record in files.values()), "files": files}


_FILE_FIELDS = (("bytes", int), ("mtime_ns", int), ("sha256", str))


def _record_problem(record) -> str | None:
    """What is wrong with a manifest record's shape (a field missing or of
    the wrong type: a manifest edited or written by something else), or None."""
    if not isinstance(record, dict):
        return "not a record"
    files = record.get("files") if "files" in record else {None: record}
    if not isinstance(files, dict) or not files:
        return "no files"
    for name, file_record in files.items():
        if not isinstance(file_record, dict):
            return f"{name}: not a record"
        for field, kind in _FILE_FIELDS:
            value = file_record.get(field)
            if not isinstance(value, kind) or isinstance(value, bool):
                return (f"{name}: " if name else "") + \
                    f"its {field!r} is {'missing' if value is None else repr(value)}"
    value = record.get("bytes")
    if not isinstance(value, int) or isinstance(value, bool):
        return f"its 'bytes' is {'missing' if value is None else repr(value)}"
    return None


def _number(record: dict, field: str) -> float:
    """A record's number `field` (bytes, used), 0 when missing or not a number."""
    value = record.get(field)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _file_damage(path: str, record: dict, name: str | None) -> str | None:
    """Why the file `path` differs from its record (its SHA-256 read only when
    its time changed; a match updates the time), or None."""
    if not os.path.isfile(path):
        return f"{name} is missing" if name else "it is missing"
    size = os.path.getsize(path)
    if size != record.get("bytes"):
        return f"{name} has {size:,} bytes of {record.get('bytes', 0):,}" if name else \
            f"truncated or overwritten: {size:,} bytes of {record.get('bytes', 0):,}"
    mtime = os.stat(path).st_mtime_ns
    if mtime != record.get("mtime_ns"):
        if file_sha256(path) != record.get("sha256"):
            return f"{name} has changed" if name else \
                "its contents changed since it was written"
        record["mtime_ns"] = mtime
    return None


class DiskCache:
    """A folder of entries shared by processes (see the module docstring).

    Args:
        folder: the folder (created on the first `locked`).
        max_bytes, max_entries: the limits past which `evict` removes the
            least recently used entries.

    Attributes: folder, max_bytes, max_entries.
    """

    def __init__(self, folder: str, max_bytes: int, max_entries: int):
        self.folder = folder
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._in_use: dict[str, int] = {}   # entry name -> the descriptor holding its lock

    def path(self, name: str) -> str:
        """Where entry `name` lies."""
        return os.path.join(self.folder, name)

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict]:
        """Hold the folder's exclusive lock; yield the manifest's entries (name
        -> record), written back atomically when the block ends without an
        error (an unreadable manifest reads as no entries)."""
        os.makedirs(self.folder, exist_ok=True)
        with open(os.path.join(self.folder, LOCK), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                entries = self._read_manifest()
                yield entries
                write_atomically(os.path.join(self.folder, MANIFEST),
                                 json.dumps({"format": FORMAT, "entries": entries}, indent=1,
                                            sort_keys=True) + "\n")
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read_manifest(self) -> dict:
        try:
            with open(os.path.join(self.folder, MANIFEST), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) \
            and data.get("format") == FORMAT else None
        if not isinstance(entries, dict):
            return {}
        return {name: record for name, record in entries.items() if isinstance(record, dict)}

    def temporary(self, folder: bool = False) -> str:
        """A temporary name in the cache's folder to build an entry at (a
        folder created, with `folder`); `add` renames it into place."""
        return temporary_folder(self.folder) if folder else temporary_name(self.folder)

    def sweep(self) -> list[str]:
        """Remove what killed processes left at `temporary` names (under `locked`)."""
        return remove_dead_temporaries(self.folder)

    def names(self) -> list[str]:
        """The names in the folder that may be entries: not the cache's own
        files, not temporaries (dot names)."""
        with contextlib.suppress(FileNotFoundError):
            return sorted(n for n in os.listdir(self.folder)
                          if not n.startswith(".") and n != MANIFEST)
        return []

    def damage(self, name: str, record: dict) -> str | None:
        """Why entry `name` no longer matches its `record` (a file truncated,
        changed or missing), or None when it does."""
        path = self.path(name)
        malformed = _record_problem(record)
        if malformed:
            return f"its manifest record is damaged ({malformed})"
        if "files" not in record:
            return _file_damage(path, record, None)
        files = record["files"]
        if not os.path.isdir(path) or not isinstance(files, dict):
            return "it is missing"
        for file_name, file_record in files.items():
            problem = _file_damage(os.path.join(path, file_name), file_record, file_name)
            if problem:
                return problem
        return None

    def add(self, entries: dict, name: str, built: str, **extra) -> dict:
        """Rename `built` (a file or folder at a `temporary` name) into place
        as entry `name` and record it in `entries`, with `extra` and the time
        it was last used (under `locked`); returns its record."""
        record = {**fingerprint(built), **extra, "used": time.time()}
        target = self.path(name)
        if os.path.isdir(target) and not os.path.islink(target):
            self.remove(entries, name)   # a stray folder of the same name (not in use)
        os.replace(built, target)
        entries[name] = record
        return record

    def touch(self, entries: dict, name: str) -> None:
        """Entry `name` was used now (the least recently used go first)."""
        entries[name]["used"] = time.time()

    def use(self, name: str) -> None:
        """Hold a shared lock on entry `name` until `close`: another process's
        `evict` or `remove` leaves it alone (call it under `locked`)."""
        if name in self._in_use:
            return
        descriptor = os.open(self.path(name), os.O_RDONLY)
        fcntl.flock(descriptor, fcntl.LOCK_SH)
        self._in_use[name] = descriptor

    def release(self, name: str) -> None:
        """Let go of entry `name` (`use`): this process may then `remove` it."""
        descriptor = self._in_use.pop(name, None)
        if descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(descriptor)

    def close(self) -> None:
        """Release the entries `use` holds."""
        for descriptor in self._in_use.values():
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self._in_use.clear()

    def remove(self, entries: dict, name: str) -> bool:
        """Remove entry `name` and its record, unless another process uses it
        (`use`); whether it was removed (under `locked`)."""
        path = self.path(name)
        if name in self._in_use:
            return False
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            entries.pop(name, None)
            return True
        except OSError:
            descriptor = None
        try:
            if descriptor is not None:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
            entries.pop(name, None)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return True
        finally:
            if descriptor is not None:
                os.close(descriptor)

    def evict(self, entries: dict, keep: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """Remove the least recently used entries while the folder holds over
        `max_bytes` or `max_entries`; those in `keep` and those in use stay.
        Returns the names removed (under `locked`)."""
        total = sum(_number(record, "bytes") for record in entries.values())
        removed = []
        for name in sorted(entries, key=lambda n: _number(entries[n], "used")):
            if total <= self.max_bytes and len(entries) <= self.max_entries:
                break
            if name in keep:
                continue
            size = _number(entries[name], "bytes")
            if self.remove(entries, name):
                total -= size
                removed.append(name)
        return removed
