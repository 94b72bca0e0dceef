"""The XLA-compiled search, token batching and over-long inputs, on a small
randomly initialized Transformer (fast: no training; random weights give
input-dependent outputs, which is all these equalities need)."""

import dataclasses
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ENV, one_line_error, run_cli

MAX_LENGTH = 32
# Extra decode length kept small: a random model rarely emits EOS.
FAST = "extra_length=6"


@pytest.fixture(scope="module")
def random_run(shared_data, tmp_path_factory):
    """`random_run_dir`, once per module."""
    return random_run_dir(shared_data, tmp_path_factory.mktemp("random_run"))


def random_run_dir(shared_data, work):
    """A training directory holding transformer_tiny (1 layer, vocab 2000,
    max_length 32) with random weights: hparams.json, run.json, vocab.model,
    ckpt-1, made in the folder `work`. Returns (output_dir, 40 validation
    sentences that fit in 32 tokens)."""
    import tensorflow as tf

    from t2t_revival import registry
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary
    from t2t_revival.models.build_model import build_model
    from t2t_revival.run_dir.checkpoint_variables import make_checkpoint
    from t2t_revival.run_dir.run_record import RunRecord
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    work.mkdir(parents=True, exist_ok=True)
    with gzip.open(shared_data / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as f:
        lines = [next(f).strip() for _ in range(3000)]
    vocab = str(work / "vocab.src.model")
    SubwordVocabulary.train(lines, vocab, vocab_size=2000)
    hparams = dataclasses.replace(registry.hparams_sets.get("transformer_tiny")(),
                                  vocab_size=2000, max_length=MAX_LENGTH,
                                  num_hidden_layers=1)
    out_dir = work / "run"
    directory = TrainingDirectory(out_dir)
    directory.write_run_files(hparams, RunRecord(problem="translate_ende_multi30k",
                                                 hparams_set="transformer_tiny"), vocab)
    tf.keras.utils.set_random_seed(3)
    model = build_model(hparams)
    # Glorot-initialized weights give near-uniform, input-blind outputs; wider
    # ones make every input translate differently.
    rng = np.random.default_rng(3)
    for weight in model.weights:
        if len(weight.shape) == 2:
            weight.assign(rng.normal(0.0, 3.0 / np.sqrt(weight.shape[0]), weight.shape))
    make_checkpoint(model).save(str(out_dir / "ckpt"))
    with gzip.open(shared_data / "multi30k" / "val.en.gz", "rt", encoding="utf-8") as f:
        lines = [next(f).strip() for _ in range(300)]
    pieces = SubwordVocabulary(vocab)
    sentences = [s for s in lines if len(pieces.encode(s)) < MAX_LENGTH][:40]
    assert len(sentences) == 40
    return str(out_dir), sentences


def _decoder(out_dir, decode_hparams):
    from decoding import decoder_of
    return decoder_of(out_dir, settings=f"{FAST},{decode_hparams}")


@pytest.fixture(scope="module")
def xla_decodes(random_run):
    """One fresh XLA decoder (batch 16, one batch at a time after the first
    ones), its compiled search spied on from before its first call, and what
    it did on a sequence of calls: the 40 sentences, the same again, then
    their first 8 and first 5 (read by the two tests below, which check the
    same decodes from two sides: the translations and programs, and the
    threads that ran them). Every result is a snapshot taken as it happened."""
    import threading
    import time

    from decoding import decoder_of

    out_dir, sentences = random_run
    # Its first call's traces, compiles and threads are counted: a decoder of its own.
    decoder = decoder_of(out_dir, settings=f"{FAST},xla=true,batch_size=16,parallel_batches=1",
                         fresh=True)
    calls = []  # (thread name, (rows, padded length), start, end)
    search_of = decoder.compiled_search

    def spied(rows):
        search = search_of(rows)

        def run(inputs):
            start = time.perf_counter()
            outputs = search(inputs)
            calls.append((threading.current_thread().name, tuple(inputs.shape), start,
                          time.perf_counter()))
            return outputs
        return run

    decoder.compiled_search = spied
    announced = []  # the `compiling` callback: how many programs, before them
    record = {"decoder": decoder, "main_thread": threading.current_thread().name}

    def translate(name, inputs):
        calls.clear()
        record[name] = {"outputs": decoder.translate(inputs, compiling=announced.append),
                        "calls": list(calls), "announced": list(announced),
                        "searches": list(decoder.compiled_searches),
                        "tracing_count": decoder.compiled_searches[16]
                        .experimental_get_tracing_count() if 16 in decoder.compiled_searches
                        else None}

    translate("first", sentences)
    translate("again", sentences)
    translate("eight", sentences[:8])
    translate("five", sentences[:5])
    return record


def test_xla_search_gives_the_uncompiled_search_translations(random_run, xla_decodes):
    out_dir, sentences = random_run
    reference = _decoder(out_dir, "xla=false,batch_size=16").translate(sentences)
    first = xla_decodes["first"]
    assert first["outputs"] == reference
    assert len(set(reference)) > 30                     # input-dependent outputs
    # 40 sentences, batch 16: batches of 16, 16 and 8 inputs, the last one
    # decoded as 16 rows too; lengths < 32 pad to 16 or 32: a handful of
    # programs, not one per batch, and the search is traced once, not once
    # per length or batch size.
    vocab = xla_decodes["decoder"].vocab
    lengths = {len(vocab.encode(s)) + 1 for s in sentences}
    assert min(lengths) <= 16 < max(lengths)            # both length buckets
    assert first["searches"] == [16]
    assert first["tracing_count"] == 1
    assert xla_decodes["again"]["tracing_count"] == 1
    # Fewer inputs than a batch: as few rows as a power of two holds. (The
    # uncompiled reference: any batch size of 5 or more decodes them as one batch.)
    five = sentences[:5]
    assert xla_decodes["five"]["outputs"] == \
        _decoder(out_dir, "xla=false,batch_size=16").translate(five)
    assert sorted(xla_decodes["five"]["searches"]) == [8, 16]


def test_xla_auto_compiles_once_the_sentences_repay_it(random_run, monkeypatch):
    """xla=auto (the default): a call runs uncompiled until this decoder's
    uncompiled sentences and the call's reach AUTO_XLA_SENTENCES_PER_PROGRAM a
    program not compiled yet; the translations are the same either way, and
    the uncompiled search is traced once for every batch size and length."""
    from decoding import decoder_of
    from t2t_revival.decode import decoder as decoder_module
    from t2t_revival.settings.decode_choices import AUTO_XLA_SENTENCES_PER_PROGRAM

    out_dir, sentences = random_run
    # The uncompiled search's translations, which the XLA search's equal
    # (test_xla_search_gives_the_uncompiled_search_translations, the same
    # sentences and settings).
    uncompiled = _decoder(out_dir, "xla=false,batch_size=16")
    reference = uncompiled.translate(sentences)
    # Its uncompiled sentences and traces are counted: a decoder of its own.
    auto = decoder_of(out_dir, settings=f"{FAST},batch_size=16", fresh=True)
    assert auto.decode_hparams.xla == "auto"
    assert auto.translate(sentences) == reference and not auto.compiled
    assert auto.compiled_searches == {}
    assert auto.uncompiled_search.experimental_get_tracing_count() == 1
    # 40 sentences need 2 programs (16 rows; lengths 16 and 32): compiled
    # once 2 * per_program sentences are reached, counting the 40 above.
    assert not auto.compiles(2 * AUTO_XLA_SENTENCES_PER_PROGRAM - 41, 2)
    assert auto.compiles(2 * AUTO_XLA_SENTENCES_PER_PROGRAM - 40, 2)
    assert auto.compiles(1, 0)           # nothing left to compile: the programs run
    monkeypatch.setattr(decoder_module, "AUTO_XLA_SENTENCES_PER_PROGRAM", 30)
    twenty = uncompiled.translate(sentences[:20])
    assert auto.translate(sentences[:20]) == twenty and auto.compiled   # 60 >= 2 * 30
    assert sorted(auto.compiled_searches) == [16]
    assert _decoder(out_dir, "xla=false").compiles(10 ** 6, 1) is False
    assert _decoder(out_dir, "xla=true").compiles(1, 5) is True


def test_the_first_batch_of_each_program_is_decoded_side_by_side(random_run, xla_decodes):
    """XLA compiles a program on its first batch: the first batches of a
    file's programs run at once, in threads of their own, then the rest; a
    second call with the same programs compiles nothing and runs none ahead."""
    out_dir, sentences = random_run
    uncompiled = _decoder(out_dir, "xla=false,batch_size=16")
    reference = uncompiled.translate(sentences)
    main_thread = xla_decodes["main_thread"]
    first, again, eight = (xla_decodes[k] for k in ("first", "again", "eight"))
    assert first["outputs"] == reference
    assert first["announced"] == [2]
    # 40 sentences of both length buckets: batches of 16, 16 and 8 (as 16 rows).
    calls = first["calls"]
    programs = {shape for _, shape, _, _ in calls}
    assert programs == {(16, 16), (16, 32)} and len(calls) == 3
    ahead = [c for c in calls if c[0].startswith("compile_ahead")]
    assert sorted(shape for _, shape, _, _ in ahead) == sorted(programs)
    assert max(c[2] for c in ahead) < min(c[3] for c in ahead)  # at the same time
    rest = [c for c in calls if c not in ahead]
    assert len(rest) == 1 and rest[0][0] == main_thread
    assert rest[0][2] > max(c[3] for c in ahead)                # after them
    assert again["outputs"] == reference
    assert len(again["calls"]) == 3
    assert not any(c[0].startswith("compile_ahead") for c in again["calls"])
    assert again["announced"] == [2]  # nothing compiled, nothing announced
    # One new program (a batch of 8 rows): announced, and compiled in the
    # caller's thread (nothing to run side by side).
    assert eight["outputs"] == uncompiled.translate(sentences[:8])
    assert eight["announced"] == [2, 1]
    assert [c[0] for c in eight["calls"]] == [main_thread]


def test_the_progress_bar_says_what_the_wait_for_compilation_is():
    import io

    from t2t_revival.process.progress_bar import ProgressBar

    stream = io.StringIO()
    bar = ProgressBar(stream)
    bar.compiling(3)
    bar(0, 10)
    lines = stream.getvalue().split("\n")
    assert lines[0].startswith("compiling the search for XLA: 3 programs (one per batch size")
    assert lines[1].startswith("\rdecoding [") and "0/10" in lines[1]


def test_token_batching_gives_the_sentence_batching_translations(random_run):
    from t2t_revival.decode.decode_length import length_sorted_batches

    out_dir, sentences = random_run
    tokens = _decoder(out_dir, "batch_tokens=100")
    # Inputs of at most 16 tokens: every batch pads to 16, so every output gets
    # the same length limit (which this model, never ending a sentence,
    # reaches) however they are batched.
    short = [s for s in sentences if len(tokens.vocab.encode(s)) + 1 <= 16]
    assert len(short) >= 12
    by_sentences = _decoder(out_dir, "batch_size=8").translate(short)
    assert tokens.translate(short) == by_sentences
    lengths = [len(tokens.vocab.encode(s)) + 1 for s in short]
    sizes = [len(b) for b in length_sorted_batches(lengths, 8, 100, MAX_LENGTH)]
    assert max(sizes) == 6 and sum(sizes) == len(short)  # 6 x 16 tokens fit in 100


def test_an_over_long_line_is_cut_and_counted(random_run):
    from t2t_revival.errors import UserError

    out_dir, sentences = random_run
    long = " ".join(sentences[:4])                      # far more than 32 tokens
    # (test_token_batching's decoder: 3 lines are one batch at any batch size >= 3.)
    decoder = _decoder(out_dir, "batch_size=8")
    assert len(decoder.vocab.encode(long)) + 1 > MAX_LENGTH
    outputs = decoder.translate([sentences[5], long, sentences[6]])
    assert decoder.cut_inputs == 1
    assert len(outputs) == 3 and all(outputs)           # translated, not dropped
    assert outputs[1] == decoder.translate([long])[0]   # the cut line decodes the same alone
    assert decoder.cut_inputs == 1
    decoder.translate(sentences[:3])
    assert decoder.cut_inputs == 0                      # counts the last call only
    # Cut as the SavedModel cuts it: the first 31 tokens, then EOS.
    from t2t_revival.special_ids import EOS_ID
    assert decoder.encode([long])[0] == decoder.vocab.encode(long)[:MAX_LENGTH - 1] + [EOS_ID]
    refusing = _decoder(out_dir, "long_inputs=refuse")
    with pytest.raises(UserError, match=r"input line 2 has \d+ tokens.*max_length of 32"):
        refusing.translate([sentences[5], long])


@pytest.mark.slow
def test_the_decoder_cli_reports_the_cut_lines(random_run, tmp_path):
    out_dir, sentences = random_run
    source = tmp_path / "in.en"
    source.write_text("\n".join([sentences[0], " ".join(sentences[:4]), sentences[1]]) + "\n",
                      encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "t2t_revival.cli.decoder",
                          f"--output_dir={out_dir}", f"--decode_from_file={source}",
                          f"--decode_to_file={tmp_path / 'out.de'}",
                          f"--decode_hparams={FAST}"],
                         capture_output=True, text=True, env=dict(ENV, T2T_PHASE_TIMES="1"),
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "1 of 3 input lines were longer than 32 tokens" in out.stderr, out.stderr[-2000:]
    # T2T_PHASE_TIMES=1: where the start-up went, phase by phase, in order (issue 61).
    phases = [line.split() for line in out.stderr.splitlines()
              if line.startswith("t2t-phase: ")]
    assert [p[1] for p in phases] == ["checked", "imported", "built", "restored",
                                      "first_batch"], out.stderr[-2000:]
    stamps = [float(p[2]) for p in phases]
    assert stamps == sorted(stamps)
    assert len((tmp_path / "out.de").read_text(encoding="utf-8").splitlines()) == 3
    # The refusal, in this process (its one line is the subject, not the process's start-up).
    refused = run_cli("decoder", f"--output_dir={out_dir}", f"--decode_from_file={source}",
                      f"--decode_to_file={tmp_path / 'refused.de'}",
                      f"--decode_hparams={FAST},long_inputs=refuse")
    one_line_error(refused, "t2t-decoder", "input line 2", "long_inputs=cut")
    assert not (tmp_path / "refused.de").exists()


# Loads a SavedModel with tensorflow and tensorflow_text only; argv: path,
# a JSON list of batches (lists of sentences). Prints the outputs of each.
_LOAD = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
model = tf.saved_model.load(sys.argv[1])
serve = model.signatures["serving_default"]
outputs = [serve(sentences=tf.constant(batch))["outputs"].numpy()
           for batch in json.loads(sys.argv[2])]
print(json.dumps([[o.decode("utf-8") for o in batch] for batch in outputs]))
"""


@pytest.mark.slow
def test_xla_saved_model_loads_and_serves_like_the_decoder(random_run, tmp_path):
    from t2t_revival.settings.decode_hparams import parse_decode_hparams
    from t2t_revival.export.saved_model_export import export_saved_model

    out_dir, sentences = random_run
    batch = sentences[:5] + ["", " ".join(sentences[:4])]     # empty and over-long rows
    decoder = _decoder(out_dir, "batch_size=8")
    # (Each batch alone: its padded length sets its max decode length.)
    expected, expected_two = decoder.translate(batch), decoder.translate(batch[:2])
    path = export_saved_model(out_dir, decode_overrides=parse_decode_hparams(FAST),
                              export_dir=str(tmp_path / "x"), version=1, xla=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    # 7 rows: the search traced for 8 (stages of halving size); 2 rows: the
    # one traced for any number of rows.
    out = subprocess.run([sys.executable, "-I", "-c", _LOAD, path, json.dumps([batch, batch[:2]])],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [expected, expected_two]


def _benchmark(script, *args, in_process=False):
    """`python -m benchmarks.<script> ARGS`, finished: in a process of its own,
    or with `in_process` in this one (as `harness.run` runs it: a UserError
    is one line and exit 2). A text `subprocess.CompletedProcess`.

    decode_profile and decode_speed set TensorFlow's threads (and XLA's dump
    flags) for their whole process before loading a model, which a process
    that has run TensorFlow already cannot: they always get their own;
    decode_steps sets nothing of the kind and runs in this one."""
    if not in_process:
        return subprocess.run([sys.executable, "-m", f"benchmarks.{script}", *args],
                              env=ENV, capture_output=True, text=True, timeout=600)
    import contextlib
    import importlib
    import io

    from benchmarks import harness

    module = importlib.import_module(f"benchmarks.{script}")
    stdout, stderr = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, [script, *args]
    status = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                harness.run(module.main, module.PROG)
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess([script, *args], status, stdout.getvalue(),
                                       stderr.getvalue())


def _benchmark_report(script, random_run, tmp_path, *flags, in_process=False) -> dict:
    """The JSON report of `python -m benchmarks.<script>` on the random
    model's first 6 sentences, with the short decode length and `flags`
    (`_benchmark`)."""
    out_dir, sentences = random_run
    source = tmp_path / "source.txt"
    source.write_text("\n".join(sentences[:6]) + "\n", encoding="utf-8")
    proc = _benchmark(script, f"--output_dir={out_dir}", f"--source={source}",
                      f"--decode_hparams={FAST}", *flags, in_process=in_process)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_decode_profile_splits_the_compiled_search_by_part(random_run, tmp_path):
    """benchmarks/decode_profile.py: XLA's trace of the compiled search, each
    operation named after its TensorFlow op, summed by part of the model. Every
    traced operation is found in the dumped HLO, each decoding step calls the
    output projection once, and the decoder layers' parts are there."""
    report = _benchmark_report("decode_profile", random_run, tmp_path,
                               "--batch_size=2", "--threads=1")
    parts = report["parts"]
    assert report["sentences"] == 6 and report["unmapped_ms"] == 0
    # 3 batches of 2, each of at least one step and at most the length limit
    assert 3 <= report["steps"] <= 3 * (MAX_LENGTH + 6)
    for part in ("output projection", "decoder self-attention",
                 "decoder cross-attention", "decoder feed-forward", "top-k",
                 "encoder and set-up"):
        assert parts[part]["ms"] > 0, part
    assert abs(sum(p["share"] for p in parts.values()) - 1) < 0.01


def test_decode_steps_counts_the_staged_loops_steps(random_run, tmp_path):
    """benchmarks/decode_steps.py: every step of beam search's staged loop
    counted, by stage size, with the batch elements still searching. 6
    sentences at batch 8 run as one batch of 8 rows (the last sentence
    repeated), in stages of 8 and 4 elements; at batch 1 every step is of
    one element, which searches until its last step."""
    report = _benchmark_report("decode_steps", random_run, tmp_path, "--batch_size=8",
                               in_process=True)
    stages = {int(k): v for k, v in report["stage_steps"].items()}
    assert report["sentences"] == 6 and set(stages) <= {8, 4} and stages[8] >= 1
    assert sum(stages.values()) == report["steps"] <= MAX_LENGTH + 6
    assert report["element_steps"] == sum(k * v for k, v in stages.items())
    # 8 rows search at the first step; the 2 repeated rows are among them.
    assert 8 <= report["searching_element_steps"] <= report["element_steps"]
    assert report["searching_share"] == round(
        report["searching_element_steps"] / report["element_steps"], 4)

    single = _benchmark_report("decode_steps", random_run, tmp_path, "--batch_size=1",
                               in_process=True)
    assert single["stage_steps"] == {"1": single["steps"]}
    assert single["searching_element_steps"] == single["element_steps"] == single["steps"]
    assert single["searching_share"] == 1.0
    assert 6 <= single["steps"] <= 6 * (MAX_LENGTH + 6) and single["target_tokens"] >= 6


def test_decode_steps_refuses_a_search_without_beams_in_one_line(random_run, tmp_path):
    out_dir, _ = random_run
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.decode_steps",
         f"--output_dir={out_dir}", "--decode_hparams=beam_size=1"],
        env=ENV, capture_output=True, text=True, timeout=600)
    one_line_error(proc, "decode_steps", "beam_size >= 2")


@pytest.mark.parametrize("decode_hparams", ["beam_size=1", "sampling=true"])
def test_decode_steps_refuses_a_search_without_beams_before_loading_a_model(
        decode_hparams, tmp_path):
    """The refusal of what --decode_hparams asks for comes first: no model
    (here not even a run) is loaded for a setting that cannot be counted."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.decode_steps",
         f"--output_dir={tmp_path / 'missing'}", f"--decode_hparams={decode_hparams}"],
        env=ENV, capture_output=True, text=True, timeout=600)
    one_line_error(proc, "decode_steps", "beam_size >= 2")


def test_decode_speed_times_each_engine_in_rounds_with_its_own_thread_setting(
        random_run, tmp_path):
    """benchmarks/decode_speed.py --rounds: every engine timed in each round
    (the median reported, each round listed, a ratio per round), CTranslate2
    with a thread setting of its own, and the XLA search equal to the
    uncompiled one."""
    pytest.importorskip("ctranslate2")
    report = _benchmark_report("decode_speed", random_run, tmp_path, "--batch_sizes=2",
                               "--threads=1", "--ct2_threads=1",
                               "--ct2_parallel_batches=2", "--rounds=3")
    assert (report["threads"], report["parallel_batches"], report["ct2_threads"],
            report["ct2_parallel_batches"], report["rounds"]) == (1, 1, 1, 2, 3)
    entries = report["results"] + report["ctranslate2_results"]
    assert [e.get("search", e.get("compute_type")) for e in entries] == [
        "uncompiled", "xla", "float32"]
    for entry in entries:
        assert entry["sentences"] == 6 and len(entry["round_tokens_per_second"]) == 3
        assert entry["target_tokens_per_second"] == sorted(entry["round_tokens_per_second"])[1]
    assert [e["same_output_as_uncompiled"] for e in report["results"]] == [6, 6]
    assert [e["parallel_batches"] for e in report["results"]] == [1, 1]
    assert (ct2_entry := report["ctranslate2_results"][0])["intra_threads"] == 1
    assert ct2_entry["inter_threads"] == 2
    (ratio,) = report["ratios"]
    ct2 = report["ctranslate2_results"][0]
    for entry in report["results"]:
        search = entry["search"]
        assert ratio[f"{search}_vs_ctranslate2_float32"] == pytest.approx(
            entry["target_tokens_per_second"] / ct2["target_tokens_per_second"], abs=0.01)
        assert ratio[f"{search}_round_ratios"] == pytest.approx([
            ours / theirs for ours, theirs in
            zip(entry["round_tokens_per_second"], ct2["round_tokens_per_second"])], abs=0.01)


def test_decode_speed_leaves_a_zero_setting_at_each_engines_default(random_run, tmp_path):
    """0: our decoder's parallel_batches and the CTranslate2 translator's
    threads as each resolves them by default, reported per entry."""
    pytest.importorskip("ctranslate2")
    import tensorflow as tf

    from t2t_revival.decode.ctranslate2_translator import thread_setting
    from t2t_revival.process.usable_cores import usable_cores

    report = _benchmark_report("decode_speed", random_run, tmp_path, "--batch_sizes=2",
                               "--searches=xla", "--parallel_batches=0", "--ct2_threads=0",
                               "--ct2_parallel_batches=0")
    (ours,), (theirs,) = report["results"], report["ctranslate2_results"]
    assert ours["parallel_batches"] == (1 if tf.config.list_physical_devices("GPU") else 2)
    assert (theirs["intra_threads"], theirs["inter_threads"]) == thread_setting(
        0, 0, False, usable_cores())


@pytest.mark.parametrize("flags, needle", [(["--rounds=0"], "--rounds"),
                                           (["--ct2_threads=-1"], "--ct2_threads"),
                                           (["--searches=xla,fast"], "--searches")])
def test_decode_speed_refuses_a_bad_setting_in_one_line(flags, needle, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.decode_speed",
         f"--output_dir={tmp_path}", *flags],
        env=ENV, capture_output=True, text=True, timeout=600)
    one_line_error(proc, "decode_speed", needle)


@pytest.mark.parametrize("script, flags", [("decode_profile", []),
                                           ("decode_speed", ["--no-ctranslate2"]),
                                           ("decode_steps", [])])
def test_a_decoding_benchmark_without_a_model_says_so_in_one_line(script, flags, tmp_path):
    proc = _benchmark(script, f"--output_dir={tmp_path / 'missing'}", *flags,
                      in_process=script == "decode_steps")
    one_line_error(proc, script, "--output_dir")
