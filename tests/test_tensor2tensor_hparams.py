"""tensor2tensor's hparam names and sets, checked against its own transformer.py,
and its --decode_hparams keys, against its decoding.py.

The T2T values are read from tensor2tensor 1.15.7's source (t2t_reference).
"""

import ast
import json

import pytest

from t2t_reference import t2t_file, t2t_hparam_names, t2t_hparams
from t2t_revival import registry
from t2t_revival.settings.decode_hparams import DecodeHParams, parse_decode_hparams
from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams, HParamsError, fields_help, parse_overrides, resolve
from t2t_revival.settings.t2t_hparam_names import (NO_EQUIVALENT, OTHER_T2T_NAMES,
                                          T2T_DECODE_NO_EQUIVALENT, T2T_NAMES, names_help)


# One value of each of tensor2tensor's names, and what it is here.
ALIASES = {
    "hidden_size=1024": {"d_model": 1024},
    "filter_size=4096": {"d_ff": 4096},
    "layer_prepostprocess_dropout=0.3": {"dropout": 0.3},
    "shared_embedding_and_softmax_weights=false": {"shared_embedding": False},
    "optimizer_multistep_accumulate_steps=8": {"gradient_accumulation_steps": 8},
    "optimizer_multistep_accumulate_steps=0": {"gradient_accumulation_steps": 1},
    "optimizer_adam_beta1=0.85": {"adam_beta1": 0.85},
    "optimizer_adam_beta2=0.997": {"adam_beta2": 0.997},
    "optimizer_adam_epsilon=1e-6": {"adam_epsilon": 1e-6},
    "norm_epsilon=1e-5": {"layer_norm_epsilon": 1e-5},
    "pack_dataset=true": {"packing": True},
    "learning_rate_constant=2.0": {"learning_rate": 2.0},
    "layer_preprocess_sequence=n": {"norm_type": "pre"},
    "layer_preprocess_sequence=none": {"norm_type": "post"},
    "layer_postprocess_sequence=da": {"norm_type": "pre"},
    "layer_postprocess_sequence=dan": {"norm_type": "post"},
    "layer_preprocess_sequence=n,layer_postprocess_sequence=da": {"norm_type": "pre"},
    "pos=timing": {"position_encoding": "sinusoid"},
    "pos=emb": {"position_encoding": "learned"},
    "ffn_layer=dense_relu_dense": {"ffn_activation": "relu"},
    "activation_dtype=bfloat16": {"mixed_precision": "mixed_bfloat16"},
}


def test_every_alias_has_a_test():
    tested = {pair.split("=")[0] for text in ALIASES for pair in text.split(",")}
    assert tested == set(T2T_NAMES)


@pytest.mark.parametrize("text", ALIASES)
def test_t2t_names_resolve_to_ours_once(text):
    assert parse_overrides(text) == ALIASES[text]


def test_hparams_json_keeps_our_names(tmp_path):
    hp = resolve("transformer_tiny", "hidden_size=64,filter_size=96,"
                 "layer_prepostprocess_dropout=0.2,shared_embedding_and_softmax_weights=false")
    assert (hp.d_model, hp.d_ff, hp.dropout, hp.shared_embedding) == (64, 96, 0.2, False)
    hp.save(str(tmp_path / "hparams.json"))
    saved = json.loads((tmp_path / "hparams.json").read_text())
    assert not set(saved) & set(T2T_NAMES)
    assert HParams.load(str(tmp_path / "hparams.json")) == hp


def test_a_set_may_be_written_with_t2t_names():
    hp = HParams().replace(hidden_size=1024, filter_size=4096, num_heads=16,
                           layer_preprocess_sequence="n", optimizer_adam_beta2=0.997)
    assert (hp.d_model, hp.d_ff, hp.num_heads, hp.norm_type, hp.adam_beta2) == (
        1024, 4096, 16, "pre", 0.997)
    with pytest.raises(HParamsError, match="'d_model' is given twice"):
        HParams().replace(hidden_size=1024, d_model=512)
    with pytest.raises(HParamsError, match="tensor2tensor's hparam 'weight_decay'"):
        HParams().replace(weight_decay=0.0)


@pytest.mark.parametrize("parse, text, needle", [
    (parse_overrides, "hidden_size=512,d_model=512",
     "'d_model' is set twice in --hparams (as 'hidden_size'"),
    (parse_overrides, "layer_preprocess_sequence=n,layer_postprocess_sequence=dan",
     "'norm_type' is set twice"),
    (parse_overrides, "pos=none", "no equivalent of 'none'"),
    (parse_overrides, "layer_preprocess_sequence=nd", "no equivalent of 'nd'"),
    (parse_overrides, "hidden_size=abc", "'hidden_size' expects int"),
    (parse_decode_hparams, "num_samples=-2", "'num_samples' must be in [-1, inf)"),
    (parse_decode_hparams, "shards=2,shard_id=2", "'shard_id' must be in [0, shards)"),
    (parse_decode_hparams, "samples_per_input=3", "add sampling=true"),
    (parse_decode_hparams, "save_images=true",
     "tensor2tensor's decode hparam 'save_images' has no equivalent"),
    (parse_decode_hparams, "num_decodes=2", "samples_per_input"),
])
def test_t2t_names_bad_values(parse, text, needle):
    with pytest.raises(UserError) as caught:
        parse(text)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", sorted(NO_EQUIVALENT) + ["moe_num_experts", "optimizer_momentum_momentum"])
def test_t2t_names_without_equivalent_are_refused_naming_them(name):
    with pytest.raises(HParamsError, match=f"tensor2tensor's hparam '{name}' has no equivalent"):
        parse_overrides(f"{name}=1")


def test_every_t2t_name_is_ours_an_alias_or_refused():
    """Every hparam of tensor2tensor's transformer_base (its source) has an outcome here,
    and every name in our tables is one of T2T's."""
    t2t = t2t_hparam_names()
    ours = set(HParams.__dataclass_fields__)
    tables = set(T2T_NAMES) | set(NO_EQUIVALENT) | OTHER_T2T_NAMES
    assert t2t - ours - tables == set()
    assert tables - t2t == set()
    assert not tables & ours


def _ours_from_t2t(values: dict) -> dict:
    """A tensor2tensor set's values (from its source) as our fields."""
    schedule = values["learning_rate_schedule"]
    if schedule == "legacy":
        assert values["learning_rate_decay_scheme"] == "noam"
        learning_rate = values["learning_rate"] * 0.002 * 5000
    else:
        assert schedule == "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size"
        learning_rate = values["learning_rate_constant"]
    norm = {("none", "dan"): "post", ("n", "da"): "pre"}[
        (values["layer_preprocess_sequence"], values["layer_postprocess_sequence"])]
    assert values["norm_type"] == "layer" and values["ffn_layer"] == "dense_relu_dense"
    assert values["num_encoder_layers"] == values["num_decoder_layers"] == 0
    assert values["weight_decay"] == 0 and values["optimizer"] == "adam"
    return dict(
        d_model=values["hidden_size"], d_ff=values["filter_size"],
        num_hidden_layers=values["num_hidden_layers"], num_heads=values["num_heads"],
        dropout=values["layer_prepostprocess_dropout"],
        attention_dropout=values["attention_dropout"], relu_dropout=values["relu_dropout"],
        norm_type=norm, layer_norm_epsilon=values["norm_epsilon"],
        shared_embedding=values["shared_embedding_and_softmax_weights"],
        max_length=values["max_length"], batch_size=values["batch_size"],
        learning_rate=pytest.approx(learning_rate),
        learning_rate_warmup_steps=values["learning_rate_warmup_steps"],
        adam_beta1=values["optimizer_adam_beta1"], adam_beta2=values["optimizer_adam_beta2"],
        adam_epsilon=values["optimizer_adam_epsilon"],
        label_smoothing=values["label_smoothing"], clip_grad_norm=values["clip_grad_norm"],
        gradient_accumulation_steps=max(values["optimizer_multistep_accumulate_steps"], 1),
        position_encoding={"timing": "sinusoid"}[values["pos"]])


@pytest.mark.parametrize("name", ["transformer_base_v1", "transformer_base_v2",
                                  "transformer_base_v3", "transformer_big_enfr"])
def test_t2t_sets_have_t2t_values(name):
    hp = registry.hparams_sets.get(name)()
    expected = _ours_from_t2t(t2t_hparams(name))
    assert {k: getattr(hp, k) for k in expected} == expected


def test_v3_is_t2t_transformer_base():
    assert t2t_hparams("transformer_base") == t2t_hparams("transformer_base_v3")
    v1 = _ours_from_t2t(t2t_hparams("transformer_base_v1"))
    base = registry.hparams_sets.get("transformer_base")()
    # Ours is the paper's: v1 but for the dropouts the paper does not name.
    assert {k: getattr(base.replace(attention_dropout=0.0, relu_dropout=0.0), k)
            for k in v1} == v1


def test_registry_help_says_where_our_names_differ():
    text = registry.help_text()
    for name in ("transformer_base", "transformer_big", "transformer_base_single_gpu",
                 "transformer_big_single_gpu"):
        line = next(line for line in text.splitlines() if line.split()[:1] == [name])
        assert "NOT tensor2tensor's" in line
    assert "transformer_base_v3" in text.split("transformer_base ")[1].splitlines()[0]
    help_text = names_help()
    for name in T2T_NAMES:
        assert f"  {name} " in help_text
    assert "Hparam fields" in fields_help()


def test_every_t2t_decode_key_is_ours_or_refused():
    tree = ast.parse(t2t_file("utils/decoding.py").read_text())
    function = next(n for n in tree.body if getattr(n, "name", "") == "decode_hparams")
    call = next(n for n in ast.walk(function) if isinstance(n, ast.Call) and n.keywords)
    t2t = {k.arg for k in call.keywords}
    ours = set(DecodeHParams.__dataclass_fields__)
    assert t2t - ours == set(T2T_DECODE_NO_EQUIVALENT)
    assert {"num_samples", "write_beam_scores", "max_input_size", "delimiter", "shards",
            "shard_id", "log_results", "beam_size", "alpha", "return_beams"} <= t2t & ours
