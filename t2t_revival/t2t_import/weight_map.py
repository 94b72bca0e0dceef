"""tensor2tensor's Transformer variables -> ours (`our_weights`)."""

from __future__ import annotations

import re

import numpy as np

from t2t_revival.errors import UserError
from t2t_revival.t2t_import.hparams_from_t2t import MODALITY

NOT_MODEL = re.compile(r"^(training/|global_step$|losses_avg/|train_stats/)")
"""T2T variables that are no weights of the model: its Adam slots and
beta powers (`training/...`; not needed: a fine-tuning run starts its own
optimizer) and its step and loss bookkeeping."""

_LAYER = re.compile(r"^transformer/body/(encoder|decoder)/layer_(\d+)/"
                    r"(self_attention|encdec_attention|ffn)/(.+)$")
_NORM = {"layer_prepostprocess/layer_norm/layer_norm_scale": "gamma",
         "layer_prepostprocess/layer_norm/layer_norm_bias": "beta"}
_FFN = {"conv1/kernel": "inner.kernel", "conv1/bias": "inner.bias",
        "conv2/kernel": "output.kernel", "conv2/bias": "output.bias"}
_ROLES = {"shared": ("shared_embedding.embeddings",),
          "input_emb": ("source_embedding.embeddings",),
          "target_emb": ("target_embedding.embeddings",),
          "softmax": ("output_projection.kernel",)}


def _single(name: str, stack: str, layer: str, sublayer: str, rest: str,
            parts: dict[str, dict[str, np.ndarray]]) -> str | None:
    """Our name of one T2T layer variable (attention q/k/v go to `parts`)."""
    ours = f"{stack}_layer_{layer}"
    if rest in _NORM:
        norm = {"self_attention": "self_attention_norm", "ffn": "ffn_norm",
                "encdec_attention": "cross_attention_norm"}[sublayer]
        return f"{ours}.{norm}.{_NORM[rest]}"
    if sublayer == "ffn":
        return f"{ours}.ffn.{_FFN[rest]}" if rest in _FFN else None
    match = re.fullmatch(r"multihead_attention/(q|k|v|output_transform)/kernel", rest)
    if not match:
        return None
    attention = "self_attention" if sublayer == "self_attention" else "cross_attention"
    if match.group(1) == "output_transform":
        return f"{ours}.{attention}.output.kernel"
    fused = "qkv" if attention == "self_attention" else \
        ("query" if match.group(1) == "q" else "key_value")
    parts.setdefault(f"{ours}.{attention}.{fused}.kernel", {})[match.group(1)] = name
    return ""


def our_weights(variables: dict[str, np.ndarray], shared_embedding: bool) -> dict[str, np.ndarray]:
    """{our variable path (`checkpoint_variables.model_variables`): value} of
    T2T's `variables` (a `T2TRunDir.read_variables`).

    Attention q, k, v kernels are concatenated (ours are fused: qkv, and
    key_value for encoder-decoder attention); the modality's shards are
    concatenated on axis 0 in shard order; a softmax matrix `[V, H]` becomes
    our output projection's `[H, V]` kernel; with `shared_embedding` False a
    T2T `shared` input/target matrix (and a separate softmax) gives our
    source and target embeddings each a copy. Variables of `NOT_MODEL` are
    left out; any other variable not mapped is a UserError naming it (none is
    silently dropped).
    """
    ours: dict[str, np.ndarray] = {}
    parts: dict[str, dict[str, str]] = {}
    shards: dict[str, dict[int, np.ndarray]] = {}
    for name, value in variables.items():
        if NOT_MODEL.match(name):
            continue
        target = None
        layer = _LAYER.match(name)
        modality = MODALITY.match(name)
        if layer:
            target = _single(name, *layer.groups(), parts)
        elif modality:
            shards.setdefault(modality.group(3), {})[int(modality.group(4))] = value
            target = ""
        elif name == "transformer/body/target_space_embedding/kernel":
            target = "target_space_embedding.embeddings"
        else:
            final = re.fullmatch(r"transformer/body/(encoder|decoder)/layer_prepostprocess/"
                                 r"layer_norm/layer_norm_(scale|bias)", name)
            if final:
                target = f"{final.group(1)}_final_norm." + \
                    ("gamma" if final.group(2) == "scale" else "beta")
        if target is None:
            raise UserError(f"the tensor2tensor checkpoint holds {name} {list(value.shape)}, "
                            f"which this Transformer has no place for; it cannot be imported "
                            f"(no variable is dropped). Received: variable={name!r}")
        if target:
            ours[target] = value
    for fused, names in parts.items():
        order = "qkv" if fused.endswith("qkv.kernel") else \
            ("q" if fused.endswith("query.kernel") else "kv")
        if set(names) != set(order):
            raise UserError(f"the tensor2tensor checkpoint has only {sorted(names)} of the "
                            f"attention kernels {list(order)} of {fused}; it is incomplete. "
                            f"Received: variables={sorted(names.values())}")
        ours[fused] = np.concatenate([variables[names[k]] for k in order], axis=1)
    for role, pieces in shards.items():
        matrix = np.concatenate([pieces[i] for i in sorted(pieces)], axis=0)  # (V, H)
        if role == "shared" and not shared_embedding:
            ours["source_embedding.embeddings"] = ours["target_embedding.embeddings"] = matrix
        elif role == "softmax":
            ours["output_projection.kernel"] = matrix.T  # (H, V)
        else:
            ours[_ROLES[role][0]] = matrix
    return ours
