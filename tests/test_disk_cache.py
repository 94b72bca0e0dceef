"""`DiskCache` (issue 72): the one owner of the compile caches' folders. Its
lock makes a second process wait; eviction takes the least recently used
entries, never one asked to stay nor one another process uses; the sweep
removes only what dead processes left at temporary names. Fast: no
TensorFlow, small files."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ENV
from t2t_revival.files.atomic_file import (TEMPORARY_PREFIX, remove_dead_temporaries,
                                           temporary_folder, temporary_name)
from t2t_revival.files.disk_cache import MANIFEST, DiskCache


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _add(cache: DiskCache, entries: dict, name: str, size: int, folder: bool = False) -> None:
    built = cache.temporary(folder=folder)
    if folder:
        with open(os.path.join(built, "program.bin"), "wb") as f:
            f.write(b"p" * size)
    else:
        with open(built, "wb") as f:
            f.write(b"e" * size)
    cache.add(entries, name, built)


# A child process that takes the lock, says so, holds it `hold` seconds,
# adds an entry, and (with `use`) then holds the entry in use until killed.
_CHILD = textwrap.dedent("""
    import os, sys, time
    from t2t_revival.files.disk_cache import DiskCache
    folder, hold, use = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "use"
    cache = DiskCache(folder, 1 << 30, 100)
    with cache.locked() as entries:
        print("locked", flush=True)
        time.sleep(hold)
        built = cache.temporary(folder=True)
        open(os.path.join(built, "f"), "wb").write(b"c" * 10)
        cache.add(entries, "child", built)
        if use:
            cache.use("child")
    print("released", flush=True)
    if use:
        time.sleep(600)
""")


def _child(folder, hold, use=False):
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(folder), str(hold),
                              "use" if use else "-"], stdout=subprocess.PIPE, text=True,
                             env=ENV)
    assert child.stdout.readline().strip() == "locked"
    return child


def test_the_lock_makes_another_process_wait_and_see_its_entry(tmp_path):
    folder = tmp_path / "cache"
    child = _child(folder, 1.5)
    start = time.monotonic()
    cache = DiskCache(str(folder), 1 << 30, 100)
    with cache.locked() as entries:
        waited = time.monotonic() - start
        assert "child" in entries   # written before the lock was let go
        assert cache.damage("child", entries["child"]) is None
    assert waited > 1.0, waited
    assert child.wait(timeout=60) == 0
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["entries"]["child"]["files"]["f"]["bytes"] == 10


def test_eviction_takes_the_least_recently_used_but_keeps_the_asked_and_the_used(tmp_path):
    folder = tmp_path / "cache"
    child = _child(folder, 0, use=True)   # "child" (10 bytes) in use by another process
    assert child.stdout.readline().strip() == "released"
    try:
        cache = DiskCache(str(folder), max_bytes=250, max_entries=3)
        with cache.locked() as entries:
            for name in ("a", "b", "c"):
                _add(cache, entries, name, 100)
                time.sleep(0.01)
            entries["child"]["used"] = 0   # the oldest of all
            cache.touch(entries, "a")      # a used again: now the newest
            removed = cache.evict(entries, keep={"b"})
            # Over 250 bytes and 3 entries: "child" is in use, b is kept, c goes;
            # then 210 bytes and 3 entries: done.
            assert removed == ["c"]
            assert sorted(entries) == ["a", "b", "child"]
        assert sorted(cache.names()) == ["a", "b", "child"]
    finally:
        child.kill()
        child.wait()
    # The process gone, its entry is no longer in use: it goes first.
    cache = DiskCache(str(folder), max_bytes=250, max_entries=2)
    with cache.locked() as entries:
        assert cache.evict(entries) == ["child"]
    assert sorted(cache.names()) == ["a", "b"]


def test_an_entry_this_process_uses_is_never_removed(tmp_path):
    cache = DiskCache(str(tmp_path / "cache"), max_bytes=10, max_entries=1)
    with cache.locked() as entries:
        _add(cache, entries, "mine", 100, folder=True)
        cache.use("mine")
        _add(cache, entries, "other", 100, folder=True)
        assert cache.evict(entries) == ["other"]
        assert cache.remove(entries, "mine") is False
    cache.close()
    with cache.locked() as entries:
        assert cache.remove(entries, "mine") is True and entries == {}
    assert cache.names() == []


def test_damage_names_the_file_and_what_is_wrong(tmp_path):
    cache = DiskCache(str(tmp_path / "cache"), 1 << 30, 100)
    with cache.locked() as entries:
        _add(cache, entries, "folder", 1000, folder=True)
        _add(cache, entries, "file.pb", 1000)
    program = os.path.join(cache.path("folder"), "program.bin")
    os.truncate(program, 10)
    os.truncate(cache.path("file.pb"), 10)
    with cache.locked() as entries:
        assert cache.damage("folder", entries["folder"]) == "program.bin has 10 bytes of 1,000"
        assert cache.damage("file.pb", entries["file.pb"]) == \
            "truncated or overwritten: 10 bytes of 1,000"
    with open(program, "wb") as f:
        f.write(b"q" * 1000)   # the same size, other bytes
    os.remove(cache.path("file.pb"))
    with cache.locked() as entries:
        assert cache.damage("folder", entries["folder"]) == "program.bin has changed"
        assert cache.damage("file.pb", entries["file.pb"]) == "it is missing"


@pytest.mark.parametrize("entry, change, said", [
    ("file.pb", {"bytes": None}, "its 'bytes' is missing"),
    ("file.pb", {"bytes": "1000"}, "its 'bytes' is '1000'"),
    ("file.pb", {"sha256": None}, "its 'sha256' is missing"),
    ("file.pb", {"mtime_ns": 1.5}, "its 'mtime_ns' is 1.5"),
    ("folder", {"bytes": None}, "its 'bytes' is missing"),
    ("folder", {"files": {"program.bin": {"bytes": 1000}}}, "program.bin: its 'mtime_ns' is missing"),
    ("folder", {"files": []}, "no files"),
])
def test_a_manifest_record_missing_a_field_is_damage_of_that_entry(tmp_path, entry, change,
                                                                   said):
    """Issue 77, part 3: a record without its `bytes` (or of the wrong type)
    was a TypeError on every use of the cache; it is that entry's damage, and
    eviction reads the other records as ever."""
    cache = DiskCache(str(tmp_path / "cache"), 1 << 30, 100)
    with cache.locked() as entries:
        _add(cache, entries, "folder", 1000, folder=True)
        _add(cache, entries, "file.pb", 1000)
    manifest_path = tmp_path / "cache" / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    record = manifest["entries"][entry]
    for field, value in change.items():
        if value is None:
            del record[field]
        else:
            record[field] = value
    record["used"] = "yesterday"   # (eviction sorts by it)
    manifest_path.write_text(json.dumps(manifest))
    with cache.locked() as entries:
        assert cache.damage(entry, entries[entry]) == f"its manifest record is damaged ({said})"
        other = "folder" if entry == "file.pb" else "file.pb"
        assert cache.damage(other, entries[other]) is None
        cache.max_entries = 1
        assert cache.evict(entries, keep={other}) == [entry]


@pytest.mark.parametrize("label", [None, "run"])
def test_the_sweep_removes_only_what_dead_processes_left(tmp_path, label):
    dead = _dead_pid()
    names = {"dead_folder": f"{TEMPORARY_PREFIX}{dead}-1", "dead_file": f"{TEMPORARY_PREFIX}{dead}-2",
             "dead_other_label": f"{TEMPORARY_PREFIX}{dead}-3-other",
             "dead_run": f"{TEMPORARY_PREFIX}{dead}-4-run",
             "not_ours": f"{TEMPORARY_PREFIX}notapid-5", "entry": "abc123"}
    os.mkdir(tmp_path / names["dead_folder"])
    (tmp_path / names["dead_folder"] / "half.bin").write_bytes(b"x")
    for key in ("dead_file", "dead_other_label", "dead_run", "not_ours", "entry"):
        (tmp_path / names[key]).write_bytes(b"x")
    live_folder = temporary_folder(str(tmp_path), label or "")
    live_file = temporary_name(str(tmp_path))
    open(live_file, "wb").close()
    removed = remove_dead_temporaries(str(tmp_path), label)
    gone = {"dead_run"} if label else {"dead_folder", "dead_file", "dead_other_label", "dead_run"}
    assert sorted(removed) == sorted(str(tmp_path / names[k]) for k in gone)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [names[k] for k in names if k not in gone]
        + [os.path.basename(live_folder), os.path.basename(live_file)])
    # DiskCache.sweep is this rule on its folder.
    cache = DiskCache(str(tmp_path), 1 << 30, 100)
    with cache.locked():
        cache.sweep()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(f"{TEMPORARY_PREFIX}{dead}-")]
    assert os.path.isdir(live_folder) and os.path.isfile(live_file)
