"""The decoding modes beside beam search on tiny random-weight models: forced
scoring (`--score_file`), ensembles (`--checkpoint_path=a,b`), sampling, and
n-best lists in each; their CLI flags and user errors.

Fast: the models are untrained (tests/random_run_dir.py), so only the
arithmetic is checked, against numpy and against beam search's own scores.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from conftest import one_line_error, run_cli
from random_run_dir import make_random_run_dir, make_vocab

SOURCES = ["A man is riding a bike.", "Two dogs play in the snow near a tall tree.",
           "Hello", "A woman in a red coat is reading a newspaper on a bench."]
TARGETS = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "", "Eine Frau liest."]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two random models of one vocabulary, one of another vocabulary, one
    with a larger vocab_size."""
    root = tmp_path_factory.mktemp("decode_modes")
    vocab = make_vocab(root / "vocab.model")
    other_vocab = make_vocab(root / "other_vocab.model", vocab_size=340, lines=100)
    return {
        "a": make_random_run_dir(root / "a", vocab, seed=1),
        "b": make_random_run_dir(root / "b", vocab, seed=2, step=7, d_model=48, num_heads=4),
        "other_vocab": make_random_run_dir(root / "c", other_vocab, seed=3),
        "wide": make_random_run_dir(root / "d", vocab, seed=4, vocab_size=400),
        # "a"'s weights (float32 in the checkpoint), trained "in bfloat16"
        "a_bf16": make_random_run_dir(root / "e", vocab, seed=1,
                                      mixed_precision="mixed_bfloat16"),
    }


def _decoder(*args):
    """t2t-decoder ARGS, in this process (the flags, output and errors are the
    subject here, not the process)."""
    return run_cli("decoder", *args)


def _np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _batch(decoder, sentences):
    """Encoded, EOS-terminated, PAD-padded int32 [B, S] of `sentences`."""
    rows = [decoder.vocab.encode(s) + [1] for s in sentences]
    width = max(len(r) for r in rows)
    return tf.constant([r + [0] * (width - len(r)) for r in rows], tf.int32)


# ------------------------------------------------------------------ scoring
def test_scores_equal_the_teacher_forced_log_prob_in_numpy(runs):
    from decoding import decoder_of

    decoder = decoder_of(runs["a"], settings="alpha=0.6,batch_size=3")
    scored = decoder.score(list(zip(SOURCES, TARGETS)))
    for (source, target), (log_prob, score) in zip(zip(SOURCES, TARGETS), scored):
        inputs = np.array([decoder.vocab.encode(source) + [1]], np.int32)
        targets = np.array([decoder.vocab.encode(target) + [1]], np.int32)
        logits = decoder.model({"inputs": inputs, "targets": targets}).numpy()[0]
        expected = _np_log_softmax(logits.astype(np.float64))[
            np.arange(targets.shape[1]), targets[0]].sum()
        assert log_prob == pytest.approx(expected, abs=1e-3)
        assert score == pytest.approx(expected / ((5 + targets.shape[1]) / 6) ** 0.6, abs=1e-3)
    assert len({round(lp, 3) for lp, _ in scored}) == len(scored)


def test_scores_of_the_beam_outputs_equal_the_beam_scores(runs):
    from decoding import decoder_of
    from t2t_revival.decode.forced_scoring import score_targets

    decoder = decoder_of(runs["a"], settings="beam_size=4,alpha=0.6,return_beams=true")
    inputs = _batch(decoder, SOURCES)
    # The decoder's compiled search, with a length limit of the test's choice.
    search = tf.function(decoder.search_batch, jit_compile=True, autograph=False)
    finished = cut = 0
    for length in (20, 3):                 # 3: some hypotheses are cut without EOS
        sequences, beam_scores = search(inputs, length)                # [B, 4, L], [B, 4]
        sequences, beam_scores = sequences.numpy(), beam_scores.numpy()
        rows = sequences.reshape(-1, length)
        ended = (rows == 1).any(axis=1)
        finished, cut = finished + ended.sum(), cut + (~ended).sum()
        _, scores = score_targets(decoder.model, tf.repeat(inputs, 4, axis=0), rows, 0.6)
        np.testing.assert_allclose(scores.numpy(), beam_scores.reshape(-1), atol=2e-4)
    assert finished >= 4 and cut >= 4


def test_score_file_cli_prints_each_pair_in_order(runs, tmp_path):
    from decoding import decoder_of

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SOURCES, TARGETS)),
                     encoding="utf-8")
    out = _decoder(f"--output_dir={runs['a']}", f"--score_file={pairs}",
                   "--decode_hparams=alpha=1.0,batch_size=2")
    assert out.returncode == 0, out.stderr[-2000:]
    got = [tuple(float(x) for x in line.split("\t")) for line in out.stdout.splitlines()]
    expected = decoder_of(runs["a"], settings="alpha=1.0").score(list(zip(SOURCES, TARGETS)))
    np.testing.assert_allclose(got, expected, atol=2e-5)
    to_file = tmp_path / "scores.txt"
    out = _decoder(f"--output_dir={runs['a']}", f"--score_file={pairs}",
                   f"--decode_to_file={to_file}", "--decode_hparams=alpha=1.0")
    assert out.returncode == 0 and out.stdout == "", out.stderr[-2000:]
    lines = to_file.read_text().splitlines()
    assert all(re.fullmatch(r"-?\d+\.\d{6}\t-?\d+\.\d{6}", line) for line in lines), lines
    np.testing.assert_allclose([[float(x) for x in l.split("\t")] for l in lines], got,
                               atol=2e-5)


def test_score_file_bad_lines_are_one_line(runs, tmp_path):
    from t2t_revival.errors import UserError
    from t2t_revival.files.text_lines import read_text_pairs

    pairs = tmp_path / "pairs.tsv"
    for content, message in [
        (b"a\tb\n\nc\td\n", "line 2 of the score_file file is empty"),
        (b"a\tb\nno tab here\n", "line 2 of the score_file file has no tab"),
        (b"a\tb\tc\n", "line 1 of the score_file file has 2 tabs"),
        (b"a\tb\n\xff\xfe\tx\n", "at line 2"),
    ]:
        pairs.write_bytes(content)
        with pytest.raises(UserError, match=re.escape(message)):
            read_text_pairs(str(pairs), "score_file")
    pairs.write_bytes(b"a\tb\n\tx\ny\t\n")         # empty sides are pairs
    assert read_text_pairs(str(pairs), "score_file") == [("a", "b"), ("", "x"), ("y", "")]
    pairs.write_bytes(b"a\tb\nno tab here\n")
    one_line_error(_decoder(f"--output_dir={runs['a']}", f"--score_file={pairs}"),
                   "t2t-decoder", "line 2 of the score_file file has no tab")


# ---------------------------------------------------------------- ensembles
def test_ensemble_averages_the_probabilities(runs):
    from t2t_revival.decode.ensemble import Ensemble
    from t2t_revival.models.trained_model import TrainedModel

    a, b = (TrainedModel.load(runs[k]).model for k in ("a", "b"))
    ensemble = Ensemble([a, b])
    inputs = tf.constant([[5, 9, 30, 1, 0], [7, 1, 0, 0, 0]], tf.int32)
    targets = tf.constant([[12, 40, 1], [3, 1, 0]], tf.int32)
    combined = ensemble.decode(targets, *ensemble.encode(inputs)).numpy()
    probs = [np.exp(_np_log_softmax(m({"inputs": inputs, "targets": targets}).numpy()
                                    .astype(np.float64))) for m in (a, b)]
    np.testing.assert_allclose(combined, np.log((probs[0] + probs[1]) / 2), atol=1e-4)
    # The incremental step agrees with the teacher-forced pass.
    cache = ensemble.init_cache(*ensemble.encode(inputs), 8)
    step_log_probs, _ = ensemble.decode_step(tf.zeros([2], tf.int32), cache, 0)
    np.testing.assert_allclose(step_log_probs.numpy(), combined[:, 0], atol=1e-4)


def _beam(model, inputs, length=16, beam=3):
    from t2t_revival.decode.beam_search import beam_search

    encoded = model.encode(inputs)
    cache = model.init_cache(*encoded, length)
    seqs, scores = beam_search(model.decode_step, cache, inputs.shape[0], beam, 0.6, length)
    return seqs.numpy(), scores.numpy()


def test_an_ensemble_of_one_or_of_copies_equals_the_model(runs):
    from decoding import decoder_of
    from t2t_revival.decode.ensemble import Ensemble

    single = decoder_of(runs["a"], settings="return_beams=true")
    inputs = _batch(single, SOURCES)
    seqs, scores = _beam(single.model, inputs)
    for models in ([single.model], [single.model, single.model]):
        e_seqs, e_scores = _beam(Ensemble(models), inputs)
        np.testing.assert_array_equal(e_seqs, seqs)
        np.testing.assert_allclose(e_scores, scores, atol=1e-5)
    checkpoint = single.checkpoint_path
    twice = decoder_of(runs["a"], f"{checkpoint},{checkpoint}", "return_beams=true")
    assert isinstance(twice.model, Ensemble) and len(twice.model.models) == 2
    assert twice.translate(SOURCES) == single.translate(SOURCES)
    np.testing.assert_allclose(twice.score(list(zip(SOURCES, TARGETS))),
                               single.score(list(zip(SOURCES, TARGETS))), atol=1e-5)
    # Two different models (of two shapes, from two directories) give other beams.
    pair = decoder_of(runs["a"], f"{checkpoint},{runs['b']}", "return_beams=true")
    assert pair.checkpoint_path.endswith("ckpt-7")
    assert pair.translate(SOURCES) != single.translate(SOURCES)


# The decode hparams of `ensemble_cli`'s run.
ENSEMBLE_CLI_SETTINGS = "return_beams=true,beam_size=2,alpha=1.0"


@pytest.fixture(scope="module")
def ensemble_cli(runs, tmp_path_factory):
    """t2t-decoder of an ensemble (runs a and b) on SOURCES, 2 beams each,
    once for the two tests that check it (`test_ensemble_cli_...`, its file;
    `test_t2t_decoder_and_exporter_parse_...`, what it parsed), with every
    parse of a settings string recorded. Returns (the finished run, its
    source file, the translations file, the strings parsed)."""
    import t2t_revival.settings.decode_hparams as decode_hparams

    folder = tmp_path_factory.mktemp("ensemble_cli")
    source, hyp = folder / "src.en", folder / "hyp.de"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    parsed = []
    parse = decode_hparams.parse_typed_pairs
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(decode_hparams, "parse_typed_pairs",
                            lambda text, *a, **k: parsed.append(text) or parse(text, *a, **k))
        out = _decoder(f"--output_dir={runs['a']}",
                       f"--checkpoint_path={runs['a']},{runs['b']}",
                       f"--decode_from_file={source}", f"--decode_to_file={hyp}",
                       f"--decode_hparams={ENSEMBLE_CLI_SETTINGS}")
    return out, source, hyp, parsed


def test_ensemble_cli_and_its_one_line_errors(runs, ensemble_cli, tmp_path):
    out, source, hyp, _ = ensemble_cli
    assert out.returncode == 0, out.stderr[-2000:]
    assert [l.count("\t") for l in hyp.read_text().splitlines()] == [1] * len(SOURCES)
    hyp = tmp_path / "hyp.de"
    one_line_error(_decoder(f"--output_dir={runs['a']}",
                            f"--checkpoint_path={runs['a']},{runs['other_vocab']}",
                            f"--decode_from_file={source}", f"--decode_to_file={hyp}"),
                   "t2t-decoder", "differs from")


def test_ensemble_user_errors(runs, tmp_path):
    from decoding import decoder_of
    from t2t_revival.errors import UserError

    for checkpoints, message in [
        (f"{runs['a']},{runs['other_vocab']}", "differs from"),
        (f"{runs['a']},{runs['wide']}", "vocab_size 400"),
        (f"{runs['a']},{tmp_path}/ckpt-3", "no checkpoint at"),
        (f"{runs['a']},{tmp_path}", "no checkpoint in"),
    ]:
        with pytest.raises(UserError, match=message):
            decoder_of(runs["a"], checkpoints)
    # t2t-decoder's --checkpoint_path with an empty entry, before any model loads.
    one_line_error(run_cli("decoder", f"--output_dir={runs['a']}", "--decode_interactive",
                           f"--checkpoint_path={runs['a']},"), "t2t-decoder", "empty entry")


# ----------------------------------------------------------------- sampling
def test_sampling_through_the_decoder_is_seeded(runs):
    from decoding import decoder_of

    settings = "sampling=true,samples_per_input=3,return_beams=true,top_p=0.95,seed=5"
    first = decoder_of(runs["a"], settings=settings)
    samples = first.translate(SOURCES)
    assert first.translate(SOURCES) == samples                       # a call repeats
    # Another decoder of the same seed (a new one: the kept one is `first`).
    assert decoder_of(runs["a"], settings=settings, fresh=True).translate(SOURCES) == samples
    assert decoder_of(runs["a"], settings=settings.replace("seed=5", "seed=6")
                   ).translate(SOURCES) != samples
    assert all(line.count("\t") == 2 for line in samples)
    greedy = decoder_of(runs["a"], settings="beam_size=1").translate(SOURCES)
    top1 = decoder_of(runs["a"], settings="sampling=true,top_k=1,seed=9").translate(SOURCES)
    assert top1 == greedy
    # An ensemble samples too (n-best lists in every mode).
    ensemble = decoder_of(runs["a"], f"{runs['a']},{runs['b']}", settings).translate(SOURCES)
    assert all(line.count("\t") == 2 for line in ensemble) and ensemble != samples


def test_sampling_cli_names_its_output_and_checks_its_settings(runs, tmp_path):
    source = tmp_path / "src.en"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    out = _decoder(f"--output_dir={runs['a']}", f"--decode_from_file={source}",
                   "--decode_hparams=sampling=true,temperature=0.8,top_p=0.9,seed=3")
    assert out.returncode == 0, out.stderr[-2000:]
    written = tmp_path / "src.en.transformer.random_tiny.sample.temp0.8.top_k0.top_p0.9.seed3.decodes"
    assert len(written.read_text(encoding="utf-8").splitlines()) == len(SOURCES)
    one_line_error(_decoder(f"--output_dir={runs['a']}", f"--decode_from_file={source}",
                            "--decode_hparams=top_p=0.9"), "t2t-decoder", "add sampling=true")


def test_sampling_settings_are_checked():
    from t2t_revival.settings.decode_hparams import (DecodeHParams, DecodeHParamsError,
                                            parse_decode_hparams)
    from t2t_revival.settings.hparams import HParams

    dhp = DecodeHParams.from_hparams(HParams(), parse_decode_hparams(
        "sampling=true,temperature=0.7,top_k=20,top_p=0.9,samples_per_input=4,seed=3"))
    assert (dhp.sampling, dhp.temperature, dhp.top_k, dhp.top_p, dhp.samples_per_input,
            dhp.seed) == (True, 0.7, 20, 0.9, 4, 3)
    for settings, message in [("top_p=0.9", "add sampling=true"),
                              ("seed=2", "add sampling=true"),
                              ("sampling=true,top_p=0", r"'top_p' must be in \(0, 1\]"),
                              ("sampling=true,top_p=1.01", r"'top_p' must be in \(0, 1\]"),
                              ("sampling=true,top_k=-1",
                               r"'top_k' must be in \[0, inf\) \(0 keeps every token\)"),
                              ("sampling=true,temperature=0",
                               r"'temperature' must be in \(0, inf\) \(logits / temperature"),
                              ("sampling=true,samples_per_input=0",
                               r"'samples_per_input' must be in \[1, inf\)"),
                              ("sampling=true,parallel_batches=2",
                               "'parallel_batches' must be 1 with sampling=true"),
                              ("parallel_batches=-1", r"'parallel_batches' must be in \[0, inf\)")]:
        with pytest.raises(DecodeHParamsError, match=message):
            DecodeHParams.from_hparams(HParams(), parse_decode_hparams(settings))


# -------------------------------------------------- what every mode writes
def test_a_model_that_spells_line_breaks_and_tabs_gives_one_line_each(tmp_path):
    """Byte fallback gives every model pieces for \\n, \\r and \\t: a translation
    that spelled one would split an output file's lines or an n-best line's
    columns. The decoder and the SavedModel write them as spaces alike."""
    import t2t_revival.decode.decoder as decoder_module
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary
    from decoding import decoder_of
    from t2t_revival.export.translation_module import TranslationModule

    vocab_file = make_vocab(tmp_path / "vocab.model")
    vocab = SubwordVocabulary(vocab_file)
    breaks = {i for i in range(vocab.vocab_size)
              if vocab.id_to_piece(i) in ("<0x0A>", "<0x0D>", "<0x09>")}
    assert len(breaks) == 3
    run = make_random_run_dir(tmp_path / "run", vocab_file, seed=6,
                              boost={i: 3.0 for i in breaks})
    # (Uncompiled: the same translations, without an XLA compile per search.)
    raw = decoder_of(run, settings="return_beams=true,xla=false")
    real_one_field = decoder_module.one_field
    try:
        decoder_module.one_field = lambda text: text
        spelled = raw.translate(SOURCES)
    finally:
        decoder_module.one_field = real_one_field
    # The model spells line breaks, and tabs beyond the n-best columns' 3.
    assert any(c in "".join(spelled) for c in "\n\r"), spelled
    assert sum(line.count("\t") for line in spelled) > 3 * len(spelled), spelled
    nbest = raw.translate(SOURCES)
    assert [line.count("\t") for line in nbest] == [3] * len(SOURCES)
    assert not any(c in line for line in nbest for c in "\n\r")
    decoder = decoder_of(run, settings="xla=false")
    best = decoder.translate(SOURCES)
    assert not any(c in line for line in best for c in "\n\r\t")
    assert best == [line.split("\t")[0] for line in nbest]
    module = TranslationModule(decoder.model, decoder.hparams, decoder.decode_hparams,
                               vocab)
    served = module.serve(tf.constant(SOURCES))["outputs"].numpy()
    assert [t.decode("utf-8") for t in served] == best


def test_one_checkpoint_of_another_run_is_decoded_with_that_run_s_model(runs):
    """`--output_dir=A --checkpoint_path=B/ckpt-N` builds B's model from B's
    hparams.json and checks B's vocabulary against A's, as an ensemble's
    member is: B's weights are never read into A's model, or decoded with
    another vocabulary."""
    from decoding import decoder_of
    from t2t_revival.errors import UserError

    uncompiled = "xla=false"   # the same translations, without XLA compiles
    alone = decoder_of(runs["b"], settings=uncompiled).translate(SOURCES)
    assert decoder_of(runs["a"], f"{runs['b']}/ckpt-7", uncompiled).translate(SOURCES) == alone
    assert decoder_of(runs["a"], runs["b"], uncompiled).translate(SOURCES) == alone
    with pytest.raises(UserError, match="differs from"):
        decoder_of(runs["a"], f"{runs['other_vocab']}/ckpt-1")


def test_a_run_trained_in_mixed_precision_decodes_in_float32(runs):
    """Mixed precision is a training setting: the decoder (alone or in an
    ensemble) builds the model in float32, so a run trained with
    mixed_bfloat16 translates and scores as the float32 run of the same
    weights, not with bfloat16 rounding in every beam score."""
    from decoding import decoder_of
    from t2t_revival.models.trained_model import TrainedModel
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    assert TrainingDirectory(runs["a_bf16"]).read_hparams().mixed_precision == "mixed_bfloat16"
    loaded = TrainedModel.load(runs["a_bf16"])
    assert loaded.hparams.mixed_precision == "float32"
    assert loaded.model.compute_dtype == "float32"
    pairs = list(zip(SOURCES, TARGETS))
    f32 = decoder_of(runs["a"], settings="return_beams=true")
    for decoder in (decoder_of(runs["a_bf16"], settings="return_beams=true"),
                    decoder_of(runs["a"], f"{runs['a_bf16']}/ckpt-1", "return_beams=true"),
                    decoder_of(runs["a_bf16"], f"{runs['a_bf16']}/ckpt-1,{runs['a_bf16']}",
                               "return_beams=true")):
        models = getattr(decoder.model, "models", [decoder.model])
        assert [m.compute_dtype for m in models] == ["float32"] * len(models)
        assert decoder.translate(SOURCES) == f32.translate(SOURCES)
        np.testing.assert_allclose(decoder.score(pairs), f32.score(pairs), atol=1e-5)


def test_the_exporters_refuse_what_they_cannot_fix_before_loading(runs, tmp_path):
    from t2t_revival.settings.decode_hparams import parse_decode_hparams
    from t2t_revival.errors import UserError
    from t2t_revival.export.ctranslate2_export import export_ctranslate2
    from t2t_revival.export.saved_model_export import export_saved_model

    pytest.importorskip("ctranslate2")
    for export, name, allowed in ((export_saved_model, "SavedModel",
                                   "length_penalty, extra_length, early_stop, alignments, "
                                   "alignment_layer, alignment_heads, max_constraint_tokens"),
                                  (export_ctranslate2, "CTranslate2", "extra_length, batch_size")):
        for settings in ("sampling=true,top_p=0.9", "long_inputs=refuse",
                         "batch_tokens=512", "return_beams=true", "sampling=true,samples_per_input=3"):
            with pytest.raises(UserError, match=f"the {name} export fixes only beam_size, "
                                                f"alpha, {allowed} "):
                export(runs["a"], decode_overrides=parse_decode_hparams(settings),
                       export_dir=str(tmp_path / "e"))
        with pytest.raises(UserError, match="belongs to the training directory"):
            export(runs["a"], f"{runs['b']}/ckpt-7", export_dir=str(tmp_path / "e"))
    assert not (tmp_path / "e").exists()
    with pytest.raises(UserError, match="the SavedModel export fixes only"):
        export_saved_model(runs["a"], decode_overrides=parse_decode_hparams("batch_size=8"))
    with pytest.raises(UserError, match="the CTranslate2 export fixes only"):
        export_ctranslate2(runs["a"],
                           decode_overrides=parse_decode_hparams("early_stop=best_finished"))


def test_scoring_batches_by_tokens_too(runs):
    from decoding import decoder_of

    pairs = list(zip(SOURCES, TARGETS)) * 3
    by_sentences = decoder_of(runs["a"])
    # (Its scorer's score_batch is replaced: a decoder of its own.)
    by_tokens = decoder_of(runs["a"], settings="batch_tokens=48", fresh=True)
    sizes = []
    real = by_tokens.scorer.score_batch
    by_tokens.scorer.score_batch = lambda inputs, targets: \
        sizes.append(int(inputs.shape[0])) or real(inputs, targets)
    np.testing.assert_allclose(by_tokens.score(pairs), by_sentences.score(pairs), atol=1e-5)
    assert len(sizes) > 1 and sum(sizes) == len(pairs)


def test_t2t_decoder_and_exporter_parse_their_decode_hparams_once(runs, ensemble_cli,
                                                                   tmp_path, monkeypatch):
    """The command line parses --decode_hparams once and hands the typed values
    on; the decoder, the ensemble and the exporter parse no string (issue 55:
    it was parsed three times per run)."""
    import t2t_revival.settings.decode_hparams as decode_hparams

    # t2t-decoder of an ensemble (`ensemble_cli`, its parses recorded).
    out, _, hyp, parsed_by_the_decoder = ensemble_cli
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == len(SOURCES)
    assert parsed_by_the_decoder == [ENSEMBLE_CLI_SETTINGS]
    parsed = []
    parse = decode_hparams.parse_typed_pairs
    monkeypatch.setattr(decode_hparams, "parse_typed_pairs",
                        lambda text, *a, **k: parsed.append(text) or parse(text, *a, **k))
    out = run_cli("exporter", f"--output_dir={runs['a']}", "--decode_hparams=beam_size=2",
                  f"--export_dir={tmp_path / 'export'}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert parsed == ["beam_size=2"]


def test_parallel_batches_default_to_two_on_a_cpu_and_one_on_a_gpu(runs):
    """parallel_batches=0, the default, is resolved once, by the decoder:
    2 batches at once on a CPU (this machine), 4 of one sentence each, 1 on
    a GPU and with sampling; a number given is kept."""
    from t2t_revival.settings.decode_hparams import DecodeHParams
    from decoding import decoder_of
    from t2t_revival.settings.hparams import HParams

    assert DecodeHParams().parallel_batches == 0
    default = DecodeHParams.from_hparams(HParams())
    assert default.resolved(on_gpu=False).parallel_batches == 2
    assert default.resolved(on_gpu=True).parallel_batches == 1
    one = DecodeHParams.from_hparams(HParams(), {"batch_size": 1})
    assert one.resolved(on_gpu=False).parallel_batches == 4
    assert one.resolved(on_gpu=True).parallel_batches == 1
    assert DecodeHParams(batch_size=1, batch_tokens=64).resolved(
        on_gpu=False).parallel_batches == 2   # batches by tokens: not of one sentence
    assert DecodeHParams(sampling=True).resolved(on_gpu=False).parallel_batches == 1
    assert DecodeHParams(parallel_batches=3).resolved(on_gpu=True).parallel_batches == 3
    assert DecodeHParams(parallel_batches=1).resolved(on_gpu=False).parallel_batches == 1
    on_gpu = bool(tf.config.list_physical_devices("GPU"))   # this host's own default
    assert decoder_of(runs["a"]).decode_hparams.parallel_batches == (1 if on_gpu else 2)
    assert decoder_of(runs["a"], None, "sampling=true").decode_hparams.parallel_batches == 1
    assert decoder_of(runs["a"], None, "parallel_batches=1").decode_hparams.parallel_batches == 1
    assert decoder_of(runs["a"], None, "batch_size=1").decode_hparams.parallel_batches == \
        (1 if on_gpu else 4)


def test_parallel_batches_give_the_same_translations_and_scores(runs):
    """parallel_batches=3 decodes batches in worker threads (xla and the
    uncompiled search, beams and scores): the same outputs, in input order."""
    import threading

    from decoding import decoder_of

    # Inputs of two padded lengths (16 and 32), in batches of 2: with xla, 2
    # programs (their first batches run ahead) and a batch after them.
    sources = [SOURCES[0], SOURCES[2]] * 3 + [""]
    pairs = list(zip(SOURCES, TARGETS)) * 3
    for settings in ("batch_size=2,xla=true", "batch_size=2,xla=false,return_beams=true"):
        one = decoder_of(runs["a"], settings=settings)
        # (Its search is replaced by a spy: a decoder of its own.)
        three = decoder_of(runs["a"], settings=f"{settings},parallel_batches=3", fresh=True)
        threads = set()
        attribute = "compiled_search" if "xla=true" in settings else "uncompiled_search"
        search = getattr(three, attribute)
        setattr(three, attribute,
                lambda *a: threads.add(threading.current_thread().name) or search(*a))
        assert three.translate(sources) == one.translate(sources)
        # (With xla, the first batch of each program runs ahead, in threads
        # of their own: `decoder.first_batch_of_each_program`.)
        assert any(name.startswith("decode_batch") for name in threads)
        assert all(name.startswith(("decode_batch", "compile_ahead")) for name in threads)
        np.testing.assert_allclose(three.score(pairs), one.score(pairs), atol=1e-6)


def test_interactive_decoding_refuses_a_decode_to_file_it_would_not_write(runs, tmp_path):
    out = run_cli("decoder", f"--output_dir={runs['a']}", "--decode_interactive",
                  f"--decode_to_file={tmp_path / 'o.de'}", stdin="A dog runs.\n")
    one_line_error(out, "t2t-decoder", "--decode_interactive prints to standard output")
    assert not (tmp_path / "o.de").exists()


# ------------------------------------------------------- out of memory
_OOM = ("OOM when allocating tensor with shape[128,4,80,32] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")


@pytest.mark.parametrize("decode_hparams, advice", [
    ("batch_size=8,xla=false",
     "batch_size (now 8 sentences; e.g. batch_size=4), beam_size (now 4), parallel_batches "
     "(now 2). Received: batch_size=8"),
    ("batch_tokens=64,parallel_batches=2",
     "batch_tokens (now 64; e.g. batch_tokens=32), beam_size (now 4), parallel_batches "
     "(now 2). Received: batch_tokens=64"),
    ("sampling=true,batch_size=2",
     "batch_size (now 2 sentences; e.g. batch_size=1). Received: batch_size=2"),
    # One sentence at a time: batch_size is not named (it cannot be lower).
    ("batch_size=1,parallel_batches=3",
     "beam_size (now 4), parallel_batches (now 3). Received: batch_size=1"),
    ("sampling=true,batch_size=1,samples_per_input=3",
     "samples_per_input (now 3). Received: batch_size=1"),
    ("sampling=true,batch_size=1", None)])
def test_a_device_out_of_memory_while_decoding_is_one_line(runs, decode_hparams, advice):
    """TensorFlow's ResourceExhaustedError in the search (its message goes on
    with the allocator's statistics and the graph's nodes), in the main
    thread or a batch's own (parallel_batches)."""
    from decoding import decoder_of
    from t2t_revival.errors import UserError

    # (Its searches are replaced: a decoder of its own.)
    decoder = decoder_of(runs["a"], None, decode_hparams, fresh=True)

    def out_of_memory(*args):
        raise tf.errors.ResourceExhaustedError(
            None, None, _OOM + "\n\t [[{{node while/body/...}}]]\nHint: ...")

    decoder.search = out_of_memory
    decoder.uncompiled_search = out_of_memory
    decoder.compiled_search = lambda rows, *guided: out_of_memory
    with pytest.raises(UserError) as error:
        decoder.translate(SOURCES)
    if advice is None:   # nothing left to lower
        assert str(error.value) == (
            f"decoding ran out of memory: {_OOM}. Nothing in the decode hparams' settings is "
            f"left to lower (one sentence at a time, one hypothesis): decode on a device "
            f"with more memory. Received: batch_size=1")
    else:
        assert str(error.value) == (f"decoding ran out of memory: {_OOM}. Lower the decode "
                                    f"hparams' {advice}")


# ------------------------------------------------- tensor2tensor's decode keys

def test_t2t_decode_keys_num_samples_scores_delimiter_shards_log(runs, tmp_path):
    from decoding import decoder_of

    source = tmp_path / "src.en"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    scored = tmp_path / "scored.de"
    out = _decoder(f"--output_dir={runs['a']}", f"--decode_from_file={source}",
                   f"--decode_to_file={scored}", "--decode_hparams=return_beams=true,"
                   "num_samples=2,write_beam_scores=true,log_results=true")
    assert out.returncode == 0, out.stderr[-2000:]
    # The n-best lists without the keys: the lines t2t-decoder writes are
    # `translate`'s (the kept decoder of these settings, test_an_ensemble_...'s).
    beams = [line.split("\t")
             for line in decoder_of(runs["a"], settings="return_beams=true").translate(SOURCES)]
    with_scores = [line.split("\t") for line in scored.read_text(encoding="utf-8").splitlines()]
    assert len(with_scores) == 2  # num_samples: the first two inputs only
    for texts, fields in zip(beams, with_scores):
        assert fields[0::2] == texts
        assert all(re.fullmatch(r"-?\d+\.\d\d", score) for score in fields[1::2])
        assert float(fields[1]) >= float(fields[3])  # best first
    assert f"INPUT: {SOURCES[1]}\nOUTPUT: " in out.stderr
    # delimiter: inputs and outputs separated by it; shards: <file>NNN.
    (tmp_path / "src.txt001").write_text(" | ".join(SOURCES[:3]) + " |\n", encoding="utf-8")
    out = _decoder(f"--output_dir={runs['a']}", f"--decode_from_file={tmp_path / 'src.txt'}",
                   f"--decode_to_file={tmp_path / 'out.txt'}",
                   "--decode_hparams=delimiter='|',shards=2,shard_id=1")
    assert out.returncode == 0, out.stderr[-2000:]
    written = (tmp_path / "out.txt001").read_text(encoding="utf-8")
    assert written.count("|") == 3 and written.endswith("|")
    one_line_error(_decoder(f"--output_dir={runs['a']}", f"--decode_from_file={source}",
                            "--decode_hparams=decode_timeout_mins=10"), "t2t-decoder",
                   "tensor2tensor's decode hparam 'decode_timeout_mins' has no equivalent")


def test_t2t_max_input_size_cuts_the_inputs(runs):
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.settings.decode_hparams import parse_decode_hparams

    decoder = Decoder.load(runs["a"], None, parse_decode_hparams("max_input_size=4"))
    encoded = decoder.encode(SOURCES)
    assert [len(ids) for ids in encoded] == [min(4, len(decoder.vocab.encode(s)) + 1)
                                             for s in SOURCES]
    assert all(ids[-1] == 1 for ids in encoded) and decoder.cut_inputs == 0
