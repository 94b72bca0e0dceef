"""Every tool on a run t2t-import wrote (issue 59 item 4 and its acceptance):
tensor2tensor's own `transformer_test_ckpt` and its 8k SubwordTextEncoder
vocabulary, imported once, then decoded (beam, n-best, sampling, scoring, an
ensemble), scored, averaged, exported (SavedModel in a clean process, and
CTranslate2 against the decoder) and fine-tuned.

The checkpoint had one training step: its translations are noise, so each
engine is compared with the decoder, never with references. Each tool runs
once, on few lines: `SENTENCES` Multi30k test lines and `T2T_TEXT`, one
batch of the decoder and one call of the SavedModel, decoded once
(`decoded`) and compared with every other engine. The README's figures over the whole test
set (the CTranslate2 export agrees with the decoder on 997 of 1,000
sentences; 100 fine-tuning updates raise the dev log-probability from
-21,646 to -11,965) are benchmarks/t2t_imported_run.py's (`ctranslate2_same`,
`dev_log_prob_imported`, `dev_log_prob_fine_tuned`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from fine_tuning import decodes_one_line, dev_log_prob, multi30k_corpora
from wmt_archives import lines

T2T_RUN = "t2t_legacy/transformer_test_ckpt"
VOCAB_8K = "t2t_legacy/vocab.translate_ende_wmt8k.8192.subwords"
# Multi30k test lines decoded, then T2T_TEXT: together one batch of
# t2t-decoder (32), as the SavedModel's one call.
SENTENCES = 20
# Text the T2T vocabulary (in Python and in-graph) treats specially: an empty
# line, underscores, a backslash, characters outside its alphabet.
T2T_TEXT = ["A man in an orange hat starring at something.", "", "Two dogs_play \\ here.",
            "Ein Hund läuft über die Straße.", "日本"]
LINES = SENTENCES + len(T2T_TEXT)
# Fine-tuning: updates, Multi30k training pairs, dev pairs scored.
UPDATES, TRAIN_LINES, DEV_PAIRS = 10, 1000, 8


@pytest.fixture(scope="module")
def imported(shared_data, tmp_path_factory):
    """(the run t2t-import wrote, the import's stdout+stderr)."""
    run = tmp_path_factory.mktemp("imported") / "run"
    out = run_cli("t2t_import", f"--t2t_dir={shared_data / T2T_RUN}",
                  f"--vocab_file={shared_data / VOCAB_8K}", f"--output_dir={run}",
                  "--checkpoint=all")
    assert out.returncode == 0, out.stderr[-3000:]
    return run, out.stdout + out.stderr


@pytest.fixture(scope="module")
def test_sentences(shared_data, tmp_path_factory):
    """(a file of Multi30k's first SENTENCES test sentences and T2T_TEXT,
    their references file: Multi30k's, and T2T_TEXT itself)."""
    folder = tmp_path_factory.mktemp("m30k")
    source, reference = folder / "test.en", folder / "test.de"
    for path, lang in ((source, "en"), (reference, "de")):
        path.write_text("".join(s + "\n" for s in lines(
            shared_data / f"multi30k/test_2016_flickr.{lang}.gz")[:SENTENCES] + T2T_TEXT),
            encoding="utf-8")
    return source, reference


@pytest.fixture(scope="module")
def decoded(imported, test_sentences, tmp_path_factory):
    """t2t-decoder (beam 4, alpha 0.6) of the imported run on the LINES of
    `test_sentences` (one batch), with the reference: (process,
    translations), which every other engine is compared with."""
    run, _ = imported
    source, reference = test_sentences
    to = tmp_path_factory.mktemp("decoded") / "test.hyp"
    out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                  f"--decode_reference={reference}", f"--decode_to_file={to}")
    assert out.returncode == 0, out.stderr[-3000:]
    return out, to.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow
def test_the_import_says_what_it_took(imported):
    run, said = imported
    assert "target_space_id" in said and "training/" in said
    assert sorted(p for p in os.listdir(run) if p.startswith("vocab")) == ["vocab.subwords"]
    record = json.loads((run / "run.json").read_text())
    assert record["vocab_file"] == "vocab.subwords"


@pytest.mark.slow
def test_decoder_and_bleu_on_the_imported_run(decoded, test_sentences, tmp_path):
    out, translations = decoded
    assert len(translations) == LINES and sum(bool(t) for t in translations) > 0.9 * LINES
    assert "BLEU" in out.stdout + out.stderr
    hyp = tmp_path / "hyp"
    hyp.write_text("".join(t + "\n" for t in translations), encoding="utf-8")
    bleu = run_cli("bleu", f"--translation={hyp}", f"--reference={test_sentences[1]}")
    assert bleu.returncode == 0, bleu.stderr[-2000:]
    assert "BLEU_uncased" in bleu.stdout and "BLEU_cased" in bleu.stdout


@pytest.mark.slow
def test_nbest_sampling_scoring_and_an_ensemble_on_the_imported_run(
        imported, decoded, test_sentences, tmp_path):
    run, _ = imported
    source = tmp_path / "in.txt"
    source.write_text("A dog runs in the snow.\nTwo men play football.\n", encoding="utf-8")
    nbest = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                    f"--decode_to_file={tmp_path / 'nbest'}",
                    "--decode_hparams=beam_size=3,return_beams=true,write_beam_scores=true")
    assert nbest.returncode == 0, nbest.stderr[-2000:]
    nbest_lines = (tmp_path / "nbest").read_text(encoding="utf-8").splitlines()
    assert len(nbest_lines) == 2 and all(line.count("\t") == 5 for line in nbest_lines)
    sampled = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}",
                      f"--decode_to_file={tmp_path / 'samples'}",
                      "--decode_hparams=sampling=true,samples_per_input=2")
    assert sampled.returncode == 0, sampled.stderr[-2000:]
    assert len((tmp_path / "samples").read_text(encoding="utf-8").splitlines()) == 2
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("A dog runs.\tEin Hund rennt.\nA cat.\tEine Katze.\n", encoding="utf-8")
    scored = run_cli("decoder", f"--output_dir={run}", f"--score_file={pairs}")
    assert scored.returncode == 0, scored.stderr[-2000:]
    scores = [line.split("\t") for line in scored.stdout.strip().splitlines()]
    assert len(scores) == 2 and all(float(s[0]) < 0 for s in scores)
    prefix = str(run / "ckpt-1")
    ensemble = run_cli("decoder", f"--output_dir={run}",
                       f"--decode_from_file={test_sentences[0]}",
                       f"--decode_to_file={tmp_path / 'ensemble'}",
                       f"--checkpoint_path={prefix},{prefix}")
    assert ensemble.returncode == 0, ensemble.stderr[-2000:]
    # An ensemble of a model with itself is that model (`decoded`: the model
    # alone on the same file).
    assert (tmp_path / "ensemble").read_text(encoding="utf-8").splitlines() == decoded[1]


@pytest.mark.slow
def test_averaging_the_imported_checkpoints(imported, tmp_path):
    run, _ = imported
    out = run_cli("avg_checkpoints", f"--output_dir={run}", "--num_last_checkpoints=1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert (run / "averaged" / "ckpt-1.index").is_file()


LOAD_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers its ops)
model = tf.saved_model.load(sys.argv[1])
out = model.signatures["serving_default"](sentences=tf.constant(json.loads(sys.argv[2])))
assert not [m for m in sys.modules if m.startswith("t2t_revival")]
print(json.dumps([s.decode("utf-8") for s in out["outputs"].numpy()]))
"""


@pytest.mark.slow
def test_the_saved_model_of_the_imported_run_gives_the_decoders_translations(
        imported, decoded, test_sentences, tmp_path):
    """One clean process (no t2t_revival, no PYTHONPATH) loads the SavedModel
    and translates the LINES in one call, as the decoder's one batch
    (`decoded`: the length limit follows the batch's padded length, which
    this barely trained model, never ending early, always reaches): the
    Multi30k lines, and T2T_TEXT, which the vocabulary's in-graph tokenizer
    must treat as the Python one does (an empty line gives an empty line)."""
    from decoding import decoder_of
    from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary

    run, _ = imported
    assert isinstance(decoder_of(run).vocab, T2TSubwordVocabulary)
    expected = decoded[1]
    on_text = expected[SENTENCES:]   # the decoder's of T2T_TEXT
    assert on_text[1] == "" and all(on_text[i] for i in (0, 2, 3, 4))
    out = run_cli("exporter", f"--output_dir={run}", f"--export_dir={tmp_path / 'export'}")
    assert out.returncode == 0, out.stderr[-2000:]
    (version,) = os.listdir(tmp_path / "export")
    sentences = lines(test_sentences[0])
    assert len(sentences) == LINES and sentences[SENTENCES:] == T2T_TEXT
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    served = subprocess.run([sys.executable, "-I", "-c", LOAD_SCRIPT,
                             str(tmp_path / "export" / version), json.dumps(sentences)],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert served.returncode == 0, served.stderr[-3000:]
    assert json.loads(served.stdout.strip().splitlines()[-1]) == expected


@pytest.mark.slow
def test_the_ctranslate2_export_agrees_with_the_decoder_on_99_percent(
        imported, decoded, test_sentences, tmp_path):
    pytest.importorskip("ctranslate2")
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator

    run, _ = imported
    out = run_cli("exporter", f"--output_dir={run}", "--format=ctranslate2",
                  f"--export_dir={tmp_path / 'ct2'}")
    assert out.returncode == 0, out.stderr[-2000:]
    (version,) = os.listdir(tmp_path / "ct2")
    translator = CTranslate2Translator(str(tmp_path / "ct2" / version), intra_threads=2)
    ours = decoded[1]
    theirs = translator.translate(lines(test_sentences[0]))
    assert len(theirs) == len(ours) == LINES
    same = sum(a == b for a, b in zip(ours, theirs))
    print(f"CTranslate2 agrees with the decoder on {same} of {len(ours)}")
    assert same >= 0.99 * len(ours)


@pytest.mark.slow
def test_fine_tuning_the_imported_run_on_multi30k_lowers_the_dev_loss(imported, tmp_path):
    """UPDATES updates on Multi30k encoded with the T2T 8k vocabulary
    (corpora.json "vocab"), warm-started from the imported run with its own
    hparams (no --hparams_set); the dev pairs' log-probability (t2t-decoder
    --score_file) rises, and the run decodes. (The README's 100 updates on
    5,000 pairs, 100 dev pairs: benchmarks/t2t_imported_run.py.)"""
    run, _ = imported
    corpora = tmp_path / "corpora"
    pairs = multi30k_corpora(corpora, run / "vocab.subwords", TRAIN_LINES, DEV_PAIRS, 10)
    before = dev_log_prob(run, pairs)
    fine = tmp_path / "fine"
    out = run_cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
                  f"--data_dir={tmp_path / 'data'}", f"--output_dir={fine}",
                  f"--warm_start_from={run}", f"--train_steps={UPDATES}",
                  "--hparams=batch_size=1024,learning_rate_warmup_steps=50",
                  "--local_eval_frequency=0", "--eval_decode_sentences=0", "--noxla")
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((fine / "hparams.json").read_text())["d_model"] == 16
    after = dev_log_prob(fine, pairs)
    print(f"dev log-probability: {before:.1f} imported, {after:.1f} after {UPDATES} updates")
    assert after > before
    decodes_one_line(fine, tmp_path)
