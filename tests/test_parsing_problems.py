"""Parsing problems: the WSJ sample's splits and vocabulary, the missing-PTB error,
EVALB scoring in the decoder, and datagen -> train -> decode -> t2t-parse-eval."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ENV, run_cli
from t2t_revival.data.data_error import DataError
from t2t_revival.hparams_sets.parsing import transformer_parsing_base
from t2t_revival.parsing import delinearize, read_parsing_examples
from t2t_revival.problems.parsing_english import (
    ParsingEnglishPtb8k, ParsingEnglishPtb16k, ParsingEnglishPtbSample)

SAMPLE_TREES = 3914


def _cli(module, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", f"t2t_revival.cli.{module}", *args],
                          capture_output=True, text=True, env=ENV, timeout=timeout)


@pytest.fixture(scope="module")
def sample_dir(shared_data):
    return shared_data / "ptb_sample" / "combined"


@pytest.fixture(scope="module")
def sample_data_dir(shared_data, tmp_path_factory):
    """The sample's datagen (about 10 s), once for this module."""
    data_dir = tmp_path_factory.mktemp("ptb_sample_data")
    ParsingEnglishPtbSample(download=False).generate_data(str(data_dir), str(shared_data))
    return data_dir


# ---- the sample's splits ------------------------------------------------------
def test_sample_splits_partition_the_sample_by_file(sample_dir):
    problem = ParsingEnglishPtbSample()
    files = {s: problem.split_files(s, str(sample_dir)) for s in ("train", "dev", "test")}
    numbers = {s: [int(re.search(r"\d{4}", f.name).group()) for f in fs]
               for s, fs in files.items()}
    assert numbers["train"] == list(range(1, 160))
    assert numbers["dev"] == list(range(160, 180))
    assert numbers["test"] == list(range(180, 200))
    all_files = sorted(sample_dir.glob("wsj_*.mrg"))
    assert sorted(f for fs in files.values() for f in fs) == all_files


def test_sample_split_counts_add_up_to_every_tree(sample_dir, shared_data):
    problem = ParsingEnglishPtbSample()
    counts = {s: len(list(problem.text_pairs(s, str(shared_data))))
              for s in ("train", "dev", "test")}
    assert counts == {"train": 3396, "dev": 273, "test": 245}
    assert sum(counts.values()) == SAMPLE_TREES == len(read_parsing_examples(sample_dir))
    # tmp_dir may be the sample folder itself, its parent or the shared data folder.
    for tmp_dir in (sample_dir, sample_dir.parent):
        assert len(list(problem.text_pairs("test", str(tmp_dir)))) == 245


def test_hparams_overrides_set_the_papers_decoding_before_datagen():
    hp = transformer_parsing_base()
    assert ParsingEnglishPtbSample().hparams_overrides(hp) == {
        "vocab_size": 4000, "max_length": 512, "beam_size": 21, "alpha": 0.3,
        "extra_length": 300}
    assert ParsingEnglishPtb16k().hparams_overrides(hp)["vocab_size"] == 16384
    # tensor2tensor's 8k name: the same WSJ sections and decoding, an 8192-piece vocabulary.
    ptb8k = ParsingEnglishPtb8k()
    assert ptb8k.name == "parsing_english_ptb8k"
    assert ptb8k.hparams_overrides(hp) == {**ParsingEnglishPtb16k().hparams_overrides(hp),
                                           "vocab_size": 8192}


# ---- datagen output and vocabulary -------------------------------------------
def test_datagen_writes_splits_gold_trees_and_a_round_tripping_vocab(sample_data_dir,
                                                                     shared_data):
    problem = ParsingEnglishPtbSample()
    data_dir = str(sample_data_dir)
    assert problem.has_data(data_dir)
    assert problem.stats("train", data_dir)["examples"] == 3396
    assert problem.stats("dev", data_dir)["examples"] == 273
    vocab = problem.vocabulary(data_dir)
    assert vocab.vocab_size == 4000
    longest = 0
    for split in ("train", "dev", "test"):
        for source, target in problem.text_pairs(split, str(shared_data)):
            ids = vocab.encode(target)
            assert vocab.decode(ids) == target
            assert vocab.decode(vocab.encode(source)) == source
            longest = max(longest, len(ids))
    assert longest == 573  # one tree over max_length 512; see parsing_english.py
    # Brackets fuse with their labels: one id per tree token.
    pieces = [vocab.id_to_piece(i) for i in vocab.encode("(S (NP DT NN )NP . )S")]
    assert pieces == ["▁(S", "▁(NP", "▁DT", "▁NN", "▁)NP", "▁.", "▁)S"]
    source, target = problem.source_target_files("test", data_dir)
    sources = open(source, encoding="utf-8").read().splitlines()
    targets = open(target, encoding="utf-8").read().splitlines()
    gold = open(problem.gold_tree_file("test", data_dir), encoding="utf-8").read().splitlines()
    assert len(sources) == len(targets) == len(gold) == 245
    assert gold[0].startswith("(") and sources[0].split()[0] in gold[0]


def test_score_predictions_gold_scores_100_and_garbage_is_repaired(sample_data_dir):
    problem = ParsingEnglishPtbSample()
    source, target = problem.source_target_files("test", str(sample_data_dir))
    sources = open(source, encoding="utf-8").read().splitlines()[:20]
    targets = open(target, encoding="utf-8").read().splitlines()[:20]
    assert problem.eval_metric == "evalb"
    scored = problem.score_predictions(targets, targets, sources)
    score = scored.details
    assert (score.sentences, score.scored, score.repaired, score.f1) == (20, 20, 0, 100.0)
    assert (scored.metric, scored.score) == ("evalb", 100.0)
    assert scored.outputs["trees"] == [delinearize(t, s).to_string()
                                       for t, s in zip(targets, sources)]
    assert json.loads(scored.format(as_json=True))["evalb"]["f1"] == 100.0
    broken = [t.rsplit(" ", 3)[0] for t in targets[:10]] + [""] * 10
    score, trees = problem.evalb(broken, targets, sources)
    assert score.repaired == 20 and score.flat == 10 and 0 < score.f1 < 100
    assert problem.score_predictions(broken, targets, sources).score == score.f1
    assert score.scored == 20  # gold tags restored: no "length unmatch" skips
    assert [t.tree.words() for t in trees] == [s.split() for s in sources]
    assert [t.tree.tags() for t in trees] == [delinearize(g, s).tags()
                                             for g, s in zip(targets, sources)]


# ---- the licensed PTB --------------------------------------------------------------
def test_missing_ptb_is_one_line_error_naming_the_folder(tmp_path):
    out = _cli("datagen", "--problem=parsing_english_ptb16k", f"--tmp_dir={tmp_path}",
               f"--data_dir={tmp_path / 'data'}", timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("t2t-datagen")]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("t2t-datagen: error: The Penn Treebank WSJ sections 02-21 ")
    assert str(tmp_path) in lines[0] and "LDC" in lines[0] and "wsj_0200.mrg" in lines[0]
    assert not (tmp_path / "data").exists() or not os.listdir(tmp_path / "data")


def test_ptb16k_reads_sections_from_either_layout(sample_dir, tmp_path):
    problem = ParsingEnglishPtb16k()
    for root in (tmp_path / "a" / "wsj", tmp_path / "b"):
        for section in range(2, 24):
            (root / f"{section:02d}").mkdir(parents=True)
        shutil.copy(sample_dir / "wsj_0001.mrg", root / "02" / "wsj_0200.mrg")
        for section in range(3, 24):
            shutil.copy(sample_dir / "wsj_0002.mrg", root / f"{section:02d}" / "x.mrg")
        tmp_dir = str(root.parent if root.name == "wsj" else root)
        assert [f.name for f in problem.split_files("train", tmp_dir)][0] == "wsj_0200.mrg"
        assert len(problem.split_files("train", tmp_dir)) == 20
        assert len(problem.split_files("test", tmp_dir)) == 1
    os.unlink(tmp_path / "b" / "23" / "x.mrg")
    with pytest.raises(DataError, match=r"sections 23 \(test split\)"):
        problem.prepare(str(tmp_path / "b"))


# ---- end to end ----------------------------------------------------------------------
# The run's plumbing, not its quality: a few updates of a small model, then the
# first E2E_TREES test trees decoded with a short search (an untrained model's
# trees run to the length limit, input + extra_length tokens, each a beam of 4)
# and scored with EVALB by the decoder and by t2t-parse-eval. The figure a
# 100-step model reaches (F1 above the flat baseline's) is
# benchmarks/parse_sample.py's ("f1" against "flat_f1").
E2E_STEPS, E2E_TREES = 2, 8


@pytest.mark.slow
def test_parse_sample_end_to_end(sample_data_dir, tmp_path):
    """datagen -> train a shrunk transformer_parsing_base -> decode test -> EVALB."""
    data_dir = sample_data_dir
    out_dir = tmp_path / "run"
    train = run_cli(
        "trainer", "--problem=parsing_english_ptb_sample",
        "--hparams_set=transformer_parsing_base",
        "--hparams=num_hidden_layers=1,d_model=32,d_ff=64,num_heads=2,batch_size=2048",
        f"--data_dir={data_dir}", f"--output_dir={out_dir}", f"--train_steps={E2E_STEPS}",
        "--local_eval_frequency=0", "--log_step_count_steps=1",
        f"--save_checkpoints_steps={E2E_STEPS}",
        # Without XLA (it compiles each bucket shape) and a one-batch final eval.
        "--xla=false", "--eval_steps=1", "--eval_decode_sentences=0")
    assert train.returncode == 0, train.stderr[-3000:]
    assert f"step {E2E_STEPS}/{E2E_STEPS}" in train.stdout, train.stdout[-3000:]
    hparams = json.loads((out_dir / "hparams.json").read_text())
    assert (hparams["beam_size"], hparams["alpha"], hparams["extra_length"]) == (21, 0.3, 300)

    problem = ParsingEnglishPtbSample()
    full_source, full_target = problem.source_target_files("test", str(data_dir))
    source, target, gold = tmp_path / "test.src", tmp_path / "test.tgt", tmp_path / "test.gold"
    for cut, path in ((source, full_source), (target, full_target),
                      (gold, problem.gold_tree_file("test", str(data_dir)))):
        lines = open(path, encoding="utf-8").read().splitlines()
        assert len(lines) == 245
        cut.write_text("\n".join(lines[:E2E_TREES]) + "\n", encoding="utf-8")
    decodes = tmp_path / "test.decodes"
    decode = run_cli("decoder", f"--output_dir={out_dir}", f"--decode_from_file={source}",
                     f"--decode_reference={target}", f"--decode_to_file={decodes}",
                     # Uncompiled (test_decode_xla checks that both searches
                     # agree), and short: the trees are repaired either way.
                     "--decode_hparams=beam_size=4,extra_length=5,batch_size=64,xla=false",
                     "--json")
    assert decode.returncode == 0, decode.stderr[-3000:]
    evalb = json.loads(decode.stdout)["evalb"]
    assert evalb["sentences"] == E2E_TREES
    assert evalb["scored"] == E2E_TREES and evalb["skipped"] == 0  # gold tags restored
    trees = (tmp_path / "test.decodes.trees").read_text().splitlines()
    assert len(trees) == E2E_TREES and all(t.startswith("(") for t in trees)
    # The decoder's figure is EVALB's of its trees against the gold ones.
    targets = target.read_text(encoding="utf-8").splitlines()
    sources = source.read_text(encoding="utf-8").splitlines()
    outputs = decodes.read_text(encoding="utf-8").splitlines()
    score, _ = problem.evalb(outputs, targets, sources)
    assert (evalb["f1"], evalb["matched"], evalb["repaired"]) == \
        (pytest.approx(score.f1), score.matched, score.repaired)
    # The baseline that knows the words and tags but no structure: empty
    # outputs, each repaired to a flat tree.
    flat, _ = problem.evalb([""] * len(sources), targets, sources)
    assert flat.flat == E2E_TREES

    for predicted in (decodes.with_name("test.decodes.trees"), decodes):
        scored = run_cli("parse_eval", f"--gold={gold}", f"--predicted={predicted}", "--json")
        assert scored.returncode == 0, scored.stderr
        result = json.loads(scored.stdout)
        assert result["sentences"] == E2E_TREES
        # The decoder's figure and t2t-parse-eval's agree.
        assert result["f1"] == pytest.approx(evalb["f1"])
        assert result["matched"] == evalb["matched"]
