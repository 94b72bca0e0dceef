"""tensor2tensor SubwordTextEncoder vocabularies (issue 59): ours equals T2T's own
`text_encoder.SubwordTextEncoder` (the test-only oracle,
unpacked from tensor2tensor's wheel in the shared data)
on the shared text, in Python and in-graph; loaders pick it from the file; bad
files are one line. (The SavedModel of a run with a T2T vocabulary, text in
and text out, is tested on the imported tensor2tensor run, in
test_t2t_imported_run.py's test_the_saved_model_of_the_imported_run_...)"""

import functools
import gzip
import json
import os
import random
import shutil
import types

import pytest

from conftest import SHARED_DATA, one_line_error, run_cli
from t2t_revival.data.data_error import DataError
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.data.t2t_subword_vocabulary import T2TSubwordVocabulary
from t2t_revival.data.vocabulary_file import is_t2t_vocabulary, load_vocabulary

LEGACY = SHARED_DATA / "t2t_legacy"
VOCABS = ("vocab.translate_ende_wmt8k.8192.subwords",
          "vocab.translate_ende_wmt32k.32768.subwords")
# Text T2T's escaping and tokenizer treat specially: underscores, backslashes,
# escapes written literally, characters outside the alphabet (CJK, emoji,
# control characters), leading/trailing/multiple spaces, a newline, "".
EDGE_CASES = ["", " ", "  ", " lead", "trail ", "a  b", "a_b __ c", "\\", "a\\u b\\\\",
              "\\123; 12_3", "x\ty", "a\nb", "\x00\x7f", "日本語のテキスト", "🙂 ☃ ü ß",
              "<pad> <EOS>", "don't", "3.14-2,5%", "-" * 300, "Ünïcödé ΑΒΓ кириллица"]


def _text_files():
    return sorted((SHARED_DATA / "multi30k").glob("*.gz")) + \
        sorted(p for p in (SHARED_DATA / "wmt14").glob("*/*") if p.is_file())


def _lines(path, limit=None):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        out = []
        for line in f:
            out.append(line.rstrip("\n"))
            if limit and len(out) >= limit:
                break
    return out


def _some_lines(per_file=40):
    return [l for p in _text_files() for l in _lines(p, per_file)] + EDGE_CASES


@functools.lru_cache(maxsize=None)
def _every_line(name):
    """(every line of the shared text, our Python vocabulary `name`'s ids of
    each, its text of those ids): computed once for the two every-line tests
    of each vocabulary (T2T's own, and the in-graph tokenizer's)."""
    vocab = T2TSubwordVocabulary(str(LEGACY / name))
    lines = [l for p in _text_files() for l in _lines(p)]
    ids = [vocab.encode(l) for l in lines]
    return lines, ids, [vocab.decode(i) for i in ids]


@pytest.fixture(scope="module")
def t2t_encoder():
    """T2T 1.15.7's SubwordTextEncoder class (test-only oracle, `t2t_reference`)."""
    from t2t_reference import import_t2t

    return import_t2t("data_generators.text_encoder").SubwordTextEncoder


@pytest.fixture(scope="module", params=VOCABS)
def vocabs(request, t2t_encoder):
    path = str(LEGACY / request.param)
    return T2TSubwordVocabulary(path), t2t_encoder(path)


def _compare_with_t2t(ours, theirs, lines):
    for line in lines:
        ids = theirs.encode(line)
        assert ours.encode(line) == ids, line
        assert ours.decode(ids) == theirs.decode(ids), line


def test_equals_t2t_on_some_shared_lines_and_edge_cases(vocabs):
    ours, theirs = vocabs
    assert ours.vocab_size == theirs.vocab_size
    assert [ours.id_to_piece(i) for i in range(4)] == theirs.decode_list(range(4))
    lines = _some_lines()
    assert len(lines) > 300
    _compare_with_t2t(ours, theirs, lines)
    # Decoding ids no encoder would write (random subtoken sequences) too.
    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.randrange(2, ours.vocab_size) for _ in range(rng.randint(1, 12))]
        assert ours.decode(ids) == theirs.decode(ids), ids


def test_decode_stops_at_eos_drops_pad_and_unknown_ids(vocabs):
    ours, _ = vocabs
    ids = ours.encode("A dog runs.")
    assert ours.decode([0] + ids + [ours.vocab_size + 5, 1, 7, 8]) == "A dog runs."
    assert ours.encode_batch(["A dog.", ""]) == [ours.encode("A dog."), []]
    assert ours.decode_pieces(ours.encode_pieces("Two_dogs\\")) == "Two_dogs\\"


@pytest.mark.slow
@pytest.mark.parametrize("name", VOCABS)
def test_equals_t2t_on_every_shared_line(name, t2t_encoder):
    """Every line of Multi30k and the WMT'14 text, both vocabularies (ours:
    the ids and text of `_every_line`)."""
    theirs = t2t_encoder(str(LEGACY / name))
    lines, our_ids, our_text = _every_line(name)
    assert len(lines) > 100_000
    for line, ids, text in zip(lines, our_ids, our_text):
        assert ids == theirs.encode(line), line
        assert text == theirs.decode(ids), line


def _compare_in_graph(vocab, lines, ids=None, texts=None, traced=False):
    """The in-graph tokenizer's ids and text equal the Python vocabulary's on
    `lines` (compared as flat id arrays and row lengths: building and listing
    Python lists of 100,000 rows took most of the time). ids, texts: the
    vocabulary's ids of each line and its text of them, if already made.
    traced: the tokenizer runs in tf.functions, as in the SavedModel (on
    100,000 lines a quarter faster than op by op; on a few, tracing costs
    more than it saves), else eagerly."""
    import numpy as np
    import tensorflow as tf

    ids = [vocab.encode(l) for l in lines] if ids is None else ids
    texts = [vocab.decode(e) for e in ids] if texts is None else texts
    tokenizer = vocab.tf_tokenizer()
    if traced:
        tokenizer = types.SimpleNamespace(
            tokenize=tf.function(tokenizer.tokenize, autograph=False,
                                 input_signature=[tf.TensorSpec([None], tf.string)]),
            detokenize=tf.function(tokenizer.detokenize, autograph=False,
                                   reduce_retracing=True))
    for start in range(0, len(lines), 8192):
        batch, expected = lines[start:start + 8192], ids[start:start + 8192]
        flat = np.fromiter((i for e in expected for i in e), np.int32)
        row_lengths = np.array([len(e) for e in expected], np.int64)
        got = tokenizer.tokenize(tf.constant(batch))
        np.testing.assert_array_equal(got.row_lengths().numpy(), row_lengths)
        np.testing.assert_array_equal(got.flat_values.numpy(), flat)
        text = tokenizer.detokenize(tf.RaggedTensor.from_row_lengths(flat, row_lengths))
        assert [t.decode("utf-8") for t in text.numpy()] == texts[start:start + 8192]


@pytest.mark.parametrize("name", VOCABS)
def test_in_graph_tokenizer_equals_python(name):
    import tensorflow as tf

    vocab = T2TSubwordVocabulary(str(LEGACY / name))
    _compare_in_graph(vocab, _some_lines(20))
    tokenizer = vocab.tf_tokenizer()
    rng = random.Random(1)
    rows = [[rng.randrange(2, vocab.vocab_size) for _ in range(rng.randint(0, 12))]
            for _ in range(300)]
    text = tokenizer.detokenize(tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1))
    assert [t.decode("utf-8") for t in text.numpy()] == [vocab.decode(r) for r in rows]
    # Ids past the vocabulary have no text (dense input works too).
    assert tokenizer.detokenize(tf.constant([[vocab.vocab_size + 3]])).numpy() == [b""]


@pytest.mark.slow
@pytest.mark.parametrize("name", VOCABS)
def test_in_graph_tokenizer_equals_python_on_every_shared_line(name):
    vocab = T2TSubwordVocabulary(str(LEGACY / name))
    lines, ids, texts = _every_line(name)
    assert len(lines) > 100_000
    _compare_in_graph(vocab, lines, ids, texts, traced=True)


# ---- which class reads a file --------------------------------------------------
@pytest.fixture(scope="module")
def sentencepiece_file(tmp_path_factory):
    from random_run_dir import make_vocab

    return make_vocab(tmp_path_factory.mktemp("sp") / "vocab.model")


def test_load_vocabulary_picks_the_class_from_the_file(tmp_path, sentencepiece_file):
    t2t = str(LEGACY / VOCABS[0])
    assert isinstance(load_vocabulary(t2t), T2TSubwordVocabulary)
    assert isinstance(load_vocabulary(sentencepiece_file), SubwordVocabulary)
    renamed = tmp_path / "vocab.ende.8192"          # no .subwords suffix: its content says
    shutil.copy(t2t, renamed)
    assert is_t2t_vocabulary(str(renamed)) and not is_t2t_vocabulary(sentencepiece_file)
    assert load_vocabulary(str(renamed)).encode("Hello") == load_vocabulary(t2t).encode("Hello")


def test_training_directory_with_only_vocab_subwords_loads_the_t2t_vocabulary(
        tmp_path, sentencepiece_file):
    from t2t_revival.run_dir.run_record import RunRecord
    from t2t_revival.run_dir.training_directory import TrainingDirectory

    run = TrainingDirectory(tmp_path / "run")
    os.makedirs(run.path)
    RunRecord(problem="").save(run.run_file)          # run.json's default vocab_file
    shutil.copy(LEGACY / VOCABS[0], os.path.join(run.path, "vocab.subwords"))
    assert run.vocab_file.endswith("vocab.subwords")
    vocab = run.vocabulary(run.read_run_record())
    assert isinstance(vocab, T2TSubwordVocabulary) and vocab.vocab_size == 8190
    shutil.copy(sentencepiece_file, os.path.join(run.path, "vocab.model"))
    assert isinstance(run.vocabulary(run.read_run_record()), SubwordVocabulary)


# ---- bad vocabulary files ----------------------------------------------------------
BAD_FILES = {
    "not_utf8": (b"'<pad>'\n'<EOS>'\n'a\xff_'\n", ":3: not UTF-8"),
    "unquoted": (b"'<pad>'\n'<EOS>'\n'a_'\nthe_\n", ":4: not a quoted subtoken"),
    "half_quoted": (b"'<pad>'\n'<EOS>'\n'a_\n", ":3: not a quoted subtoken"),
    "empty": (b"", "is empty"),
    "no_reserved": (b"'a_'\n'b_'\n", ":1: the vocabulary does not start with '<pad>'"),
    "unspellable": (b"'<pad>'\n'<EOS>'\n'ab_'\n", "has no subtoken for the character"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_vocabulary_file_is_one_data_error_naming_file_and_line(tmp_path, case):
    data, needle = BAD_FILES[case]
    path = tmp_path / "vocab.bad.subwords"
    path.write_bytes(data)
    with pytest.raises(DataError) as error:
        load_vocabulary(str(path))
    message = str(error.value)
    assert str(path) in message and needle in message and "\n" not in message


def test_a_missing_vocabulary_file_is_one_data_error(tmp_path):
    with pytest.raises(DataError, match="No vocabulary at"):
        T2TSubwordVocabulary(str(tmp_path / "vocab.subwords"))


@pytest.mark.parametrize("case", ["not_utf8", "unquoted", "empty"])
def test_decoder_on_a_run_with_a_bad_vocab_subwords_exits_with_one_line(tmp_path, case):
    from random_run_dir import make_random_run_dir

    run = make_random_run_dir(tmp_path / "run", str(LEGACY / VOCABS[0]), seed=0,
                              num_hidden_layers=1, d_model=16, d_ff=16)
    (tmp_path / "run" / "vocab.subwords").write_bytes(BAD_FILES[case][0])
    source = tmp_path / "source.txt"
    source.write_text("A dog.\n")
    out = run_cli("decoder", f"--output_dir={run}", f"--decode_from_file={source}")
    one_line_error(out, "t2t-decoder", "vocab.subwords", BAD_FILES[case][1])


# ---- new data encoded with a T2T vocabulary (fine-tuning an imported run) -------------
def _own_corpora(folder, vocab):
    """corpora.json and Multi30k lines in `folder`, reusing the vocabulary `vocab`."""
    folder.mkdir()
    m30k = SHARED_DATA / "multi30k"
    for name, stem, count in (("train", "train", 300), ("dev", "val", 30), ("test", "val", 10)):
        for lang in ("en", "de"):
            with open(folder / f"{name}.{lang}", "w", encoding="utf-8") as f:
                f.write("".join(l + "\n" for l in _lines(m30k / f"{stem}.{lang}.gz", count)))
    (folder / "corpora.json").write_text(json.dumps({
        "vocab": str(vocab),
        "train": {"source": "train.en", "target": "train.de"},
        "dev": {"source": "dev.en", "target": "dev.de"},
        "test": {"source": "test.en", "target": "test.de"}}))
    return folder


def test_own_data_with_a_t2t_vocab_is_encoded_with_it(tmp_path, shared_data):
    import tensorflow as tf
    from t2t_revival import registry

    m30k = shared_data / "multi30k"
    corpora = _own_corpora(tmp_path / "corpora", LEGACY / VOCABS[0])
    problem = registry.problems.get("translate_plain_text")(num_workers=1)
    data_dir = tmp_path / "data"
    problem.locate_data(str(data_dir), str(corpora))
    assert problem.vocab_size == 8190
    problem.generate_data(str(data_dir), str(corpora))
    assert problem.has_data(str(data_dir))
    assert sorted(p.name for p in data_dir.glob("vocab.*")) == \
        ["vocab.translate_plain_text.subwords"]
    vocab = problem.vocabulary(str(data_dir))
    assert isinstance(vocab, T2TSubwordVocabulary)
    reference = T2TSubwordVocabulary(str(LEGACY / VOCABS[0]))
    record = next(iter(tf.data.TFRecordDataset(problem.data_files("dev", str(data_dir)))))
    example = tf.train.Example.FromString(record.numpy())
    targets = list(example.features.feature["targets"].int64_list.value)
    assert targets[-1] == 1 and reference.decode(targets) in _lines(m30k / "val.de.gz", 30)


@pytest.mark.slow
def test_fine_tuning_a_t2t_vocabulary_run_on_new_data(tmp_path, fake_updates):
    """A run trained on data encoded with the T2T vocabulary keeps vocab.subwords; a
    --warm_start_from run on other data encoded with that copy trains and decodes.
    (The vocabulary's way through datagen, the trainer's run files, the warm
    start and the decoder is the subject: the updates are `fake_updates`'s,
    which read every batch from the data, and compute nothing.)"""
    tiny = ["--hparams_set=transformer_tiny", "--noxla", "--local_eval_frequency=0",
            "--eval_steps=1", "--eval_decode_sentences=0", "--problem=translate_plain_text",
            "--hparams=num_hidden_layers=1,d_model=16,d_ff=32,num_heads=2,batch_size=256,"
            "max_length=32"]
    source = tmp_path / "source"
    corpora = _own_corpora(tmp_path / "a", LEGACY / VOCABS[0])
    out = run_cli("trainer", *tiny, f"--tmp_dir={corpora}",
                  f"--data_dir={tmp_path / 'data_a'}", f"--output_dir={source}", "--train_steps=1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in source.glob("vocab.*")) == ["vocab.subwords"]
    assert json.loads((source / "run.json").read_text())["vocab_file"] == "vocab.subwords"
    fine = tmp_path / "fine"
    corpora = _own_corpora(tmp_path / "b", source / "vocab.subwords")
    out = run_cli("trainer", *tiny, f"--tmp_dir={corpora}",
                  f"--data_dir={tmp_path / 'data_b'}", f"--output_dir={fine}", "--train_steps=3",
                  f"--warm_start_from={source}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (fine / "vocab.subwords").read_bytes() == (LEGACY / VOCABS[0]).read_bytes()
    assert [sum(fake.calls) for fake in fake_updates] == [1, 3]
    (tmp_path / "in.txt").write_text("A dog runs.\n")
    out = run_cli("decoder", f"--output_dir={fine}", f"--decode_from_file={tmp_path / 'in.txt'}",
                  f"--decode_to_file={tmp_path / 'out.txt'}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 1


# ---- exports: text in, text out ----------------------------------------------------
SENTENCES = ["A man in an orange hat starring at something.", "", "Two dogs_play \\ here.",
             "Ein Hund läuft über die Straße.", "日本"]


@pytest.fixture(scope="module")
def t2t_run(tmp_path_factory):
    """A random-weight run directory with the 8k T2T vocabulary (vocab.subwords)."""
    from random_run_dir import make_random_run_dir

    run = make_random_run_dir(tmp_path_factory.mktemp("t2t_run") / "run",
                              str(LEGACY / VOCABS[0]), seed=3)
    assert sorted(p for p in os.listdir(run) if p.startswith("vocab")) == ["vocab.subwords"]
    return run


@pytest.mark.slow
def test_ctranslate2_export_of_a_t2t_vocabulary_run_agrees_with_the_decoder(t2t_run, tmp_path):
    pytest.importorskip("ctranslate2")
    from decoding import decoder_of
    from t2t_revival.export.ctranslate2_export import export_ctranslate2
    from t2t_revival.decode.ctranslate2_translator import CTranslate2Translator

    path = export_ctranslate2(t2t_run, export_dir=str(tmp_path / "ct2"))
    assert "vocab.subwords" in os.listdir(path) and "vocab.model" not in os.listdir(path)
    with open(os.path.join(path, "shared_vocabulary.json"), encoding="utf-8") as f:
        tokens = json.load(f)
    vocab = T2TSubwordVocabulary(os.path.join(path, "vocab.subwords"))
    assert tokens == list(vocab.pieces)
    expected = decoder_of(t2t_run, settings="beam_size=1").translate(SENTENCES)
    translator = CTranslate2Translator(path, beam_size=1, intra_threads=1)
    assert isinstance(translator.vocab, T2TSubwordVocabulary)
    assert translator.translate(SENTENCES) == expected
