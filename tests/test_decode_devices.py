"""One t2t-decoder over several devices (`DevicePool`): one model copy per
device, fed batches as each frees up, the output files byte-identical to one
device's (beam n-best lists, prefixes and constraints, seeded sampling); a
device that runs out of memory is said once and the others finish, and when
none is left the finished batches are kept.

The CPU split into logical devices (--cpu_devices) stands in for GPUs; every
count decodes in one process (tests/scripts/device_decodes.py: one
TensorFlow start). Random-weight runs are fast; the Multi30k test set on the
README's tiny run is slow."""

import gzip
import subprocess
import sys
import threading

import pytest

from conftest import ENV, ROOT, SHARED_DATA
from random_run_dir import saying_run_dir

SCRIPT = ROOT / "tests/scripts/device_decodes.py"
MODES = ("nbest=litert=false,return_beams=true,write_beam_scores=true",
         "guided=litert=false,prefix=true,constraints=true,return_beams=true,"
         "write_beam_scores=true",
         "sampling=litert=false,sampling=true,seed=7,samples_per_input=3,return_beams=true,"
         "write_beam_scores=true")


def _test_sources(lines=None) -> list[str]:
    with gzip.open(SHARED_DATA / "multi30k" / "test_2016_flickr.en.gz", "rt",
                   encoding="utf-8") as f:
        sources = [line.strip() for line in f]
    return sources[:lines] if lines else sources


def _guided(sources: list[str]) -> list[str]:
    """Each source with a prefix and one phrase (some cannot be met: skipped
    alike on every device count)."""
    return [f"{s}\tEin\t{'Hund' if i % 3 else 'Mann'}" for i, s in enumerate(sources)]


def _decode_on(run, folder, counts, modes, plain, guided):
    """Run the script once per input file; {mode: {count: output bytes}}."""
    outputs = {}
    for source_lines, mode_set in ((plain, [m for m in modes if not m.startswith("guided")]),
                                   (guided, [m for m in modes if m.startswith("guided")])):
        if not mode_set:
            continue
        source = folder / f"in.{len(outputs)}.en"
        source.write_text("\n".join(source_lines) + "\n", encoding="utf-8")
        out = subprocess.run([sys.executable, str(SCRIPT), str(run), str(source), str(folder),
                              counts, *mode_set], capture_output=True, text=True,
                             env={**ENV, "T2T_COMPILE_CACHE": "off"}, timeout=1800)
        assert out.returncode == 0, out.stderr[-3000:]
        for mode in mode_set:
            name = mode.split("=", 1)[0]
            outputs[name] = {count: (folder / f"{name}.{count}").read_bytes()
                             for count in counts.split(",")}
    return outputs


def _assert_same_files(outputs, folder, counts, lines):
    for name, by_count in outputs.items():
        first = by_count[counts[-1]]   # one device: the reference
        assert first.count(b"\n") == lines, (name, first[:300])
        for count in counts:
            assert by_count[count] == first, f"{name}: {count} devices differ from one"
            err = (folder / f"{name}.{count}.err").read_text(encoding="utf-8")
            if count != "1":
                assert f"on {count} devices (CPU:0" in err, err[-2000:]
            else:
                assert " devices (" not in err, err[-2000:]
    for name in ("nbest", "guided", "sampling"):
        written = [line.split("\t") for line in outputs[name][counts[-1]].decode("utf-8")
                   .split("\n")[:lines] if line] if name in outputs else []
        assert name not in outputs or written, name
        assert all(len(line) == (6 if name == "sampling" else 8) for line in written), name
        if name == "guided":   # every beam starts with its prefix
            assert all(beam.startswith("Ein") for line in written for beam in line[::2])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return saying_run_dir(tmp_path_factory.mktemp("device_run"), 9, ("▁ein", "▁hund"), 2.0,
                          eos=1.5)


def test_the_output_files_are_the_same_on_1_and_2_cpu_devices(run, tmp_path):
    """(4 devices: the slow test below.)"""
    sources = _test_sources(12)
    counts = ["2", "1"]
    outputs = _decode_on(run, tmp_path, ",".join(counts), MODES[1:], sources, _guided(sources))
    _assert_same_files(outputs, tmp_path, counts, len(sources))


@pytest.mark.slow
def test_the_multi30k_test_set_decodes_the_same_on_1_2_and_4_cpu_devices(tiny_run, tmp_path):
    """The README's tiny run on the whole Multi30k test set (n-best, 4 devices
    and 1: 2 are the fast test's and the next call's), and on its first 100
    lines with prefixes and constraints, and sampled, on 4, 2 and 1."""
    out_dir, _ = tiny_run
    counts = ["4", "2", "1"]
    everything = _test_sources()
    outputs = _decode_on(out_dir, tmp_path, "4,1", MODES[:1], everything, [])
    _assert_same_files(outputs, tmp_path, ["4", "1"], len(everything))
    first = _test_sources(100)
    (tmp_path / "more").mkdir()
    more = _decode_on(out_dir, tmp_path / "more", ",".join(counts), MODES[1:], first,
                      _guided(first))
    _assert_same_files(more, tmp_path / "more", counts, len(first))


# ---------------------------------------------------------------- the pool
def _pool(members, slots=1, said=None):
    from t2t_revival.decode.device_pool import DevicePool

    return DevicePool(members, slots=slots, log=(said if said is not None else []).append)


def _oom():
    import tensorflow as tf
    return tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor [4096,32000]")


def test_a_device_out_of_memory_is_said_once_and_the_others_finish_the_decode():
    from t2t_revival.decode.decode_length import decode_in_length_order

    said, ran = [], {"CPU:0": [], "CPU:1": []}
    lock = threading.Lock()

    def work_on(device):
        def work(chunk):
            if device == "CPU:1":
                raise _oom()
            with lock:
                ran[device].append(chunk)
            return [f"out {i}" for i in chunk]
        return work

    pool = _pool([("/device:CPU:0", work_on("CPU:0")), ("/device:CPU:1", work_on("CPU:1"))],
                 slots=2, said=said)
    lengths = [3 + i % 5 for i in range(40)]
    outputs = decode_in_length_order(lengths, 4, lambda chunk: pool.run(lambda w: w(chunk)),
                                     parallel_batches=4)
    assert outputs == [f"out {i}" for i in range(40)]
    assert len(said) == 1, said
    assert said[0].startswith("CPU:1 ran out of memory (OOM when allocating tensor")
    assert said[0].endswith("the decode goes on on CPU:0")
    assert pool.working() == ["/device:CPU:0"] and list(pool.lost) == ["/device:CPU:1"]
    assert sum(len(c) for c in ran["CPU:0"]) == 40


def test_a_compile_the_cache_disk_fails_is_not_a_device_out_of_memory():
    """Issue 77, part 3: TensorFlow's ResourceExhaustedError of a compile whose
    program it cannot write into the XLA compile cache (a full disk) goes to
    the decoder, which decodes on without XLA; no device is given up."""
    import tensorflow as tf

    said = []

    def cache_full(chunk):
        raise tf.errors.ResourceExhaustedError(
            None, None, "/c/.work-1-2/xla_compile_cache__1__2__XLA_CPU_JIT.pbvm-1.tmp; "
                        "No space left on device [Op:__inference__search_padded_6945]")

    pool = _pool([("/device:CPU:0", cache_full), ("/device:CPU:1", cache_full)], said=said)
    with pytest.raises(tf.errors.ResourceExhaustedError, match="No space left on device"):
        pool.run(lambda work: work([0]))
    assert said == [] and pool.lost == {}
    assert pool.run(lambda work: "taken") == "taken"   # both devices still there


def test_when_every_device_runs_out_of_memory_the_finished_batches_are_kept():
    import tensorflow as tf

    from t2t_revival.decode.decode_length import decode_in_length_order

    calls = []

    def failing_after_one(chunk):
        calls.append(chunk)
        if len(calls) > 1:
            raise _oom()
        return [f"out {i}" for i in chunk]

    def failing(chunk):
        raise _oom()

    pool = _pool([("/device:CPU:0", failing_after_one), ("/device:CPU:1", failing)])
    kept = {}
    with pytest.raises(tf.errors.ResourceExhaustedError):
        decode_in_length_order([5] * 12, 3, lambda chunk: pool.run(lambda w: w(chunk)),
                               parallel_batches=2,
                               on_batch=lambda chunk, outs: kept.update(zip(chunk, outs)))
    assert kept and all(kept[i] == f"out {i}" for i in kept)
    assert len(kept) == 3   # the one batch that finished, taken before the error
    assert pool.working() == []


def test_batches_that_finished_after_a_failing_one_are_still_taken():
    from t2t_revival.decode.decode_length import decode_in_length_order

    first_failed = threading.Event()

    def decode(chunk):
        if 0 in chunk:   # the first batch fails once the others are done
            first_failed.wait(timeout=30)
            raise RuntimeError("a device fault")
        if 9 in chunk:
            first_failed.set()
        return [str(i) for i in chunk]

    kept = {}
    with pytest.raises(RuntimeError, match="a device fault"):
        decode_in_length_order([4] * 12, 3, decode, parallel_batches=4,
                               on_batch=lambda chunk, outs: kept.update(zip(chunk, outs)))
    assert sorted(kept) == list(range(3, 12)), kept


def test_the_trainer_decodes_dev_sentences_on_its_gpus_not_on_a_split_cpu():
    from t2t_revival.train.dev_metric_evaluator import dev_decoding_devices

    gpus = ["/job:localhost/replica:0/task:0/device:GPU:0",
            "/job:localhost/replica:0/task:0/device:GPU:1"]
    assert dev_decoding_devices(gpus) == gpus
    assert dev_decoding_devices(gpus[:1]) == []
    assert dev_decoding_devices(["/device:CPU:0", "/device:CPU:1"]) == []
