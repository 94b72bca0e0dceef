"""The XLA compile cache (issue 61): entries shared only once whole, checked
before use, a damaged one (truncated, garbage, another TensorFlow version, not
written by the cache) reported in one line and ignored. Fast: fake entries,
no TensorFlow; the real decoder's use of it is the slow test at the end."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ENV
from t2t_revival.process import xla_compile_cache
from t2t_revival.files.atomic_file import TEMPORARY_PREFIX
from t2t_revival.files.protobuf_wire import length_delimited, varint
from t2t_revival.process.xla_compile_cache import XlaCompileCache, is_complete_message

FLAG = "--tf_xla_persistent_cache_directory"


def entry(payload: bytes = b"x" * 5000) -> bytes:
    """A fake XlaSerializedCacheEntry: key, HLO module and executable fields."""
    key = length_delimited(1, b"k") + varint(2 << 3) + varint(7)
    return length_delimited(1, key) + length_delimited(2, b"hlo" * 50) + \
        length_delimited(3, payload)


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    """T2T_COMPILE_CACHE set to a fresh root; TF_XLA_FLAGS unset."""
    root = tmp_path / "cache"
    monkeypatch.setenv("T2T_COMPILE_CACHE", str(root))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    return root


def fill(prog="t2t-decoder", names=("a__1__XLA_CPU_JIT.pb",), data=None):
    """Open a cache, let 'TensorFlow' write `names` into its private folder,
    close it (publish). Returns the closed cache."""
    cache = XlaCompileCache.open(prog)
    for name in names:
        (open(os.path.join(cache.private, name), "wb")).write(data or entry())
    cache.close()
    return cache


def test_the_wire_check_tells_a_whole_entry_from_a_cut_or_garbled_one():
    whole = entry()
    assert is_complete_message(whole)
    assert not is_complete_message(whole[:-1])
    assert not is_complete_message(whole[:len(whole) // 2])
    assert not is_complete_message(b"garbage " * 100)
    assert not is_complete_message(length_delimited(1, b"k"))   # fields missing


def test_an_entry_is_published_then_linked_into_the_next_process_folder(cache_env, capsys):
    first = fill()
    assert not os.path.exists(first.private)   # removed at close
    manifest = json.loads(open(os.path.join(first.shared, "manifest.json")).read())
    record = manifest["entries"]["a__1__XLA_CPU_JIT.pb"]
    assert record["bytes"] == len(entry())
    said = []
    second = XlaCompileCache.open("t2t-decoder", log=said.append)
    assert os.environ["TF_XLA_FLAGS"] == f"{FLAG}={second.private}"
    linked = os.path.join(second.private, "a__1__XLA_CPU_JIT.pb")
    assert open(linked, "rb").read() == entry()
    assert second.publish() == 0   # nothing new
    second.close()
    assert said == [] and capsys.readouterr().err == ""   # quiet when all is well


def test_a_half_written_entry_is_never_shared(cache_env):
    cache = fill(names=("cut__1__XLA_CPU_JIT.pb",), data=entry()[:-10])
    assert not os.path.exists(os.path.join(cache.shared, "cut__1__XLA_CPU_JIT.pb"))
    assert json.loads(open(os.path.join(cache.shared, "manifest.json")).read())["entries"] == {}


@pytest.mark.parametrize("damage, reason", [
    ("truncate", "truncated"),
    ("garbage", "contents changed"),
    ("version", "written by TensorFlow 2.0.0"),
    ("unlisted", "not written by this cache"),
])
def test_a_damaged_entry_is_said_in_one_line_removed_and_not_used(cache_env, capsys, damage,
                                                                  reason):
    shared = fill().shared
    path = os.path.join(shared, "a__1__XLA_CPU_JIT.pb")
    manifest_path = os.path.join(shared, "manifest.json")
    if damage == "truncate":
        os.truncate(path, 100)
    elif damage == "garbage":
        data = bytearray(open(path, "rb").read())
        data[200:210] = b"0123456789"
        open(path, "wb").write(bytes(data))
    elif damage == "version":
        manifest = json.loads(open(manifest_path).read())
        manifest["entries"]["a__1__XLA_CPU_JIT.pb"]["tensorflow"] = "2.0.0"
        open(manifest_path, "w").write(json.dumps(manifest))
    else:
        os.unlink(manifest_path)
    capsys.readouterr()
    err = []
    cache = XlaCompileCache.open("t2t-decoder", log=err.append)
    assert capsys.readouterr().err == ""   # said through the log only
    assert len(err) == 1, err
    assert err[0].startswith("t2t-decoder: ignored 1 damaged XLA compile cache entry"), err
    assert reason in err[0], err
    assert os.listdir(cache.private) == []
    assert not os.path.exists(path)
    # TensorFlow compiles it anew; the process's end shares the new, whole entry.
    open(os.path.join(cache.private, "a__1__XLA_CPU_JIT.pb"), "wb").write(entry())
    cache.close()
    assert open(path, "rb").read() == entry()
    XlaCompileCache.open("t2t-decoder", log=err.append).close()
    assert len(err) == 1 and capsys.readouterr().err == ""


@pytest.mark.parametrize("change, said", [
    ({"bytes": None}, "its 'bytes' is missing"),
    ({"bytes": "5163"}, "its 'bytes' is '5163'"),
    ({"sha256": 7}, "its 'sha256' is 7"),
])
def test_a_manifest_record_missing_a_field_is_one_damaged_entry(cache_env, change, said):
    """Issue 77, part 3: one record without its `bytes` field broke every
    TensorFlow-path decode on the cache, xla=false included (the cache opens
    for each), with a TypeError until the folder was deleted by hand."""
    shared = fill().shared
    manifest_path = os.path.join(shared, "manifest.json")
    manifest = json.loads(open(manifest_path).read())
    record = manifest["entries"]["a__1__XLA_CPU_JIT.pb"]
    for field, value in change.items():
        if value is None:
            del record[field]
        else:
            record[field] = value
    open(manifest_path, "w").write(json.dumps(manifest))
    err = []
    cache = XlaCompileCache.open("t2t-decoder", log=err.append)
    assert len(err) == 1 and err[0].startswith(
        "t2t-decoder: ignored 1 damaged XLA compile cache entry"), err
    assert f"(its manifest record is damaged ({said}))" in err[0], err
    assert os.listdir(cache.private) == []
    open(os.path.join(cache.private, "a__1__XLA_CPU_JIT.pb"), "wb").write(entry())
    assert cache.publish() == 1
    cache.close()
    assert XlaCompileCache.open("t2t-decoder", log=err.append).private and len(err) == 1


def test_a_killed_process_folder_is_removed_by_the_next_one(cache_env):
    cache = XlaCompileCache.open("t2t-decoder")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    abandoned = os.path.join(cache.shared, f"{TEMPORARY_PREFIX}{dead}-1")
    os.mkdir(abandoned)
    open(os.path.join(abandoned, "half.pb"), "wb").write(b"\x0a")
    other = XlaCompileCache.open("t2t-decoder")
    assert not os.path.exists(abandoned)
    assert os.path.isdir(cache.private)   # a live process's folder is kept
    other.close()
    cache.close()


def test_off_a_folder_of_the_users_own_and_an_unwritable_root(cache_env, monkeypatch, capsys,
                                                             tmp_path):
    monkeypatch.setenv("T2T_COMPILE_CACHE", "off")
    assert XlaCompileCache.open("t2t-decoder") is None
    monkeypatch.setenv("T2T_COMPILE_CACHE", str(cache_env))
    monkeypatch.setenv("TF_XLA_FLAGS", f"{FLAG}=/somewhere/mine")
    assert XlaCompileCache.open("t2t-decoder") is None
    assert os.environ["TF_XLA_FLAGS"] == f"{FLAG}=/somewhere/mine"
    # A parent process's private folder, inherited, is not the user's: replaced.
    monkeypatch.setenv("TF_XLA_FLAGS", f"--xla_other=1 {FLAG}={cache_env}/tfx/{TEMPORARY_PREFIX}1-2")
    cache = XlaCompileCache.open("t2t-decoder")
    assert os.environ["TF_XLA_FLAGS"] == f"--xla_other=1 {FLAG}={cache.private}"
    cache.close()
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    monkeypatch.setenv("T2T_COMPILE_CACHE", str(a_file))
    monkeypatch.delenv("TF_XLA_FLAGS")
    capsys.readouterr()
    err = []
    assert XlaCompileCache.open("t2t-trainer", log=err.append) is None
    assert capsys.readouterr().err == ""
    assert len(err) == 1 and err[0].startswith("t2t-trainer: the XLA compile cache is off: "
                                               f"cannot write {a_file}"), err
    assert "T2T_COMPILE_CACHE=off" in err[0]


def test_a_nearly_full_disk_leaves_the_cache_off_in_one_line(cache_env, monkeypatch, capsys):
    monkeypatch.setattr(xla_compile_cache, "MIN_FREE_BYTES", 1 << 62)
    err = []
    assert XlaCompileCache.open("t2t-decoder", log=err.append) is None
    assert capsys.readouterr().err == ""
    assert len(err) == 1 and err[0].startswith("t2t-decoder: the XLA compile cache is off: "), err
    assert "MB free on the disk" in err[0] and "T2T_COMPILE_CACHE=off" in err[0]
    assert "TF_XLA_FLAGS" not in os.environ


def test_a_compile_the_full_cache_disk_fails_is_one_line_not_out_of_memory():
    """TensorFlow fails the compile when it cannot write the program (a
    ResourceExhaustedError naming the file): the decoder says the disk."""
    import tensorflow as tf

    from t2t_revival.files.atomic_file import DiskWriteError
    from t2t_revival.process.xla_compile_cache import cache_disk_full

    error = tf.errors.ResourceExhaustedError(
        None, None, "/c/.work-1-2/xla_compile_cache__1__2__XLA_CPU_JIT.pbvm-1.tmp; "
                    "No space left on device [Op:__inference__search_padded_6945]")
    assert cache_disk_full(tf.errors.ResourceExhaustedError(None, None, "OOM when ...")) is None
    said = cache_disk_full(error)
    assert isinstance(said, DiskWriteError)
    assert "XLA compile cache (No space left on device)" in str(said)
    assert "T2T_COMPILE_CACHE=off" in str(said) and "out of memory" not in str(said)


def test_the_least_recently_used_entries_go_past_the_size_limit(cache_env, monkeypatch):
    monkeypatch.setattr(xla_compile_cache, "MAX_BYTES", 2 * len(entry()) + 10)
    for name in ("a__1__XLA_CPU_JIT.pb", "b__1__XLA_CPU_JIT.pb", "c__1__XLA_CPU_JIT.pb"):
        shared = fill(names=(name,)).shared
    kept = sorted(n for n in os.listdir(shared) if n.endswith(".pb"))
    assert kept == ["b__1__XLA_CPU_JIT.pb", "c__1__XLA_CPU_JIT.pb"]
    monkeypatch.setattr(xla_compile_cache, "MAX_BYTES", 1 << 30)
    monkeypatch.setattr(xla_compile_cache, "MAX_ENTRIES", 1)
    fill(names=("d__1__XLA_CPU_JIT.pb",))
    assert sorted(n for n in os.listdir(shared) if n.endswith(".pb")) == ["d__1__XLA_CPU_JIT.pb"]


@pytest.mark.slow
def test_the_decoder_reuses_its_programs_and_ignores_a_truncated_one(tmp_path, shared_data):
    """Three `t2t-decoder` runs sharing a cache, with xla=true: the first
    compiles and shares its program; the second finds it truncated (as a kill
    mid-write leaves it), says so in one line and compiles anew; the third
    loads it (TensorFlow's parse-error line stays hidden). Each gives the
    same translations."""
    from test_decode_xla import FAST, random_run_dir

    out_dir, sentences = random_run_dir(shared_data, tmp_path / "run")
    source = tmp_path / "in.en"
    source.write_text("\n".join(sentences[:3]) + "\n", encoding="utf-8")
    env = dict(ENV, T2T_COMPILE_CACHE=str(tmp_path / "cache"))
    env.pop("TF_CPP_MIN_LOG_LEVEL")   # the CLI's own default, as a user has it

    def decode(n):
        out = subprocess.run([sys.executable, "-m", "t2t_revival.cli.decoder",
                              f"--output_dir={out_dir}", f"--decode_from_file={source}",
                              f"--decode_to_file={tmp_path / f'{n}.de'}",
                              f"--decode_hparams={FAST},xla=true"],
                             capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stderr, (tmp_path / f"{n}.de").read_text(encoding="utf-8")

    err, first = decode(1)
    (shared,) = (tmp_path / "cache").iterdir()
    (program,) = shared.glob("*.pb")
    assert "damaged" not in err
    size = program.stat().st_size
    os.truncate(program, size // 3)
    err, second = decode(2)
    said = [line for line in err.splitlines() if "XLA compile cache" in line]
    assert len(said) == 1 and "ignored 1 damaged XLA compile cache entry" in said[0], err
    assert "truncated" in said[0]
    assert second == first
    assert program.stat().st_size == size   # shared again, whole
    err, third = decode(3)
    assert "XLA compile cache" not in err and "XlaSerializedCacheEntry" not in err, err
    assert third == first
    assert not list(shared.glob(f"{TEMPORARY_PREFIX}*"))   # each process removed its own folder
