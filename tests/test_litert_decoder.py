"""t2t-decoder's small jobs on the run's LiteRT programs, without TensorFlow
(litert=auto in the decode hparams; `EngineChoice`, `LiteRTTranslator`, `LiteRTProgramCache`)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import ENV, one_line_error, run_cli
from t2t_revival.files.atomic_file import TEMPORARY_PREFIX
from random_run_dir import make_random_run_dir, make_vocab

# The first is longer than max_length (16): cut, as by the TensorFlow path.
SENTENCES = ["A man in a blue shirt is riding a bike down the street.",
             "Two dogs play in the snow.", "", "x", "A woman sings."]

# t2t-decoder in a fresh process, then whether TensorFlow was imported.
_DECODER = ("import sys\n"
            "from t2t_revival.cli.decoder import run\n"
            "sys.argv = ['t2t-decoder'] + sys.argv[1:]\n"
            "try:\n"
            "    run()\n"
            "finally:\n"
            "    print('tensorflow imported:', 'tensorflow' in sys.modules, file=sys.stderr)\n")


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("litert_decoder")
    return make_random_run_dir(root / "run", make_vocab(root / "vocab.model"), seed=5,
                               max_length=16, extra_length=6)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source.en"
    path.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    return path


def _decode(run, cache, *args, stdin=""):
    """t2t-decoder in a fresh process with the compile cache at `cache`."""
    return subprocess.run([sys.executable, "-c", _DECODER, f"--output_dir={run}", *args],
                          capture_output=True, text=True, input=stdin, timeout=600,
                          env=dict(ENV, T2T_COMPILE_CACHE=str(cache)))


@pytest.fixture(scope="module")
def first_job(random_run, tmp_path_factory):
    """The first small job of the run, in a fresh process with an empty
    compile cache: it converts the run to LiteRT programs, kept in the
    cache (once for the module; each test takes a copy of the cache, which
    its jobs may change). Returns (the finished process, the cache, the
    translations it wrote)."""
    folder = tmp_path_factory.mktemp("first_job")
    source = folder / "source.en"
    source.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    first = _decode(random_run, folder / "cache", f"--decode_from_file={source}",
                    f"--decode_to_file={folder / 'first.de'}")
    assert first.returncode == 0, first.stderr[-3000:]
    return first, folder / "cache", (folder / "first.de").read_text(encoding="utf-8")


def _cache_after_the_first_job(first_job, tmp_path):
    """A copy of `first_job`'s compile cache, this test's own."""
    return pathlib.Path(shutil.copytree(first_job[1], tmp_path / "cache"))


def test_a_small_job_converts_once_then_answers_without_tensorflow(random_run, first_job,
                                                                   source, tmp_path):
    first, _, first_translations = first_job
    assert "Converting " in first.stderr and "to LiteRT programs" in first.stderr
    cache = _cache_after_the_first_job(first_job, tmp_path)
    names = os.listdir(cache / "litert")
    entries = [n for n in names if not n.startswith(".") and n != "manifest.json"]
    assert len(entries) == 1 and sorted(names) == [".lock", entries[0], "manifest.json"]
    second = _decode(random_run, cache, f"--decode_from_file={source}",
                     f"--decode_to_file={tmp_path / 'second.de'}")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Converting" not in second.stderr
    assert "on its LiteRT programs" in second.stderr
    assert "tensorflow imported: False" in second.stderr, second.stderr[-3000:]
    assert "XNNPACK" not in second.stderr and "Traceback" not in second.stderr
    # The same file as the TensorFlow search (litert=false), the cut counted.
    plain = _decode(random_run, cache, f"--decode_from_file={source}",
                    f"--decode_to_file={tmp_path / 'tf.de'}", "--decode_hparams=litert=false")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "tensorflow imported: True" in plain.stderr
    translations = (tmp_path / "second.de").read_text(encoding="utf-8")
    assert translations == (tmp_path / "tf.de").read_text(encoding="utf-8")
    assert translations == first_translations
    lines = translations.split("\n")
    assert lines[2] == "" and any(lines)
    # The same inputs cut to max_length (16), and said the same way.
    cut = [[l for l in out.stderr.splitlines() if "longer than 16 tokens" in l]
           for out in (second, plain)]
    assert len(cut[0]) == 1 and cut[0] == cut[1]
    # --decode_interactive answers each line the same way, without TensorFlow.
    typed = _decode(random_run, cache, "--decode_interactive", stdin="Two dogs play in the snow.\n")
    assert typed.returncode == 0, typed.stderr[-3000:]
    assert typed.stdout.splitlines() == [lines[1]]
    assert "tensorflow imported: False" in typed.stderr


def test_a_damaged_entry_is_said_removed_and_converted_anew(random_run, first_job, source,
                                                           tmp_path):
    cache = _cache_after_the_first_job(first_job, tmp_path)   # converted by the first job
    (entry,) = [p for p in (cache / "litert").iterdir() if p.is_dir()]
    step = entry / "step.tflite"
    step.write_bytes(step.read_bytes()[:1000])   # truncated, as by a full disk
    again = _decode(random_run, cache, f"--decode_from_file={source}",
                    f"--decode_to_file={tmp_path / 'again.de'}")
    assert again.returncode == 0, again.stderr[-3000:]
    said = [l for l in again.stderr.splitlines() if "damaged LiteRT program cache entry" in l]
    assert len(said) == 1 and "step.tflite has 1,000 bytes of" in said[0], again.stderr
    assert "Converting" in again.stderr and "Traceback" not in again.stderr
    assert (tmp_path / "again.de").read_text() == first_job[2]
    manifest = json.loads((cache / "litert" / "manifest.json").read_text())
    assert manifest["entries"][entry.name]["files"]["step.tflite"]["bytes"] \
        == step.stat().st_size > 1000


def test_an_entry_that_passes_its_manifest_but_does_not_load_is_converted_anew(
        random_run, first_job, source, tmp_path):
    """Issue 77, part 3: programs of the right sizes and checksums that are
    not a valid Flatbuffer (another converter's output) were a traceback."""
    from t2t_revival.files.disk_cache import fingerprint

    cache = _cache_after_the_first_job(first_job, tmp_path)
    (entry,) = [p for p in (cache / "litert").iterdir() if p.is_dir()]
    (entry / "step.tflite").write_bytes(b"not a flatbuffer " * 100)
    manifest_path = cache / "litert" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["entries"][entry.name].update(fingerprint(str(entry)))   # it passes the manifest
    manifest_path.write_text(json.dumps(manifest))
    again = _decode(random_run, cache, f"--decode_from_file={source}",
                    f"--decode_to_file={tmp_path / 'again.de'}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Traceback" not in again.stderr, again.stderr[-3000:]
    said = [l for l in again.stderr.splitlines() if "damaged LiteRT program cache entry" in l]
    assert said == [f"t2t-decoder: ignored a damaged LiteRT program cache entry {entry} (its "
                    f"programs do not load: The model is not a valid Flatbuffer buffer); "
                    f"removed, and converted anew"], again.stderr[-3000:]
    assert "Converting" in again.stderr and "on its LiteRT programs" in again.stderr
    assert (tmp_path / "again.de").read_text() == first_job[2]
    assert (entry / "step.tflite").read_bytes()[:100] != b"not a flatbuffer " * 6


def test_which_jobs_take_the_litert_path(random_run, tmp_path, monkeypatch):
    from t2t_revival.settings.decode_hparams import DecodeHParams
    from t2t_revival.decode.engine_choice import EngineChoice
    from t2t_revival.settings.decode_choices import AUTO_LITERT_SENTENCES
    from t2t_revival.errors import UserError
    from t2t_revival.decode import litert_program_cache
    from t2t_revival.decode.litert_program_cache import LiteRTProgramCache, program_key

    monkeypatch.setenv("T2T_COMPILE_CACHE", str(tmp_path / "cache"))
    converted = []

    def fake_exporter(work, output_dir, prefix, settings, usr_dir):
        converted.append(prefix)
        os.makedirs(os.path.join(work, "1"))
        (tmp_path / "note").write_text(prefix)
        shutil.copyfile(tmp_path / "note", os.path.join(work, "1", "step.tflite"))

    monkeypatch.setattr(litert_program_cache, "run_exporter", fake_exporter)

    said = []

    def job(sentences=2, paths=(), interactive=False, **settings):
        """(programs, checkpoint) of the LiteRT path, or None: TensorFlow decodes."""
        choice = EngineChoice.for_job(random_run, list(paths), DecodeHParams(**settings),
                                      sentences, LiteRTProgramCache.from_environment(
                                          "t2t-decoder"), said.append, interactive)
        if choice.engine == "tensorflow":
            assert choice.programs is None
            return None
        assert choice.engine == "litert"
        return choice.programs, choice.checkpoint

    assert job(litert="false") is None
    assert job(sentences=AUTO_LITERT_SENTENCES + 1) is None
    assert job(sentences=0) is None and job(sentences=0, litert="true") is None
    assert job(xla="true") is None
    assert job(sampling=True) is None and job(return_beams=True) is None
    assert job(alignments=True) is None and job(prefix=True) is None
    assert job(paths=[random_run, random_run]) is None
    assert converted == []
    programs, prefix = job(sentences=AUTO_LITERT_SENTENCES + 1, interactive=True)
    assert prefix == os.path.join(random_run, "ckpt-1") and converted == [prefix]
    assert os.path.basename(programs) == program_key(random_run, prefix, DecodeHParams())
    assert said[0].startswith(f"Converting {prefix} to LiteRT programs") and len(said) == 2
    assert job() == (programs, prefix) and len(converted) == 1       # found, checked
    assert job(sentences=500, litert="true") == (programs, prefix)
    assert job(beam_size=2)[0] != programs and len(converted) == 2    # another beam setting
    with pytest.raises(UserError, match="not an ensemble"):
        job(paths=[random_run, random_run], litert="true")
    # With the cache off, auto keeps the TensorFlow path (nowhere to keep them).
    monkeypatch.setenv("T2T_COMPILE_CACHE", "off")
    assert job() is None and len(converted) == 2


def test_the_key_follows_the_checkpoint_and_the_settings(random_run, tmp_path):
    from t2t_revival.errors import UserError
    from t2t_revival.settings.decode_hparams import DecodeHParams
    from t2t_revival.decode.litert_program_cache import checkpoint_prefix, program_key

    run = tmp_path / "run"
    shutil.copytree(random_run, run, ignore=shutil.ignore_patterns("export"))
    prefix = checkpoint_prefix(str(run), None)
    assert prefix == str(run / "ckpt-1")
    key = program_key(str(run), prefix, DecodeHParams())
    assert program_key(str(run), prefix, DecodeHParams(batch_size=7, xla="false")) == key
    assert program_key(str(run), prefix, DecodeHParams(alpha=0.7)) != key
    for name in ("ckpt-1.index", "hparams.json"):
        path = run / name
        original = path.read_bytes()
        path.write_bytes(original + b" ")
        assert program_key(str(run), prefix, DecodeHParams()) != key, name
        path.write_bytes(original)
    # A newer checkpoint is the one decoded; a named prefix or folder is followed.
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copyfile(str(prefix) + suffix, run / f"ckpt-12{suffix}")
    assert checkpoint_prefix(str(run), None) == str(run / "ckpt-12")
    assert checkpoint_prefix(str(run), str(run / "ckpt-1")) == str(run / "ckpt-1")
    with pytest.raises(UserError, match="no checkpoint at .*ckpt-2"):
        checkpoint_prefix(str(run), str(run / "ckpt-2"))
    with pytest.raises(UserError, match="no checkpoint in"):
        checkpoint_prefix(str(tmp_path), None)


def test_a_failed_conversion_is_one_line_and_tensorflow_decodes(random_run, source, tmp_path,
                                                                monkeypatch):
    from t2t_revival.decode import litert_program_cache
    from t2t_revival.decode.litert_program_cache import ConversionFailed

    def failing(*args):
        raise ConversionFailed("the checkpoint ckpt-1 is damaged")

    monkeypatch.setenv("T2T_COMPILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(litert_program_cache, "run_exporter", failing)
    out = run_cli("decoder", f"--output_dir={random_run}", f"--decode_from_file={source}",
                  f"--decode_to_file={tmp_path / 'out.de'}")
    assert out.returncode == 0, out.stderr[-3000:]
    said = [l for l in out.stderr.splitlines() if "could not convert" in l]
    assert said == ["t2t-decoder: could not convert to LiteRT programs (the checkpoint "
                    "ckpt-1 is damaged); decoding with TensorFlow"]
    assert len((tmp_path / "out.de").read_text().split("\n")) == len(SENTENCES) + 1
    assert not [p for p in os.listdir(tmp_path / "cache" / "litert")
                if p.startswith(TEMPORARY_PREFIX)]


def test_litert_settings_that_cannot_be_served_are_one_line(random_run, source):
    one_line_error(run_cli("decoder", f"--output_dir={random_run}",
                           f"--decode_from_file={source}",
                           "--decode_hparams=litert=true,return_beams=true"),
                   "t2t-decoder", "litert=true decodes beam search's best output",
                   "return_beams")
    one_line_error(run_cli("decoder", f"--output_dir={random_run}",
                           f"--decode_from_file={source}",
                           "--decode_hparams=litert=true,xla=true"),
                   "t2t-decoder", "two engines")
    one_line_error(run_cli("decoder", f"--output_dir={random_run}",
                           f"--decode_from_file={source}", "--decode_hparams=litert=maybe"),
                   "t2t-decoder", "'litert' must be one of auto, true, false")


def test_the_litert_speed_benchmark_refuses_bad_flags_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks.litert_decode_speed",
                          f"--litert={tmp_path}", f"--ctranslate2={tmp_path}", "--rounds=0"],
                         capture_output=True, text=True, env=ENV, timeout=300)
    one_line_error(out, "litert_decode_speed", "--rounds and --max_sentences must be at least 1",
                   "--rounds=0")
    out = subprocess.run([sys.executable, "-m", "benchmarks.litert_decode_speed",
                          f"--litert={tmp_path}", f"--ctranslate2={tmp_path}"],
                         capture_output=True, text=True, env=ENV, timeout=300)
    one_line_error(out, "litert_decode_speed", "t2t_export.json")


def test_outputs_sort_by_their_ascii_number_only():
    """Converted outputs sort Identity, Identity_1, ..., Identity_11 in the
    function's order; a tail that str.isdigit takes but int refuses ("²")
    is no number (it was a ValueError)."""
    from t2t_revival.decode.litert_program import output_number
    names = ["Identity_11:0", "Identity:0", "Identity_2", "Identity_²", "Identity_1"]
    assert [output_number(n) for n in names] == [11, 0, 2, 0, 1]
    assert sorted(names, key=output_number)[-2:] == ["Identity_2", "Identity_11:0"]
