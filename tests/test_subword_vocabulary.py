"""SubwordVocabulary: ids contract, exact round trip, same ids in-graph."""

import gzip

import pytest
import tensorflow as tf

from t2t_revival.data.data_error import DataError
from t2t_revival.data.subword_vocabulary import SubwordVocabulary
from t2t_revival.problems.translate_multi30k import TranslateEndeMulti30k


def _lines(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.fixture(scope="module")
def multi30k_vocab(shared_data, tmp_path_factory):
    """The Multi30k vocabulary as datagen trains it (8192 pieces; under a second)."""
    problem = TranslateEndeMulti30k(download=False)
    sentences = [s for pair in problem.text_pairs("train", str(shared_data / "multi30k"))
                 for s in pair]
    path = tmp_path_factory.mktemp("vocab") / "m.model"
    return SubwordVocabulary.train(sentences, str(path), problem.vocab_size)


def test_special_ids_and_size(multi30k_vocab):
    v = multi30k_vocab
    assert v.vocab_size == 8192
    assert [v.id_to_piece(i) for i in range(3)] == ["<pad>", "</s>", "<unk>"]
    ids = v.encode("A man rides a bike.")
    assert ids and 1 not in ids and 0 not in ids  # no EOS/PAD added by encode
    assert v.decode(ids + [1] + v.encode("junk after EOS") + [0, 0]) == "A man rides a bike."
    assert v.decode([0] + ids + [0]) == "A man rides a bike."


def test_round_trip_every_multi30k_val_line(multi30k_vocab, shared_data):
    for lang in ("en", "de"):
        lines = _lines(shared_data / "multi30k" / f"val.{lang}.gz")
        assert len(lines) == 1014
        bad = [s for s in lines if multi30k_vocab.decode(multi30k_vocab.encode(s)) != s]
        assert bad == []


def test_unseen_characters_round_trip_through_bytes(multi30k_vocab):
    text = "Señor Zoë 東京 🚲  two  spaces, tab\tinside"
    ids = multi30k_vocab.encode(text)
    assert 2 not in ids  # byte_fallback: no UNK
    assert multi30k_vocab.decode(ids) == text


def test_training_is_deterministic(tmp_path, shared_data):
    sentences = _lines(shared_data / "wmt14/newstest2013.en-de/newstest2013.en")
    a = SubwordVocabulary.train(sentences, str(tmp_path / "a.model"), 1000)
    b = SubwordVocabulary.train(sentences, str(tmp_path / "b.model"), 1000)
    assert open(a.model_file, "rb").read() == open(b.model_file, "rb").read()
    # A bounded sample of the text still gives a working model.
    c = SubwordVocabulary.train(sentences, str(tmp_path / "c.model"), 1000,
                                max_sentences=500)
    assert c.decode(c.encode(sentences[0])) == sentences[0]


def test_python_and_in_graph_ids_match_on_newstest2014(tmp_path, shared_data,
                                                      multi30k_vocab):
    folder = shared_data / "wmt14/newstest2014.en-de"
    lines = _lines(folder / "newstest2014.en") + _lines(folder / "newstest2014.de")
    assert len(lines) == 2 * 3003
    own = SubwordVocabulary.train(lines, str(tmp_path / "nt.model"), 4000)
    # Both a vocab trained on newstest itself and the Multi30k one (whose
    # pieces miss many newstest characters, exercising byte fallback).
    for vocab in (own, multi30k_vocab):
        graph_ids = vocab.tf_tokenizer().tokenize(tf.constant(lines)).to_list()
        assert graph_ids == [vocab.encode(s) for s in lines]
        assert [vocab.decode(ids) for ids in graph_ids[:200]] == lines[:200]
    tokenizer = own.tf_tokenizer()
    texts = tokenizer.detokenize(tokenizer.tokenize(tf.constant(lines[:100]))).numpy()
    assert [t.decode("utf-8") for t in texts] == lines[:100]


def test_missing_model_file_is_a_user_error(tmp_path):
    with pytest.raises(DataError, match="Received: model_file="):
        SubwordVocabulary(str(tmp_path / "none.model"))


# Trains a vocabulary that takes SentencePiece 5-15 s (400k random words, a
# 200k-piece vocab), under the CLIs' signal handling; prints "training" first.
_SLOW_VOCAB_SCRIPT = """
import os, random
from t2t_revival.cli import entry_point
from t2t_revival.data.subword_vocabulary import SubwordVocabulary

def main(argv):
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(10, 30))) for _ in range(400000)]
    sentences = [" ".join(rng.choices(words, k=12)) for _ in range(100000)]
    print("training", flush=True)
    SubwordVocabulary.train(sentences, os.environ["VOCAB_TEST_MODEL"], 200000)
    print("done", flush=True)

entry_point.run(main, prog="vocab-test")
"""


def test_a_signal_stops_sentencepiece_training_promptly(tmp_path):
    """SIGTERM during SentencePiece's (C++, many-second) training stops the
    process within a second or two, with one line, 143, and no model file;
    before, the handler waited for the training to end."""
    import os
    import signal
    import subprocess
    import sys
    import time

    model = tmp_path / "v.model"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_VOCAB_SCRIPT],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            env=dict(os.environ, VOCAB_TEST_MODEL=str(model)))
    try:
        assert proc.stdout.readline() == "training\n"
        time.sleep(2.0)  # the sample is taken; SentencePiece is training
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        waited = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == ["vocab-test: stopped by SIGTERM"]
    assert "done" not in out  # stopped, not finished
    assert waited < 2.5, f"the stop took {waited:.1f} s"
    assert os.listdir(tmp_path) == []  # no model, no temporary file
