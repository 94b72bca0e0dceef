"""HParams: registered sets, JSON round trip, override parsing, Table 3 rows."""

import dataclasses
import json
import pathlib
import re

import pytest

from conftest import ISSUE_HPARAMS_SETS
from t2t_revival import registry
from t2t_revival.settings.hparams import HParams, HParamsError, parse_overrides, resolve

ALL_SETS = registry.hparams_sets.names()
# The page with the paper's Table 3 as override strings.
TABLE3_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "reproducing.md"


def test_the_issue_sets_are_registered():
    for name in ISSUE_HPARAMS_SETS:
        assert name in ALL_SETS


@pytest.mark.parametrize("name", ALL_SETS)
def test_every_set_builds_and_round_trips_through_json(name, tmp_path):
    hp = registry.hparams_sets.get(name)()
    assert isinstance(hp, HParams)
    assert HParams.from_json(hp.to_json()) == hp
    path = tmp_path / "hparams.json"
    hp.save(str(path))
    assert HParams.load(str(path)) == hp
    assert [p.name for p in tmp_path.iterdir()] == ["hparams.json"]  # no temp left


def test_paper_values():
    base = registry.hparams_sets.get("transformer_base")()
    assert (base.num_hidden_layers, base.d_model, base.d_ff, base.num_heads) == (6, 512, 2048, 8)
    assert (base.dropout, base.attention_dropout, base.relu_dropout) == (0.1, 0.1, 0.1)
    assert base.label_smoothing == 0.1
    assert (base.adam_beta1, base.adam_beta2, base.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert base.learning_rate_warmup_steps == 4000 and base.learning_rate == 1.0
    assert base.norm_type == "post" and base.position_encoding == "sinusoid"
    assert base.shared_embedding is True
    assert (base.beam_size, base.alpha, base.extra_length) == (4, 0.6, 50)
    assert base.key_size == base.value_size == 64
    big = registry.hparams_sets.get("transformer_big")()
    assert (big.d_model, big.d_ff, big.num_heads, big.dropout) == (1024, 4096, 16, 0.3)
    for name in ("transformer_base_single_gpu", "transformer_big_single_gpu"):
        hp = registry.hparams_sets.get(name)()
        # ~25k real tokens: 8 x 4096 padded token slots per update
        assert hp.batch_size * hp.gradient_accumulation_steps == 32768
    for name in ("transformer_parsing_base", "transformer_parsing_big"):
        hp = registry.hparams_sets.get(name)()
        assert (hp.num_hidden_layers, hp.d_model) == (4, 1024)
        assert (hp.beam_size, hp.alpha, hp.extra_length) == (21, 0.3, 300)


def test_parsing_tiny_is_the_cpu_sized_parsing_set():
    assert "transformer_parsing_tiny" in ALL_SETS
    hp = registry.hparams_sets.get("transformer_parsing_tiny")()
    base = registry.hparams_sets.get("transformer_parsing_base")()
    # The shapes of benchmarks/RESULTS.md's parsing run, small enough for the CPU.
    assert (hp.num_hidden_layers, hp.d_model, hp.d_ff, hp.num_heads) == (2, 128, 512, 4)
    assert (hp.batch_size, hp.learning_rate_warmup_steps, hp.learning_rate) == (2048, 400, 2.0)
    # The paper's parsing decoding, max_length and dropout are kept.
    assert (hp.beam_size, hp.alpha, hp.extra_length) == (21, 0.3, 300)
    assert (hp.max_length, hp.dropout, hp.attention_dropout) == (512, 0.2, 0.2)
    assert hp == base.replace(num_hidden_layers=2, d_model=128, d_ff=512, num_heads=4,
                              batch_size=2048, learning_rate_warmup_steps=400,
                              learning_rate=2.0)
    # It resolves with the PTB sample problem: its vocabulary size is filled in.
    problem = registry.problems.get("parsing_english_ptb_sample")()
    resolved = resolve("transformer_parsing_tiny", "", problem=problem)
    assert resolved.vocab_size == 4000 and resolved.d_model == 128
    assert resolved.beam_size == 21


def test_frozen():
    hp = HParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        hp.d_model = 3


def test_override_parsing_good_values():
    got = parse_overrides(
        "num_hidden_layers=2, dropout=0.3,shared_embedding=false,"
        "norm_type=pre,bucket_boundaries=[8, 16,32],learning_rate=2,"
        "position_encoding='learned'")
    assert got == {"num_hidden_layers": 2, "dropout": 0.3, "shared_embedding": False,
                   "norm_type": "pre", "bucket_boundaries": (8, 16, 32),
                   "learning_rate": 2.0, "position_encoding": "learned"}
    assert isinstance(got["learning_rate"], float)
    for text, value in (("true", True), ("True", True), ("1", True), ("no", False)):
        assert parse_overrides(f"shared_embedding={text}") == {"shared_embedding": value}
    assert parse_overrides("bucket_boundaries=[]") == {"bucket_boundaries": ()}
    assert parse_overrides("") == {}
    hp = HParams().override_from_string("d_model=256,num_heads=4")
    assert (hp.d_model, hp.num_heads, hp.key_size) == (256, 4, 64)


@pytest.mark.parametrize("text, pattern", [
    ("d_model=abc", r"'d_model' expects int.*Received: d_model=abc"),
    ("dropout=high", r"'dropout' expects float"),
    ("shared_embedding=maybe", r"'shared_embedding' expects bool"),
    ("bucket_boundaries=8,16", r"'bucket_boundaries' expects a list of int"),
    ("bucket_boundaries=[8,x]", r"'bucket_boundaries' expects a list of int"),
    ("num_hiden_layers=2", r"Unknown hparam 'num_hiden_layers'. Did you mean 'num_hidden_layers'"),
    ("d_model", r"has no '='"),
    ("d_model=3,d_model=4", r"set twice"),
    ("bucket_boundaries=[8,16", r"Unbalanced"),
    ("norm_type=middle", r"'norm_type' must be one of post, pre"),
    ("dropout=1.5", r"probability"),
    ("num_heads=0", r"must be in \[1, inf\)"),
    ("d_model=100,num_heads=8", r"divisible"),
    ("bucket_boundaries=[16,8]", r"strictly increasing"),
    ("d_model=1.5", r"'d_model' expects int"),
])
def test_override_parsing_bad_values(text, pattern):
    with pytest.raises(HParamsError, match=pattern):
        HParams().override_from_string(text)


def test_from_json_rejects_unknown_field_and_bad_type():
    with pytest.raises(HParamsError, match="Unknown hparam 'd_modle'"):
        HParams.from_dict({"d_modle": 3})
    with pytest.raises(HParamsError, match="'d_model' expects int"):
        HParams.from_dict({"d_model": "512"})
    with pytest.raises(HParamsError, match="malformed"):
        HParams.from_json("{not json")


def test_resolve_precedence_set_then_problem_then_command_line():
    class FakeProblem:
        def hparams_overrides(self, hp):
            return {"vocab_size": 8000, "beam_size": 6}

    hp = resolve("transformer_tiny", "beam_size=2", problem=FakeProblem())
    assert hp.d_model == 128          # from the set
    assert hp.vocab_size == 8000      # from the problem
    assert hp.beam_size == 2          # command line wins


def _table3_rows():
    """The `--hparams` strings of docs/reproducing.md's Table 3 table."""
    rows = re.findall(r"^\| *\(([A-E])\)[^|]*\|[^|]*\| *`([^`]*)` *\|", TABLE3_PAGE.read_text(),
                      flags=re.M)
    assert rows, "docs/reproducing.md lost its Table 3 table"
    return rows


def test_table3_override_strings_all_parse():
    rows = _table3_rows()
    assert {r for r, _ in rows} == set("ABCDE")
    base = registry.hparams_sets.get("transformer_base")()
    for row, text in rows:
        hp = base.override_from_string(text)
        assert hp != base, (row, text)
    by_text = dict((t, r) for r, t in rows)
    hp = base.override_from_string("num_heads=1,d_k=512,d_v=512")
    assert by_text["num_heads=1,d_k=512,d_v=512"] == "A"
    assert hp.key_size == 512 and hp.value_size == 512
    assert base.override_from_string("position_encoding=learned").position_encoding == "learned"
