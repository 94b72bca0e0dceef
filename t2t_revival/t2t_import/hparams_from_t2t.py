"""Our `HParams` for a tensor2tensor checkpoint, and what of T2T's is refused."""

from __future__ import annotations

import json
import re
from typing import Any

from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams

MODALITY = re.compile(r"^transformer/symbol_modality_(\d+)_(\d+)/"
                      r"(shared|input_emb|target_emb|softmax)/weights_(\d+)$")
"""A shard of T2T's symbol modality: vocabulary size, width, role, shard index."""

# {T2T hparam: the values we support}; another value is refused naming it.
_SUPPORTED: dict[str, tuple[Any, ...]] = {
    "ffn_layer": ("dense_relu_dense",),
    "self_attention_type": ("dot_product",),
    "max_relative_position": (0,),
    "norm_type": ("layer",),
    "pos": ("timing",),
    "multiply_embedding_mode": ("sqrt_depth", "none"),
    "proximity_bias": (False,),
    "symbol_modality_skip_top": (False,),
    "input_modalities": ("default",),
    "target_modality": ("default",),
    "prepend_mode": ("none",),
    "causal_decoder_self_attention": (True,),
    "unidirectional_encoder": (False,),
    "add_relative_to_values": (False,),
    "heads_share_relative_embedding": (False,),
    "attention_variables_3d": (False,),
    "hard_attention_k": (0,),
}
_SEQUENCES = {("n", "da"): "pre", ("none", "dan"): "post", ("", "dan"): "post"}
# {the modality's roles: our shared_embedding}, by T2T's symbol_bottom/_top:
# shared_embedding_and_softmax_weights shares all three; its shared_embedding
# alone inputs and targets (then ours holds two copies of that matrix).
_ROLES = {frozenset({"shared"}): True, frozenset({"shared", "softmax"}): False,
          frozenset({"input_emb", "target_emb", "softmax"}): False}


def _refuse(name: str, value: Any, why: str) -> UserError:
    return UserError(f"the tensor2tensor run uses {name}={value!r}, which this Transformer "
                     f"does not have ({why}); it cannot be imported. Received: {name}={value!r}")


def modality(shapes: dict[str, tuple[int, ...]]) -> tuple[int, int, set[str]]:
    """(vocabulary size, width, roles) of the checkpoint's symbol modality, from
    its variables `symbol_modality_V_H/<role>/weights_i`."""
    found = {(int(m.group(1)), int(m.group(2))) for m in map(MODALITY.match, shapes) if m}
    if len(found) != 1:
        raise UserError(f"the tensor2tensor checkpoint has {len(found)} symbol modalities "
                        f"({sorted(found)}); one shared source/target vocabulary is needed. "
                        f"Received: modalities={sorted(found)}")
    (vocab_size, width), = found
    return vocab_size, width, {m.group(3) for m in map(MODALITY.match, shapes) if m}


def _roles_said(t2t: dict[str, Any]) -> frozenset[str] | None:
    """The modality roles T2T's hparams.json gives (None when it names neither
    sharing hparam: the checkpoint's say)."""
    if "shared_embedding_and_softmax_weights" not in t2t and "shared_embedding" not in t2t:
        return None
    if t2t.get("shared_embedding_and_softmax_weights"):
        return frozenset({"shared"})
    if t2t.get("shared_embedding"):
        return frozenset({"shared", "softmax"})
    return frozenset({"input_emb", "target_emb", "softmax"})


def shared_embedding(t2t: dict[str, Any], roles: set[str]) -> bool:
    """Our `shared_embedding` for the checkpoint's modality `roles` (a
    UserError for a set T2T's Transformer does not write, or one its
    hparams.json's sharing hparams contradict)."""
    if frozenset(roles) not in _ROLES:
        raise UserError(f"the tensor2tensor checkpoint's symbol modality holds "
                        f"{sorted(roles)}; this Transformer imports 'shared' (inputs, targets "
                        f"and softmax), 'shared' and 'softmax', or 'input_emb', 'target_emb' "
                        f"and 'softmax'. Received: roles={sorted(roles)}")
    said = _roles_said(t2t)
    if said is not None and said != frozenset(roles):
        raise UserError(f"hparams.json and the checkpoint disagree: shared_embedding_and_"
                        f"softmax_weights={t2t.get('shared_embedding_and_softmax_weights')!r} "
                        f"and shared_embedding={t2t.get('shared_embedding')!r} mean the "
                        f"modality's {sorted(said)}, the checkpoint holds {sorted(roles)}; "
                        f"pass the hparams.json of the run that wrote it. "
                        f"Received: roles={sorted(roles)}")
    return _ROLES[frozenset(roles)]


_SIZES = ("num_hidden_layers", "hidden_size", "filter_size", "num_heads")
"""The T2T hparams without which there is no Transformer to build: positive integers."""


def check_t2t_sizes(t2t: dict[str, Any], hparams_file: str = "hparams.json") -> None:
    """A UserError naming the first of `_SIZES` that T2T's hparams.json `t2t`
    lacks or gives as anything but a positive integer (null, 0, "2", 2.5),
    and when hidden_size is not a multiple of num_heads."""
    for name in _SIZES:
        value = t2t.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            said = f"has no {name}" if name not in t2t else \
                f"has {name}={json.dumps(value)}"
            raise UserError(f"{hparams_file} {said}; the Transformer needs it, a positive "
                            f"integer (every hparams.json tensor2tensor's trainer writes has "
                            f"one): pass the hparams.json of the run that wrote the "
                            f"checkpoint. Received: {name}={value!r}")
    if t2t["hidden_size"] % t2t["num_heads"]:
        raise UserError(f"{hparams_file} has hidden_size={t2t['hidden_size']}, which "
                        f"num_heads={t2t['num_heads']} does not divide; pass the hparams.json "
                        f"t2t-trainer wrote for this checkpoint. "
                        f"Received: num_heads={t2t['num_heads']!r}")


def hparams_from_t2t(t2t: dict[str, Any], shapes: dict[str, tuple[int, ...]],
                     target_space_id: int) -> HParams:
    """Our resolved HParams for T2T's hparams.json `t2t` and the checkpoint's
    variable `shapes`: tensor2tensor's variants of the Transformer (pre or
    post norm, its timing signal, `multiply_embedding_mode`, the zeroed PAD
    embedding, the target space embedding when the checkpoint has one, the
    embeddings and softmax shared or not: `shared_embedding`).

    A T2T hparam we do not support (relative attention, MoE or another
    `ffn_layer`, separate encoder/decoder depths, ...) is a UserError naming it.
    """
    check_t2t_sizes(t2t)
    for name, allowed in _SUPPORTED.items():
        if name in t2t and t2t[name] not in allowed:
            raise _refuse(name, t2t[name], f"supported: {', '.join(map(repr, allowed))}")
    sequences = (t2t.get("layer_preprocess_sequence", "none"),
                 t2t.get("layer_postprocess_sequence", "dan"))
    if sequences not in _SEQUENCES:
        raise _refuse("layer_preprocess_sequence/layer_postprocess_sequence", sequences,
                      "supported: 'n'/'da' (pre-norm) and 'none'/'dan' (post-norm)")
    layers = t2t["num_hidden_layers"]
    for name in ("num_encoder_layers", "num_decoder_layers"):
        if t2t.get(name) not in (None, 0, layers):
            raise _refuse(name, t2t[name], f"both stacks have num_hidden_layers={layers}")
    vocab_size, width, roles = modality(shapes)
    heads = t2t["num_heads"]
    return HParams(
        num_hidden_layers=layers, d_model=t2t["hidden_size"], d_ff=t2t["filter_size"],
        num_heads=heads, d_k=(t2t.get("attention_key_channels") or 0) // heads,
        d_v=(t2t.get("attention_value_channels") or 0) // heads,
        dropout=t2t.get("layer_prepostprocess_dropout", 0.1),
        attention_dropout=t2t.get("attention_dropout", 0.1),
        relu_dropout=t2t.get("relu_dropout", 0.1),
        norm_type=_SEQUENCES[sequences], layer_norm_epsilon=t2t.get("norm_epsilon", 1e-6),
        position_encoding="t2t_sinusoid",
        multiply_embedding_mode=t2t.get("multiply_embedding_mode", "sqrt_depth"),
        zero_pad_embedding=True,
        target_space_embedding="transformer/body/target_space_embedding/kernel" in shapes,
        target_space_id=target_space_id,
        shared_embedding=shared_embedding(t2t, roles), vocab_size=vocab_size,
        max_length=t2t.get("max_length") or 256,
        label_smoothing=t2t.get("label_smoothing", 0.1),
        adam_beta1=t2t.get("optimizer_adam_beta1", 0.9),
        adam_beta2=t2t.get("optimizer_adam_beta2", 0.98),
        adam_epsilon=t2t.get("optimizer_adam_epsilon", 1e-9),
        learning_rate_warmup_steps=t2t.get("learning_rate_warmup_steps", 4000),
    )
