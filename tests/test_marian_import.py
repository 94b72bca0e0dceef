"""t2t-import --marian_dir: a Marian model in Hugging Face's format (OPUS-MT)
becomes a run of ours that tokenizes, scores and translates as transformers
does. The oracle is transformers' own output stored beside the shared tiny
model (`shared/data/opus_mt/tiny-en-de`, its README), and for the kinds of
Marian model the shared data lacks, transformers' model written in numpy
(`marian_oracle`), itself checked against those stored logits."""

import json
import shutil

import numpy as np
import pytest

from conftest import SHARED_DATA, one_line_error, run_cli
from fine_tuning import decodes_one_line, dev_log_prob, multi30k_corpora
from marian_oracle import marian_logits, sinusoid

TINY = SHARED_DATA / "opus_mt" / "tiny-en-de"
REFERENCE = json.loads((TINY / "reference.json").read_text(encoding="utf-8"))


def _marian_ids(run):
    """(our id -> Marian's, Marian's -> ours) of a run's vocabulary."""
    from t2t_revival.data.marian_vocabulary import MarianVocabulary

    vocab = MarianVocabulary(run / "vocab.marian.json")
    marian = json.loads((TINY / "vocab.json").read_text(encoding="utf-8"))
    to_marian = np.array([marian[p] for p in vocab.pieces])
    return to_marian, np.argsort(to_marian)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from t2t_revival.marian_import.marian_importer import import_marian_run

    said = []
    out = tmp_path_factory.mktemp("marian") / "run"
    import_marian_run(str(TINY), str(out), log=said.append)
    assert "beam 4, length_penalty=power with alpha 1.0" in said[-1], said
    return out


def test_the_import_writes_a_run_with_the_models_switches_and_decode_defaults(run):
    hparams = json.loads((run / "hparams.json").read_text(encoding="utf-8"))
    assert {k: hparams[k] for k in (
        "ffn_activation", "attention_bias", "final_logits_bias", "position_encoding",
        "shared_embedding", "layer_norm_epsilon", "multiply_embedding_mode", "beam_size",
        "alpha", "length_penalty", "emit_pad", "extra_length", "max_length")} == {
        "ffn_activation": "swish", "attention_bias": True, "final_logits_bias": True,
        "position_encoding": "marian_sinusoid", "shared_embedding": True,
        "layer_norm_epsilon": 1e-5, "multiply_embedding_mode": "sqrt_depth", "beam_size": 4,
        "alpha": 1.0, "length_penalty": "power", "emit_pad": False, "extra_length": 511,
        "max_length": 512}
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert record["imported_from"] == str(TINY) and record["vocab_file"] == "vocab.marian.json"
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoint", "ckpt-0.data-00000-of-00001", "ckpt-0.index", "hparams.json",
        "run.json", "vocab.marian.json"]


def test_the_tokenizer_gives_marian_tokenizers_ids_and_text_on_every_line(run):
    from t2t_revival.data.marian_vocabulary import MarianVocabulary

    vocab = MarianVocabulary(run / "vocab.marian.json")
    to_marian, to_ours = _marian_ids(run)
    lines = REFERENCE["tokenizer"]
    assert len(lines) == 200
    for line in lines:
        assert list(to_marian[vocab.encode(line["source"]) + [1]]) == line["source_ids"]
        assert list(to_marian[vocab.encode_target(line["target"]) + [1]]) == line["target_ids"]
        assert vocab.decode(to_ours[line["target_ids"]]) == line["target_decoded"]
    # A piece missing from vocab.json is <unk> (no punctuation normalization first),
    # and a leading language code is one token of its own.
    assert vocab.encode("«") [-1] == 2 and vocab.decode([5, 2, 1, 7]) == vocab.decode([5])
    code = vocab.encode(">>deu<< A dog.")
    assert code[0] == 2 and code[1:] == vocab.encode("A dog.")   # not in this vocabulary


def test_teacher_forced_logits_equal_transformers_on_all_24_pairs(run):
    from safetensors.numpy import load_file

    from t2t_revival.models.trained_model import TrainedModel

    model = TrainedModel.load(str(run)).model
    _, to_ours = _marian_ids(run)
    stored = np.load(TINY / "reference_logits.npz")
    tensors = load_file(TINY / "model.safetensors")
    config = json.loads((TINY / "config.json").read_text(encoding="utf-8"))
    for k, pair in enumerate(REFERENCE["pairs"]):
        inputs, labels = to_ours[pair["input_ids"]][None], to_ours[pair["labels"]][None]
        encoded, padding = model.encode(inputs)
        ours = np.asarray(model.decode(labels, encoded, padding))[0][:, to_ours]
        assert np.abs(ours - stored[f"pair{k}"]).max() < 1e-4, k
        # The numpy oracle of the next test is transformers' model too.
        oracle = marian_logits(tensors, config, pair["input_ids"], pair["labels"])
        assert np.abs(oracle - stored[f"pair{k}"]).max() < 1e-4, k


def test_greedy_and_default_beam_search_give_transformers_outputs(run):
    from t2t_revival.decode.decoder import Decoder
    from t2t_revival.settings.decode_hparams import parse_decode_hparams

    to_marian, _ = _marian_ids(run)
    sources = [p["source"] for p in REFERENCE["pairs"]]
    for settings, key in (("beam_size=1", "greedy"), ("", "beam")):
        decoder = Decoder.load(str(run), overrides=parse_decode_hparams(settings))
        assert decoder.decode_hparams.beam_size == (1 if key == "greedy" else 4)
        same = 0
        for source, pair in zip(sources, REFERENCE["pairs"]):
            (ids,) = decoder.encode([source])
            sequences, _ = decoder.search_rows([ids], 0)
            found = [int(i) for i in sequences[0]]
            found = found[:found.index(1) + 1] if 1 in found else found
            same += list(to_marian[found]) == pair[f"{key}_ids"][1:]   # after the start
        assert same == 24, (key, same)
        assert decoder.translate(sources) == [p[f"{key}_text"] for p in REFERENCE["pairs"]]


def test_scores_prefixes_and_constraints_work_on_the_imported_run(run):
    """Forced scoring reads the target side with the target tokenizer: the
    log-probability of each reference pair is transformers' (from its stored
    logits); prefixes and constraints are target text too."""
    from t2t_revival.decode.decoder import Decoder

    decoder = Decoder.load(str(run))
    stored = np.load(TINY / "reference_logits.npz")
    pairs = REFERENCE["pairs"][:6]
    scores = decoder.score([(p["source"], p["target"]) for p in pairs])
    for k, (pair, (log_prob, score)) in enumerate(zip(pairs, scores)):
        logits = stored[f"pair{k}"].astype(np.float64)
        log_softmax = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(
            1, keepdims=True)) - logits.max(1, keepdims=True)
        expected = log_softmax[np.arange(len(pair["labels"])), pair["labels"]].sum()
        assert log_prob == pytest.approx(expected, abs=1e-3)
        assert score == pytest.approx(log_prob / len(pair["labels"]), rel=1e-5)  # power, 1.0
    sources = [p["source"] for p in pairs[:2]]
    prefixed = decoder.translate(sources, prefixes=["Zwei", "Ein Hund"])
    assert prefixed[0].startswith("Zwei ") and prefixed[1].startswith("Ein Hund ")
    constrained = decoder.translate(sources, constraints=[["Hut"], ["Schnee"]])
    assert "Hut" in constrained[0] and "Schnee" in constrained[1]


def test_the_in_graph_tokenizer_gives_the_same_ids_and_text(run):
    """The SavedModel's tokenizer (`MarianTokenizer`, tensorflow-text's
    SentencePiece op): MarianTokenizer's ids on every reference line of each
    side, and its text of the target ids."""
    import tensorflow as tf

    from t2t_revival.data.marian_vocabulary import MarianVocabulary

    vocab = MarianVocabulary(run / "vocab.marian.json")
    to_marian, to_ours = _marian_ids(run)
    lines = REFERENCE["tokenizer"]
    sources = vocab.tf_tokenizer().tokenize([l["source"] for l in lines]).to_list()
    target = vocab.tf_target_tokenizer()
    targets = target.tokenize([l["target"] for l in lines]).to_list()
    texts = target.detokenize(tf.ragged.constant(
        [list(to_ours[l["target_ids"][:-1]]) for l in lines])).numpy()
    for line, source, ids, text in zip(lines, sources, targets, texts):
        assert list(to_marian[source + [1]]) == line["source_ids"]
        assert list(to_marian[ids + [1]]) == line["target_ids"]
        assert text.decode("utf-8") == line["target_decoded"]
    coded = vocab.tf_tokenizer().tokenize([">>deu<< A dog.", "A dog."]).to_list()
    assert coded[0] == vocab.encode(">>deu<< A dog.") and coded[1] == coded[0][1:]


@pytest.mark.slow
def test_the_saved_model_in_a_clean_process_gives_the_decoders_translations(run, tmp_path):
    """t2t-exporter's SavedModel of the imported run, loaded in a fresh
    process: the default beam outputs (transformers' on all 24 sources) and,
    with prefixes and constraints, the decoder's."""
    import subprocess
    import sys

    from conftest import ENV
    from t2t_revival.decode.decoder import Decoder

    out = run_cli("exporter", f"--output_dir={run}", f"--export_dir={tmp_path / 'export'}")
    assert out.returncode == 0, out.stderr[-2000:]
    sources = [p["source"] for p in REFERENCE["pairs"]]
    prefixes, phrases = ["Zwei", "Ein Hund", "", "Der"], ["Hut", "", "Frau", "Mann"]
    script = f"""
import json, sys, tensorflow as tf, tensorflow_text
model = tf.saved_model.load({str(tmp_path / 'export' / '0')!r})
sources = {sources!r}
plain = model.signatures["serving_default"](tf.constant(sources))["outputs"]
guided = model.signatures["translate_constrained"](
    sentences=tf.constant(sources[:4]), prefixes=tf.constant({prefixes!r}),
    constraints=tf.constant({phrases!r}))["outputs"]
print(json.dumps([[t.decode() for t in plain.numpy()], [t.decode() for t in guided.numpy()]]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    plain, guided = json.loads(done.stdout.splitlines()[-1])
    assert plain == [p["beam_text"] for p in REFERENCE["pairs"]]
    decoder = Decoder.load(str(run))
    assert guided == decoder.translate(sources[:4], prefixes=prefixes,
                                       constraints=[[p] if p else [] for p in phrases])


@pytest.mark.slow
def test_the_litert_path_and_export_give_the_decoders_translations(run, tmp_path):
    """t2t-decoder's LiteRT path (litert=true: the run's programs converted
    into a compile cache of the test's own) and t2t-exporter --format=litert
    with LiteRTTranslator, on the 24 sources: transformers' beam outputs, as
    the decoder's."""
    import subprocess
    import sys

    from conftest import ENV

    sources = tmp_path / "in.en"
    sources.write_text("".join(p["source"] + "\n" for p in REFERENCE["pairs"]), encoding="utf-8")
    expected = [p["beam_text"] for p in REFERENCE["pairs"]]
    done = subprocess.run(
        [sys.executable, "-m", "t2t_revival.cli.decoder", f"--output_dir={run}",
         f"--decode_from_file={sources}", f"--decode_to_file={tmp_path / 'out.de'}",
         "--decode_hparams=litert=true"], capture_output=True, text=True, timeout=900,
        env={**ENV, "T2T_COMPILE_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "LiteRT" in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "out.de").read_text(encoding="utf-8").splitlines() == expected
    out = run_cli("exporter", f"--output_dir={run}", "--format=litert",
                  f"--export_dir={tmp_path / 'litert'}")
    assert out.returncode == 0, out.stderr[-2000:]
    script = (f"from t2t_revival.decode.litert_translator import LiteRTTranslator\n"
              f"import json\nt = LiteRTTranslator({str(tmp_path / 'litert' / '0')!r})\n"
              f"print(json.dumps(t.translate({[p['source'] for p in REFERENCE['pairs']]!r})))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, env={**ENV, "KERAS_BACKEND": "numpy"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == expected


@pytest.mark.slow
def test_fine_tuning_the_imported_run_on_multi30k_lowers_the_dev_loss(run, tmp_path):
    """100 updates on Multi30k encoded with the model's own tokenizer
    (corpora.json naming the run's vocab.marian.json), warm-started with the
    imported run's hparams and a learning rate for pretrained weights: the
    dev pairs' log-probability rises, and the run decodes. 20,000 pairs, so
    the updates see no pair twice: on 2,000 pairs (3.5 epochs) the figure
    moved by -14 to +13 from run to run; on 20,000, by +41 to +60."""
    corpora = tmp_path / "corpora"
    pairs = multi30k_corpora(corpora, run / "vocab.marian.json", 20000, 50)
    fine = tmp_path / "fine"
    out = run_cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
                  f"--data_dir={tmp_path / 'data'}", f"--output_dir={fine}",
                  f"--warm_start_from={run}", "--train_steps=100",
                  "--hparams=batch_size=1024,learning_rate_warmup_steps=50,learning_rate=0.05",
                  "--local_eval_frequency=0", "--eval_decode_sentences=0", "--noxla")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "data" / "vocab.translate_plain_text.marian.json").is_file()
    hparams = json.loads((fine / "hparams.json").read_text())
    assert hparams["attention_bias"] and hparams["length_penalty"] == "power"
    before, after = dev_log_prob(run, pairs), dev_log_prob(fine, pairs)
    print(f"dev log-probability: {before:.1f} imported, {after:.1f} after 100 updates")
    assert after > before
    assert decodes_one_line(fine, tmp_path).strip()


def test_the_ctranslate2_export_gives_transformers_beam_outputs(run, tmp_path):
    """t2t-exporter --format=ctranslate2 of the imported run: swish, attention
    and logits biases, Marian's sinusoid table, PAD suppressed, CTranslate2's
    own length ** alpha penalty; CTranslate2Translator gives transformers'
    default beam output on the 24 sources (at least 23: CTranslate2's search
    stops by its own rule), and with prefixes the decoder's."""
    pytest.importorskip("ctranslate2")
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator
    from t2t_revival.decode.decoder import Decoder

    out = run_cli("exporter", f"--output_dir={run}", "--format=ctranslate2",
                  f"--export_dir={tmp_path / 'ct2'}")
    assert out.returncode == 0, out.stderr[-2000:]
    translator = CTranslate2Translator(str(tmp_path / "ct2"))
    sources = [p["source"] for p in REFERENCE["pairs"]]
    found = translator.translate(sources)
    same = sum(a == p["beam_text"] for a, p in zip(found, REFERENCE["pairs"]))
    assert same >= 23, found   # (24 at this commit: patience 8)
    prefixes = ["Zwei", "Ein Hund", "", "Der"]
    theirs = translator.translate(sources[:4], prefixes=prefixes)
    ours = Decoder.load(str(run)).translate(sources[:4], prefixes=prefixes)
    assert all(t.startswith(p) for t, p in zip(theirs, prefixes)), theirs
    # (the 4th, a degenerate output of this tiny model, is one of the searches'
    # differences the slow test below counts)
    assert theirs[:3] == ours[:3]
    readme = (tmp_path / "ct2" / "0" / "README.md").read_text(encoding="utf-8")
    assert "MarianVocabulary" in readme


@pytest.mark.slow
def test_the_ctranslate2_export_agrees_with_the_decoder_on_the_multi30k_test_set(run, tmp_path):
    """The whole test_2016 set: the CTranslate2 export and t2t-decoder's
    search give the same translation for at least 99% of the sentences."""
    import gzip

    pytest.importorskip("ctranslate2")
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator
    from t2t_revival.decode.decoder import Decoder

    out = run_cli("exporter", f"--output_dir={run}", "--format=ctranslate2",
                  f"--export_dir={tmp_path / 'ct2'}")
    assert out.returncode == 0, out.stderr[-2000:]
    with gzip.open(SHARED_DATA / "multi30k" / "test_2016_flickr.en.gz", "rt",
                   encoding="utf-8") as f:
        sources = [line.strip() for line in f]
    ours = Decoder.load(str(run)).translate(sources)
    theirs = CTranslate2Translator(str(tmp_path / "ct2")).translate(sources)
    same = sum(a == b for a, b in zip(ours, theirs))
    print(f"CTranslate2 agrees with the decoder on {same} of {len(sources)}")
    assert same >= 0.99 * len(sources)


# ------------------------------------------------- other kinds of Marian model
def _write_model(folder, config, separate):
    """A random Marian model of `config` with the shared tiny model's
    SentencePiece models: one vocab.json, or (separate) one per side."""
    from safetensors.numpy import save_file
    import sentencepiece as spm

    folder.mkdir()
    for name in ("source.spm", "target.spm"):
        shutil.copy(TINY / name, folder / name)

    def pieces(model, drop=0):
        sp = spm.SentencePieceProcessor(model_file=str(folder / model))
        own = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
               if not (sp.is_control(i) or sp.is_unknown(i))]
        return ["</s>", "<unk>"] + own[:len(own) - drop] + ["<pad>"]

    shared = json.loads((TINY / "vocab.json").read_text(encoding="utf-8"))
    source = pieces("source.spm") if separate else sorted(shared, key=shared.get)
    target = pieces("target.spm", drop=37) if separate else source
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(source)}))
    if separate:
        (folder / "target_vocab.json").write_text(json.dumps({p: i for i, p in enumerate(target)}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": separate}))
    config.update(model_type="marian", vocab_size=len(source), decoder_vocab_size=len(target),
                  pad_token_id=len(target) - 1, decoder_start_token_id=len(target) - 1,
                  eos_token_id=0, max_position_embeddings=64)
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(7)
    d = config["d_model"]
    tensors = {"final_logits_bias": rng.normal(0, 1, (1, len(target)))}

    def linear(name, out, inp):
        tensors[f"{name}.weight"] = rng.normal(0, inp ** -0.5, (out, inp))
        tensors[f"{name}.bias"] = rng.normal(0, 0.1, (out,))

    def norm(name):
        tensors[f"{name}.weight"] = 1 + rng.normal(0, 0.1, (d,))
        tensors[f"{name}.bias"] = rng.normal(0, 0.1, (d,))

    for stack in ("encoder", "decoder"):
        width = config[f"{stack}_ffn_dim"]
        for i in range(config[f"{stack}_layers"]):
            p = f"model.{stack}.layers.{i}"
            for attention in ("self_attn",) + (("encoder_attn",) if stack == "decoder" else ()):
                for proj in ("q", "k", "v", "out"):
                    linear(f"{p}.{attention}.{proj}_proj", d, d)
                norm(f"{p}.{attention}_layer_norm")
            linear(f"{p}.fc1", width, d)
            linear(f"{p}.fc2", d, width)
            norm(f"{p}.final_layer_norm")
    if config["share_encoder_decoder_embeddings"]:
        tensors["model.shared.weight"] = rng.normal(0, 1, (len(source), d))
    else:
        tensors["model.encoder.embed_tokens.weight"] = rng.normal(0, 1, (len(source), d))
        tensors["model.decoder.embed_tokens.weight"] = rng.normal(0, 1, (len(target), d))
    if not config["tie_word_embeddings"]:
        tensors["lm_head.weight"] = rng.normal(0, 1, (len(target), d))
    # An older conversion keeps the (fixed) sinusoid tables too.
    tensors["model.encoder.embed_positions.weight"] = sinusoid(64, d)
    tensors = {k: np.asarray(v, np.float32) for k, v in tensors.items()}
    save_file(tensors, str(folder / "model.safetensors"))
    return tensors, source, target


KINDS = {
    "separate_tied_relu_3_1_layers": dict(
        separate=True, share_encoder_decoder_embeddings=False, tie_word_embeddings=True,
        activation_function="relu", encoder_layers=3, decoder_layers=1, encoder_ffn_dim=48,
        decoder_ffn_dim=24, scale_embedding=False),
    "shared_untied_gelu": dict(
        separate=False, share_encoder_decoder_embeddings=True, tie_word_embeddings=False,
        activation_function="gelu", encoder_layers=1, decoder_layers=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, scale_embedding=True),
    "separate_untied_swish": dict(
        separate=True, share_encoder_decoder_embeddings=False, tie_word_embeddings=False,
        activation_function="swish", encoder_layers=2, decoder_layers=2, encoder_ffn_dim=40,
        decoder_ffn_dim=40, scale_embedding=True),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_other_kinds_of_marian_model_give_transformers_logits(kind, tmp_path):
    from t2t_revival.data.marian_vocabulary import MarianVocabulary
    from t2t_revival.marian_import.marian_importer import import_marian_run
    from t2t_revival.models.trained_model import TrainedModel

    config = dict(KINDS[kind], d_model=16, encoder_attention_heads=2, decoder_attention_heads=2)
    separate = config.pop("separate")
    tensors, source, target = _write_model(tmp_path / "model", config, separate)
    import_marian_run(str(tmp_path / "model"), str(tmp_path / "run"), log=lambda _: None)
    vocab = MarianVocabulary(tmp_path / "run" / "vocab.marian.json")
    assert vocab.vocab_size == len(source) and vocab.target_vocab_size == len(target)
    source_ours = np.argsort([source.index(p) for p in vocab.pieces])
    target_marian = np.array([target.index(p) for p in vocab.target_pieces])
    target_ours = np.argsort(target_marian)
    model = TrainedModel.load(str(tmp_path / "run")).model
    rng = np.random.default_rng(3)
    for length in (5, 9):
        inputs = list(rng.integers(2, len(source) - 1, length)) + [0]
        labels = list(rng.integers(2, len(target) - 1, length + 2)) + [0]
        encoded, padding = model.encode(source_ours[inputs][None])
        ours = np.asarray(model.decode(target_ours[labels][None], encoded, padding))[0]
        oracle = marian_logits(tensors, config, inputs, labels)
        assert np.abs(ours[:, target_ours] - oracle).max() < 1e-4
    sentence = REFERENCE["pairs"][0]["target"]   # the target side tokenizes with target.spm
    assert vocab.decode(vocab.encode_target(sentence)) == sentence


# ------------------------------------------------------------ bad inputs
def _copy(tmp_path, drop=(), config=None, vocab=None):
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    for name in drop:
        (folder / name).unlink()
    if config:
        values = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**values, **config}))
    if vocab:
        vocab(folder)
    return folder


def _drop_piece(folder):
    values = json.loads((folder / "vocab.json").read_text())
    values.pop("▁a")
    (folder / "vocab.json").write_text(json.dumps(
        {p: i for i, p in enumerate(sorted(values, key=values.get))}))


BAD = {
    "not_a_folder_of_marian": (dict(drop=("config.json",)), "holds no config.json"),
    "another_model_type": (dict(config={"model_type": "bart"}), "is not a Marian model's"),
    "no_weights": (dict(drop=("model.safetensors",)), "has no weights (model.safetensors"),
    "no_source_spm": (dict(drop=("source.spm",)), "has no source.spm"),
    "no_vocabulary": (dict(drop=("vocab.json",)), "has no vocab.json"),
    "vocabulary_of_another_size": (dict(vocab=_drop_piece),
                                   "has vocab_size 1849 (decoder 1849) in config.json, but"),
    "pre_norm": (dict(config={"normalize_before": True}), "normalize_before=True"),
    "final_layer_norm": (dict(config={"add_final_layer_norm": True}), "add_final_layer_norm"),
    "another_activation": (dict(config={"activation_function": "tanh"}),
                           "activation_function='tanh'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_marian_folder_is_one_line_and_leaves_nothing(case, tmp_path):
    changes, needle = BAD[case]
    folder = _copy(tmp_path, **changes)
    out = run_cli("t2t_import", f"--marian_dir={folder}", f"--output_dir={tmp_path / 'run'}")
    one_line_error(out, "t2t-import", needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]   # nothing half-written


def test_pytorch_weights_without_torch_say_how_to_convert(tmp_path):
    folder = _copy(tmp_path, drop=("model.safetensors",))
    (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not read")
    out = run_cli("t2t_import", f"--marian_dir={folder}", f"--output_dir={tmp_path / 'run'}")
    one_line_error(out, "t2t-import", "torch is not installed", "save_file(")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_truncated_weights_and_an_output_dir_that_holds_a_run_are_refused(run, tmp_path):
    folder = _copy(tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:len(data) // 2])
    out = run_cli("t2t_import", f"--marian_dir={folder}", f"--output_dir={tmp_path / 'new'}")
    one_line_error(out, "t2t-import", "model.safetensors cannot be read")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    out = run_cli("t2t_import", f"--marian_dir={TINY}", f"--output_dir={run}")
    one_line_error(out, "t2t-import", "already exists and is not empty")
    out = run_cli("t2t_import", f"--output_dir={tmp_path / 'x'}")
    one_line_error(out, "t2t-import", "needs one of --t2t_dir")
    (tmp_path / "a_file").write_text("")
    out = run_cli("t2t_import", f"--marian_dir={TINY}", f"--output_dir={tmp_path / 'a_file/run'}")
    one_line_error(out, "t2t-import", "is a file, so t2t-import cannot make")
