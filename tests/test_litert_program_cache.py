"""`LiteRTProgramCache` shared by concurrent decoders (issue 72): two
`t2t-decoder` processes (litert=true) with one compile cache folder both
finish with a single run's translations, and the folder is left consistent:
one entry, matching its manifest, no temporary leftovers."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ENV
from random_run_dir import make_random_run_dir, make_vocab
from t2t_revival.files.atomic_file import TEMPORARY_PREFIX
from t2t_revival.files.disk_cache import MANIFEST, DiskCache

SENTENCES = ["Two dogs play in the snow.", "A woman sings.", "x"]


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("litert_program_cache")
    return make_random_run_dir(root / "run", make_vocab(root / "vocab.model"), seed=7,
                               max_length=16, extra_length=6)


def _decoder(run, cache, source, output):
    """t2t-decoder on the LiteRT path, started (not waited for)."""
    return subprocess.Popen([sys.executable, "-m", "t2t_revival.cli.decoder",
                             f"--output_dir={run}", f"--decode_from_file={source}",
                             f"--decode_to_file={output}", "--decode_hparams=litert=true"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(ENV, T2T_COMPILE_CACHE=str(cache)))


def _finished(process):
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert "on its LiteRT programs" in stderr and "could not convert" not in stderr, stderr
    return stderr


def test_two_decoders_sharing_a_cache_agree_and_leave_one_entry(random_run, tmp_path):
    source = tmp_path / "source.en"
    source.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    _finished(_decoder(random_run, tmp_path / "alone", source, tmp_path / "alone.de"))
    single = (tmp_path / "alone.de").read_text(encoding="utf-8")
    assert len(single.split("\n")) == len(SENTENCES) + 1
    shared = tmp_path / "shared"
    both = [_decoder(random_run, shared, source, tmp_path / f"{n}.de") for n in (1, 2)]
    for process in both:
        _finished(process)
    for n in (1, 2):
        assert (tmp_path / f"{n}.de").read_text(encoding="utf-8") == single
    folder = shared / "litert"
    names = sorted(os.listdir(folder))
    entries = [n for n in names if not n.startswith(".") and n != MANIFEST]
    assert len(entries) == 1 and names == sorted([".lock", MANIFEST, entries[0]]), names
    assert not [n for n in names if n.startswith(TEMPORARY_PREFIX)]
    manifest = json.loads((folder / MANIFEST).read_text())["entries"]
    assert list(manifest) == entries
    assert DiskCache(str(folder), 1 << 30, 100).damage(entries[0], manifest[entries[0]]) is None
    assert sorted(manifest[entries[0]]["files"]) == sorted(os.listdir(folder / entries[0]))


def test_a_failed_conversion_is_the_childs_last_line(random_run, tmp_path):
    """The child runs the library's conversion (not the t2t-exporter command
    line); its user error comes back as `ConversionFailed`, one line."""
    from t2t_revival.decode.litert_program_cache import ConversionFailed, run_exporter
    from t2t_revival.settings.decode_hparams import DecodeHParams

    missing = os.path.join(random_run, "ckpt-99")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ConversionFailed) as failed:
        run_exporter(str(work), random_run, missing, DecodeHParams(), None)
    assert str(failed.value) == (f"no checkpoint at {missing} (its .index file is missing). "
                                 f"Received: checkpoint_path={missing!r}")
    assert os.listdir(work) == []


def _children(pid, needle):
    """The live processes whose parent is `pid` and whose command line holds `needle`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and needle.encode() in command:
            found.append(int(name))
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_conversion_child_dies_with_a_killed_decoder(random_run, tmp_path):
    """Issue 77, part 3: the converter child outlived a decoder killed with
    kill -9. A stand-in decoder starts it as t2t-decoder does (`run_exporter`)
    and is killed mid-conversion: the child is gone within seconds."""
    import signal
    import time

    work = tmp_path / "work"
    work.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\n"
         "from t2t_revival.decode.litert_program_cache import run_exporter\n"
         "from t2t_revival.settings.decode_hparams import DecodeHParams\n"
         f"run_exporter({str(work)!r}, {str(random_run)!r}, "
         f"{os.path.join(random_run, 'ckpt-1')!r}, DecodeHParams(), None)\n"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children = []
    try:
        deadline = time.time() + 60
        while not children and time.time() < deadline and parent.poll() is None:
            children = _children(parent.pid, "litert_conversion_worker")
            time.sleep(0.05)
        assert children, "the conversion child did not start"
        time.sleep(1)   # (into its imports)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.time() + 5
        while _alive(children[0]) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(children[0]), "the conversion child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
