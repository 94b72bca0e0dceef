"""Many target languages in one model (issue 74, part 3): own data whose
corpora name a "target_lang" each; the `>>xx<<` token before each source
line, one piece of the vocabulary; dev BLEU per language pair; the decoder
and the SavedModel taking the token first and refusing a line without a
known one in one line."""

import json
import os
import random
import subprocess
import sys

import pytest

from conftest import ENV, one_line_error, run_cli
from t2t_revival.data.corpora_spec import CorporaSpec
from t2t_revival.data.data_error import DataError
from t2t_revival.errors import UserError
from tiny_runs import TINY_HPARAMS, WORDS


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


@pytest.fixture
def two_languages(tmp_path):
    """corpora.json of an "en" source, a "de" and an "fr" corpus of the tiny
    15-word language (seeded), train, dev and test each; vocab_size 300."""
    rng = random.Random(0)
    d = tmp_path / "corpora"
    d.mkdir()
    spec = {"source_lang": "en", "vocab_size": 300, "train": [], "dev": [], "test": []}
    for lang in ("de", "fr"):
        for split, n in (("train", 150), ("dev", 12), ("test", 6)):
            for side in ("en", lang):
                _write(d / f"{split}.{lang}.{side}",
                       [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
                        for _ in range(n)])
            spec[split].append({"source": f"{split}.{lang}.en",
                                "target": f"{split}.{lang}.{lang}", "target_lang": lang})
    (d / "corpora.json").write_text(json.dumps(spec))
    return d, spec


def _load(d, spec):
    (d / "corpora.json").write_text(json.dumps(spec))
    return CorporaSpec.load(str(d / "corpora.json"))


def test_the_spec_names_a_target_language_per_corpus(two_languages):
    d, spec = two_languages
    loaded = _load(d, spec)
    assert loaded.target_langs == ("de", "fr")
    assert loaded.language_tokens == (">>de<<", ">>fr<<")
    assert [c.target_lang for c in loaded.dev] == ["de", "fr"]
    # The copy datagen writes reads back the same (languages included).
    again = CorporaSpec.from_dict(json.loads(loaded.to_json()), loaded.path, False)
    assert again.same_data(loaded) and again.language_tokens == loaded.language_tokens
    # One language (the top-level default or every corpus's) is no multilingual run.
    for split in ("train", "dev", "test"):
        for corpus in spec[split]:
            corpus["target_lang"] = "de"
    assert _load(d, spec).language_tokens == ()
    for split in ("train", "dev", "test"):
        for corpus in spec[split]:
            corpus.pop("target_lang")
    spec["target_lang"] = "de"
    assert _load(d, spec).language_tokens == ()


@pytest.mark.parametrize("change, needle", [
    (lambda s: s["train"][0].update(target_lang="d e"), "train[0].target_lang must be a "
                                                        "language code"),
    (lambda s: s["train"][0].update(target_lang=3), "train[0].target_lang must be a"),
    (lambda s: s["dev"][1].pop("target_lang"), "dev[1] has no \"target_lang\""),
    (lambda s: s["test"][0].update(target_lang="es"), "test[0].target_lang 'es' is the "
                                                      "target language of no training"),
    (lambda s: s["dev"][0].update(lang="de"), "\"target_lang\""),
    (lambda s: [s.update(target_lang=">>x"), s["dev"][1].pop("target_lang")],
     "the \"target_lang\" of dev[1] must be a language code"),
])
def test_a_bad_multilingual_spec_is_one_data_error(two_languages, change, needle):
    d, spec = two_languages
    change(spec)
    with pytest.raises(DataError) as e:
        _load(d, spec)
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_reused_vocab_without_the_tokens_is_refused(two_languages, tmp_path):
    from t2t_revival.data.subword_vocabulary import SubwordVocabulary

    d, spec = two_languages
    lines = (d / "train.de.en").read_text().splitlines()
    SubwordVocabulary.train(lines, str(tmp_path / "plain.model"), 300)
    spec["vocab"] = str(tmp_path / "plain.model")
    spec.pop("vocab_size")
    with pytest.raises(DataError, match="lacks the target-language token"):
        _load(d, spec)
    SubwordVocabulary.train(lines, str(tmp_path / "both.model"), 300,
                            language_tokens=(">>de<<", ">>fr<<"))
    spec["vocab"] = str(tmp_path / "both.model")
    assert _load(d, spec).language_tokens == (">>de<<", ">>fr<<")


def test_the_token_and_its_errors():
    from t2t_revival.data.language_tokens import check_language_tokens, split_language_token

    tokens = (">>de<<", ">>fr<<")
    assert split_language_token(">>de<< Hallo", tokens) == (">>de<<", "Hallo")
    assert split_language_token(">>fr<<Bonjour", tokens) == (">>fr<<", "Bonjour")
    assert split_language_token(">>es<< Hola", tokens) == ("", ">>es<< Hola")
    check_language_tokens([">>de<< a", "", ">>fr<< b"], tokens)
    check_language_tokens(["no token"], ())   # one target language: anything goes
    with pytest.raises(UserError, match=r"line 2 has no target-language token.*"
                                        r">>de<<, >>fr<<"):
        check_language_tokens([">>de<< a", "Hello"], tokens)
    with pytest.raises(UserError, match=r"line 1 starts with >>es<<, which is not a "
                                        r"target language of this model"):
        check_language_tokens([">>es<< Hola"], tokens)


def test_datagen_puts_each_corpus_token_first_as_one_piece(two_languages, tmp_path):
    import tensorflow as tf

    from t2t_revival import registry
    from t2t_revival.special_ids import EOS_ID

    d, _ = two_languages
    data = tmp_path / "data"
    problem = registry.problems.get("translate_plain_text")(num_workers=1)
    problem.locate_data(str(data), str(d))
    problem.generate_data(str(data), str(d))
    vocab = problem.vocabulary(str(data))
    assert vocab.language_tokens == (">>de<<", ">>fr<<")
    de, fr = (vocab.encode(t)[0] for t in (">>de<<", ">>fr<<"))
    assert vocab.id_to_piece(de) == ">>de<<" and vocab.id_to_piece(fr) == ">>fr<<"
    # The dev and test sources start with their corpus's token; the rest is the line.
    source, target = problem.source_target_files("dev", str(data))
    sources = open(source, encoding="utf-8").read().splitlines()
    first_de = (d / "dev.de.en").read_text().splitlines()[0]
    assert sources[0] == f">>de<< {first_de}"
    assert sources[12].startswith(">>fr<< ") and len(sources) == 24
    assert not any(">>" in t for t in open(target, encoding="utf-8"))
    assert vocab.encode(sources[0]) == [de, *vocab.encode(first_de)]
    assert vocab.encode_pieces(sources[0])[0] == ">>de<<"
    assert vocab.decode(vocab.encode(sources[0])) == sources[0]
    assert vocab.encode_target(">>de<< ein") != vocab.encode(">>de<< ein")
    # Each training corpus's shards hold its token first, the targets none.
    for index, token in ((0, de), (1, fr)):
        for raw in tf.data.TFRecordDataset(problem.corpus_files(index, str(data))).take(5):
            example = tf.train.Example.FromString(raw.numpy())
            inputs = list(example.features.feature["inputs"].int64_list.value)
            targets = list(example.features.feature["targets"].int64_list.value)
            assert inputs[0] == token and inputs[-1] == EOS_ID
            assert de not in targets and fr not in targets
    # The dev sentences group by pair for the trainer's per-pair BLEU.
    pairs = problem.language_pairs(sources)
    assert list(pairs) == ["en-de", "en-fr"]
    assert pairs["en-de"] == ("de", list(range(12)))
    assert pairs["en-fr"] == ("fr", list(range(12, 24)))


def test_a_pair_s_moses_language_comes_from_its_code():
    from t2t_revival.metrics.bleu import moses_language

    assert [moses_language(c) for c in ("de", "fr", "deu", "fra", "xyz")] == \
        ["de", "fr", "de", "fr", "en"]


def test_the_graph_tokenizer_gives_the_python_ids_and_refuses_a_line_without_a_token(
        tmp_path):
    import tensorflow as tf

    from t2t_revival.data.subword_vocabulary import SubwordVocabulary

    rng = random.Random(1)
    lines = [" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(200)]
    vocab = SubwordVocabulary.train([f">>de<< {l}" for l in lines], str(tmp_path / "v.model"),
                                    300, language_tokens=(">>de<<", ">>fr<<"))
    texts = [">>de<< ein mann", ">>fr<<the dog", "", ">>fr<<  two spaces"]
    tokenizer = vocab.tf_tokenizer()
    assert tokenizer.tokenize(texts).to_list() == [vocab.encode(t) for t in texts]
    # The target side: the SentencePiece ids, no token split off.
    target = vocab.tf_target_tokenizer(tokenizer)
    assert target.tokenize([">>de<< ein"]).to_list() == [vocab.encode_target(">>de<< ein")]
    for bad in ("ein mann", ">>es<< ein mann"):
        with pytest.raises(tf.errors.InvalidArgumentError, match=">>de<<, >>fr<<"):
            tokenizer.tokenize([texts[0], bad])
    # A vocabulary of one target language: unchanged.
    plain = SubwordVocabulary.train(lines, str(tmp_path / "p.model"), 300)
    assert plain.language_tokens == ()
    assert plain.tf_tokenizer().tokenize(["ein mann"]).to_list() == [plain.encode("ein mann")]


def test_an_evaluation_writes_each_pair_figure():
    from t2t_revival.train.evaluation import Evaluation

    evaluation = Evaluation(step=5, loss=2.0, accuracy=0.5, perplexity=7.4, metric="bleu",
                            score=10.0, pairs=(("en-de", 12.0), ("en-fr", 8.0)))
    assert evaluation.scalars()["bleu/en-de"] == 12.0
    assert evaluation.scalars()["bleu/en-fr"] == 8.0
    assert evaluation.figure("bleu") == 10.0


def test_lines_group_by_their_language_in_the_tokens_order():
    from t2t_revival.data.language_tokens import lines_by_language

    lines = [">>fr<< a", ">>de<< b", "", ">>es<< c", ">>fr<<d"]
    assert lines_by_language(lines, (">>de<<", ">>fr<<")) == {"de": [1], "fr": [0, 4]}
    assert lines_by_language(lines, (">>de<<", ">>it<<")) == {"de": [1]}
    assert lines_by_language(lines, ()) == {}


def test_the_decoder_scores_a_mixed_file_per_target_language(tmp_path):
    from t2t_revival.decode.decode_job import DecodeJob
    from t2t_revival.settings.decode_hparams import DecodeHParams

    german = ["Ein Mann fährt mit dem Fahrrad über die Brücke .",
              "Zwei Hunde spielen im Schnee neben dem Haus ."]
    french = ["Un homme traverse le pont à vélo .",
              "Deux chiens jouent dans la neige près de la maison ."]
    sources = [">>de<< A man rides a bike.", ">>fr<< A man rides a bike.",
               ">>de<< Two dogs play.", ">>fr<< Two dogs play."]
    references = [german[0], french[0], german[1], french[1]]
    # German translated as its reference, French not at all.
    translations = [german[0], "Le chat .", german[1], "Le chien ."]
    job = DecodeJob(str(tmp_path), (), DecodeHParams(), print, sources=sources,
                    references=references, language_tokens=(">>de<<", ">>fr<<"))
    out = str(tmp_path / "out.txt")
    got = json.loads(job.score("translate_plain_text", translations, out, "de", True))
    assert got["languages"]["de"]["lines"] == 2 and got["languages"]["fr"]["lines"] == 2
    assert got["languages"]["de"]["sacrebleu"]["score"] == pytest.approx(100.0)
    assert got["languages"]["fr"]["sacrebleu"]["score"] < 10.0
    assert 10.0 < got["sacrebleu"]["score"] < 100.0   # the whole file
    text = job.score("translate_plain_text", translations, out, "de", False).splitlines()
    assert len(text) == 6, text
    assert text[2].startswith(">>de<< (2 lines) sacreBLEU") and ": 100.00 " in text[2]
    assert text[4].startswith(">>fr<< (2 lines) sacreBLEU")
    # One target language: the figure of the file only.
    single = DecodeJob(str(tmp_path), (), DecodeHParams(), print, sources=german,
                       references=german)
    assert "languages" not in json.loads(single.score("", german, out, "de", True))


# ---- the end-to-end run on WMT's newstest2014 En-De and En-Fr ---------------
TRAIN_LINES, DEV_LINES = 1500, 40


def _newstest_corpora(shared_data, d):
    """newstest2014 En-De and En-Fr, each split into TRAIN_LINES training and
    DEV_LINES dev pairs (dev also the test), in corpora.json."""
    spec = {"source_lang": "en", "vocab_size": 2000, "train": [], "dev": [], "test": []}
    for lang in ("de", "fr"):
        folder = shared_data / "wmt14" / f"newstest2014.en-{lang}"
        for side in ("en", lang):
            lines = (folder / f"newstest2014.{side}").read_text(encoding="utf-8").splitlines()
            _write(d / f"train.{lang}.{side}", lines[:TRAIN_LINES])
            _write(d / f"dev.{lang}.{side}", lines[TRAIN_LINES:TRAIN_LINES + DEV_LINES])
        for split, stem in (("train", "train"), ("dev", "dev"), ("test", "dev")):
            spec[split].append({"source": f"{stem}.{lang}.en", "target": f"{stem}.{lang}.{lang}",
                                "target_lang": lang})
    (d / "corpora.json").write_text(json.dumps(spec))


_SAVED_MODEL_QUERY = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece op)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
result = {"outputs": [o.decode() for o in
                      serve(sentences=tf.constant(json.loads(sys.argv[2])))["outputs"].numpy()]}
for bad in json.loads(sys.argv[3]):
    try:
        serve(sentences=tf.constant([bad]))
        result.setdefault("errors", []).append("")
    except tf.errors.InvalidArgumentError as e:
        result.setdefault("errors", []).append(e.message)
print(json.dumps(result))
"""


@pytest.mark.slow
def test_a_two_language_run_trains_reports_each_pair_and_decodes_each_by_its_token(
        shared_data, tmp_path):
    d = tmp_path / "corpora"
    d.mkdir()
    _newstest_corpora(shared_data, d)
    run = tmp_path / "run"
    out = run_cli("trainer", "--problem=translate_plain_text", f"--tmp_dir={d}",
                  f"--data_dir={tmp_path / 'data'}", f"--output_dir={run}",
                  "--hparams_set=transformer_tiny", f"--hparams={TINY_HPARAMS}",
                  "--train_steps=30", "--local_eval_frequency=30", "--eval_steps=2",
                  f"--eval_decode_sentences={2 * DEV_LINES}", "--noxla")
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    eval_line = next(l for l in log.splitlines() if "eval at step 30" in l)
    print(eval_line)
    for pair in ("en-de", "en-fr"):
        figure = eval_line.split(f"bleu {pair} ", 1)[1].split()[0]
        assert float(figure) >= 0.0, eval_line
    events = _tensorboard_tags(run / "eval")
    assert {"bleu", "bleu/en-de", "bleu/en-fr"} <= events, events

    # t2t-decoder: each language by its token; a line without one is one line.
    inputs = tmp_path / "inputs.txt"
    _write(inputs, [">>de<< The house is small.", ">>fr<< The house is small."])
    decoded = tmp_path / "decoded.txt"
    reference = tmp_path / "reference.txt"
    _write(reference, ["Das Haus ist klein.", "La maison est petite."])
    out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={inputs}",
                  f"--decode_to_file={decoded}", f"--decode_reference={reference}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(decoded.read_text(encoding="utf-8").splitlines()) == 2
    # Scored as a whole, then each language's line on its own.
    assert ">>de<< (1 line) sacreBLEU" in out.stdout and ">>fr<< (1 line) sacreBLEU" in out.stdout
    for bad, needle in (("The house is small.", "line 2 has no target-language token"),
                        (">>es<< The house.", "line 2 starts with >>es<<")):
        _write(inputs, [">>de<< The house is small.", bad])
        wrong = tmp_path / "wrong.txt"
        out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={inputs}",
                      f"--decode_to_file={wrong}")
        one_line_error(out, "t2t-decoder", needle, ">>de<<, >>fr<<")
        assert not wrong.exists() and not os.path.exists(f"{wrong}.partial")

    # --decode_interactive: a line without a token is refused, the session goes on.
    out = run_cli("decoder", f"--output_dir={run}", "--decode_interactive",
                  stdin="Hello\n>>fr<< The house is small.\n")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "input line 1 has no target-language token" in out.stderr
    assert len(out.stdout.splitlines()) == 1

    # The SavedModel, loaded in a clean process (no project code): the same
    # translations, and InvalidArgument for a sentence without a known token.
    out = run_cli("exporter", f"--output_dir={run}")
    assert out.returncode == 0, out.stderr[-3000:]
    version = max((run / "export").iterdir(), key=lambda p: int(p.name))
    from decoding import decoder_of

    sentences = [">>de<< The house is small.", ">>fr<< The house is small."]
    expected = decoder_of(str(run)).translate(sentences)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    query = subprocess.run(
        [sys.executable, "-I", "-c", _SAVED_MODEL_QUERY, str(version), json.dumps(sentences),
         json.dumps(["The house is small.", ">>es<< The house is small."])],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert query.returncode == 0, query.stderr[-3000:]
    got = json.loads(query.stdout.strip().splitlines()[-1])
    assert got["outputs"] == expected
    assert len(got["errors"]) == 2
    assert all(">>de<<, >>fr<<" in e for e in got["errors"]), got["errors"]


def _tensorboard_tags(folder) -> set[str]:
    import tensorflow as tf

    tags = set()
    for name in os.listdir(folder):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
            tags |= {v.tag for v in event.summary.value}
    return tags
