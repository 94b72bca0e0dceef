"""translate_plain_text: the user's corpora from corpora.json, per-corpus
sampling weights at training time, and one-line errors for a bad spec."""

import gzip
import json
import math
import subprocess
import sys

import pytest

from conftest import ENV, ROOT, one_line_error
from t2t_revival.data.corpora_spec import CorporaSpec
from t2t_revival.data.data_error import DataError
from tiny_runs import write_own_corpora


def _lines(path, start, count):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [l.rstrip("\n") for i, l in enumerate(f) if start <= i < start + count]


def _write(path, lines):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))


@pytest.fixture
def corpora(tmp_path, shared_data):
    """Two training corpora of Multi30k lines (A: 2000 pairs, B: another 2000),
    dev and test, and corpora.json weighting A 3 to B 1."""
    m30k = shared_data / "multi30k"
    d = tmp_path / "my_corpora"
    d.mkdir()
    for name, stem, start, count in (("a", "train", 0, 2000), ("b", "train", 10000, 2000),
                                     ("dev", "val", 0, 200), ("test", "test_2016_flickr", 0, 200)):
        for lang in ("en", "de"):
            _write(d / f"{name}.{lang}.gz", _lines(m30k / f"{stem}.{lang}.gz", start, count))
    spec = {"source_lang": "en", "target_lang": "de", "vocab_size": 1000,
            "train": [{"source": "a.en.gz", "target": "a.de.gz", "weight": 3},
                      {"source": "b.en.gz", "target": "b.de.gz", "weight": 1}],
            "dev": {"source": "dev.en.gz", "target": "dev.de.gz"},
            "test": {"source": "test.en.gz", "target": "test.de.gz"}}
    (d / "corpora.json").write_text(json.dumps(spec))
    return d, spec


def _problem(data_dir, tmp_dir):
    from t2t_revival import registry

    registered = registry.problems

    problem = registered.get("translate_plain_text")(num_workers=1)
    problem.locate_data(str(data_dir), str(tmp_dir))
    return problem


def _targets(problem, files):
    import tensorflow as tf

    out = set()
    for record in tf.data.TFRecordDataset(files):
        ex = tf.train.Example.FromString(record.numpy())
        out.add(tuple(ex.features.feature["targets"].int64_list.value))
    return out


def _share_of_first(problem, data_dir, hparams, examples=4000):
    """The share of corpus 0 among the first `examples` training rows."""
    a = _targets(problem, problem.corpus_files(0, str(data_dir)))
    b = _targets(problem, problem.corpus_files(1, str(data_dir)))
    a, b = a - b, b - a          # the few pairs both corpora hold tell nothing
    seen = from_a = 0
    for batch in problem.dataset("train", str(data_dir), hparams, seed=7):
        for row in batch["targets"].numpy():
            ids = tuple(int(i) for i in row[row > 0])
            if ids in a or ids in b:
                seen += 1
                from_a += ids in a
        if seen >= examples:
            return from_a / seen
    raise AssertionError("the training dataset ended")


def test_weights_3_to_1_draw_three_quarters_from_the_first_corpus(corpora, tmp_path):
    from t2t_revival.settings.hparams import resolve

    tmp_dir, _ = corpora
    data_dir = tmp_path / "data"
    problem = _problem(data_dir, tmp_dir)
    problem.generate_data(str(data_dir), str(tmp_dir))
    assert problem.has_data(str(data_dir))
    stats = [json.loads(open(problem.corpus_stats_file(i, str(data_dir))).read())
             for i in (0, 1)]
    assert [s["examples"] for s in stats] == [2000, 2000]   # nothing duplicated on disk
    hparams = resolve("transformer_tiny", "", problem)
    assert hparams.corpus_weights == (3.0, 1.0) and hparams.vocab_size == 1000
    # 4000 draws with p = 0.75: one standard deviation is 0.7 points; the
    # tolerance of +-3 points is over 4 of them.
    share = _share_of_first(problem, data_dir, hparams)
    assert abs(share - 0.75) <= 0.03, share
    # The hparam overrides corpora.json's weights at training time, no new datagen.
    even = resolve("transformer_tiny", "corpus_weights=[1,1]", problem)
    assert abs(_share_of_first(problem, data_dir, even) - 0.5) <= 0.03
    # The trainer of a later run finds the spec in data_dir without --tmp_dir.
    again = _problem(data_dir, "")
    assert again.spec.weights == (3.0, 1.0) and again.has_data(str(data_dir))
    with pytest.raises(DataError, match="one per corpus"):
        next(iter(problem.dataset("train", str(data_dir),
                                  resolve("transformer_tiny", "corpus_weights=[1,2,3]",
                                          problem))))


@pytest.mark.parametrize("change,needle", [
    (lambda s: s.update(colour="red"), "unknown key 'colour'"),
    (lambda s: s["train"][0].update(wieght=2), "unknown key 'wieght'"),
    (lambda s: s["train"][0].update(weight=0), "train[0].weight must be a positive number"),
    (lambda s: s["train"][1].update(weight=-1), "train[1].weight must be a positive number"),
    (lambda s: s["train"][0].update(weight=math.nan), "train[0].weight must be a positive"),
    (lambda s: s["train"][0].update(weight="3"), "train[0].weight must be a positive"),
    (lambda s: s["train"][0].update(source="nowhere.en"), "train[0].source file"),
    (lambda s: s["train"][0].update(source="nowhere.en"), "nowhere.en is missing"),
    # A folder where a corpus file belongs is named for what it is.
    (lambda s: s["dev"].update(target="."), "is a directory, not a file"),
    (lambda s: s.update(vocab="."), "the \"vocab\" file"),
    (lambda s: s.update(train=[]), "non-empty list"),
    (lambda s: s.pop("dev"), "\"dev\" is missing"),
    (lambda s: s.update(vocab_size=10), "vocab_size\" must be a whole number"),
    (lambda s: s["dev"].update(weight=2), "training corpora only"),
])
def test_a_bad_spec_is_one_clear_error(corpora, change, needle):
    d, spec = corpora
    change(spec)
    (d / "corpora.json").write_text(json.dumps(spec))
    with pytest.raises(DataError) as e:
        CorporaSpec.load(str(d / "corpora.json"))
    assert needle in str(e.value), str(e.value)


def test_a_vocab_or_corpora_json_that_is_a_directory_is_named_so(corpora):
    d, spec = corpora
    spec["vocab"] = "."
    (d / "corpora.json").write_text(json.dumps(spec))
    with pytest.raises(DataError, match=r"\"vocab\" file .* is a directory, not a file"):
        CorporaSpec.load(str(d / "corpora.json"))
    (d / "sub" / "corpora.json").mkdir(parents=True)
    with pytest.raises(DataError, match=r"corpora.json is a directory, not a file"):
        CorporaSpec.load(str(d / "sub" / "corpora.json"))


def test_empty_file_and_misaligned_corpus(corpora, tmp_path):
    d, spec = corpora
    (d / "empty.de").write_text("")
    spec["train"][1]["target"] = "empty.de"
    (d / "corpora.json").write_text(json.dumps(spec))
    with pytest.raises(DataError, match="empty.de is empty"):
        CorporaSpec.load(str(d / "corpora.json"))
    _write(d / "short.de.gz", _lines(d / "b.de.gz", 0, 1999))
    spec["train"][1]["target"] = "short.de.gz"
    (d / "corpora.json").write_text(json.dumps(spec))
    problem = _problem(tmp_path / "data", d)
    with pytest.raises(DataError, match="has 2000 lines and .*short.de.gz has 1999"):
        problem.generate_data(str(tmp_path / "data"), str(d))


def test_corpus_of_blank_lines_is_refused(corpora, tmp_path):
    d, spec = corpora
    _write(d / "blank.en", [""] * 5)
    _write(d / "blank.de", ["x"] * 5)
    spec["train"][1] = {"source": "blank.en", "target": "blank.de"}
    (d / "corpora.json").write_text(json.dumps(spec))
    problem = _problem(tmp_path / "data", d)
    with pytest.raises(DataError, match=r'blank.en / .*blank.de \(named by "train" in '
                                        r'corpora.json\) hold no text: all 5 pairs'):
        problem.generate_data(str(tmp_path / "data"), str(d))


def test_datagen_cli_errors_are_one_line(corpora, tmp_path):
    d, spec = corpora
    base = [sys.executable, "-m", "t2t_revival.cli.datagen", "--problem=translate_plain_text",
            f"--data_dir={tmp_path / 'data'}"]
    out = subprocess.run(base + [f"--tmp_dir={tmp_path}"], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, timeout=300)
    one_line_error(out, "t2t-datagen", "corpora.json", "--tmp_dir")
    spec["train"][0]["weight"] = 0
    (d / "corpora.json").write_text(json.dumps(spec))
    out = subprocess.run(base + [f"--tmp_dir={d}"], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, timeout=300)
    one_line_error(out, "t2t-datagen", "train[0].weight must be a positive number")


@pytest.mark.parametrize("fault,needle", [
    (dict(train_lines=(300, 200)), "has 300 lines and"),
    (dict(dev_lines=(30, 20)), "has 30 lines and"),
    (dict(blank_train=True), "hold no text: all 50 pairs have an empty side"),
])
def test_a_failed_own_data_datagen_leaves_the_folder_as_it_was_and_the_fix_runs(
        tmp_path, fault, needle):
    """Issue 60, item 1: a datagen of one's own corpora that fails (misaligned
    training or dev corpus, an all-blank corpus) is one line and leaves
    data_dir byte-identical (no spec copy, vocabulary or shards); once the
    corpora are fixed in place, the same command generates the data."""
    from conftest import run_cli
    from tiny_runs import digests

    corpora, data = tmp_path / "own", tmp_path / "od"
    data.mkdir()
    (data / "notes.txt").write_text("the user's own file\n")
    before = digests(data)
    write_own_corpora(corpora, **fault)
    args = ("--problem=translate_plain_text", f"--tmp_dir={corpora}", f"--data_dir={data}",
            "--num_workers=1")
    one_line_error(run_cli("datagen", *args), "t2t-datagen", needle)
    assert digests(data) == before
    write_own_corpora(corpora)
    out = run_cli("datagen", *args)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (data / "translate_plain_text.corpora.json").is_file()
    assert _problem(data, corpora).has_data(str(data))


def test_a_vocab_size_below_the_corpus_characters_is_one_line_with_both_numbers(
        shared_data, tmp_path):
    """Issue 60, item 9: 200 WMT lines need more pieces than "vocab_size": 300
    (their characters, the special and the byte pieces): SentencePiece's
    RuntimeError became a traceback."""
    from conftest import run_cli
    from tiny_runs import digests

    wmt = shared_data / "wmt14" / "train_sample_tokenized"
    corpora, data = tmp_path / "own", tmp_path / "od"
    corpora.mkdir()
    data.mkdir()
    for name, lines in (("train", 200), ("dev", 20), ("test", 20)):
        for side, lang in (("src", "en"), ("tgt", "de")):
            with open(wmt / f"{side}-train.txt", encoding="utf-8") as f:
                _write(corpora / f"{name}.{lang}", [next(f).rstrip("\n") for _ in range(lines)])
    spec = {"vocab_size": 300, "train": [{"source": "train.en", "target": "train.de"}],
            "dev": {"source": "dev.en", "target": "dev.de"},
            "test": {"source": "test.en", "target": "test.de"}}
    (corpora / "corpora.json").write_text(json.dumps(spec))
    result = run_cli("datagen", "--problem=translate_plain_text", f"--tmp_dir={corpora}",
                     f"--data_dir={data}", "--num_workers=1")
    one_line_error(result, "t2t-datagen", "vocab_size=300", "at least 339",
                   "raise vocab_size")
    assert digests(data) == {}
