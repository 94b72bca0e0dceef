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
_NORM = re.compile(r"^(layer_prepostprocess|layer_postprocess)/layer_norm/layer_norm_(scale|bias)$")
"""A sublayer's layer norm: T2T's pre-norm runs it in `layer_preprocess`
(`layer_preprocess_sequence "n"`, scope `layer_prepostprocess`), its
post-norm in `layer_postprocess` (`layer_postprocess_sequence "dan"`)."""
NORM_SCOPES = {"pre": "layer_prepostprocess", "post": "layer_postprocess"}
"""{our norm_type: the scope of T2T's sublayer norms}."""
_FFN = {"conv1/kernel": "inner.kernel", "conv1/bias": "inner.bias",
        "conv2/kernel": "output.kernel", "conv2/bias": "output.bias"}
_ROLES = {"shared": ("shared_embedding.embeddings",),
          "input_emb": ("source_embedding.embeddings",),
          "target_emb": ("target_embedding.embeddings",),
          "softmax": ("output_projection.kernel",)}


def _norm_placement(name: str, scope: str, norm_type: str) -> None:
    """A UserError when the sublayer norm `name` (in T2T's `scope`) is not
    where a `norm_type` Transformer has it: hparams.json and the checkpoint
    disagree."""
    if scope != NORM_SCOPES[norm_type]:
        theirs = "pre" if scope == NORM_SCOPES["pre"] else "post"
        said = {"pre": "layer_preprocess_sequence 'n', layer_postprocess_sequence 'da'",
                "post": "layer_preprocess_sequence 'none', layer_postprocess_sequence 'dan'"}
        raise UserError(f"hparams.json and the checkpoint disagree: the checkpoint holds "
                        f"{name}, a norm of a {theirs}-norm Transformer ({said[theirs]}), but "
                        f"hparams.json describes a {norm_type}-norm one ({said[norm_type]}); "
                        f"pass the hparams.json of the run that wrote it. "
                        f"Received: variable={name!r}")


def _single(name: str, stack: str, layer: str, sublayer: str, rest: str,
            parts: dict[str, dict[str, np.ndarray]], norm_type: str) -> str | None:
    """Our name of one T2T layer variable (attention q/k/v go to `parts`)."""
    ours = f"{stack}_layer_{layer}"
    norm_match = _NORM.match(rest)
    if norm_match:
        _norm_placement(name, norm_match.group(1), norm_type)
        norm = {"self_attention": "self_attention_norm", "ffn": "ffn_norm",
                "encdec_attention": "cross_attention_norm"}[sublayer]
        return f"{ours}.{norm}." + ("gamma" if norm_match.group(2) == "scale" else "beta")
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


def our_weights(variables: dict[str, np.ndarray], shared_embedding: bool,
                norm_type: str) -> dict[str, np.ndarray]:
    """{our variable path (`checkpoint_variables.model_variables`): value} of
    T2T's `variables` (a `T2TRunDir.read_variables`) for our Transformer of
    `shared_embedding` and `norm_type`.

    Each sublayer's norm is T2T's `layer_prepostprocess/layer_norm` (pre-norm,
    with the stacks' final norms `encoder|decoder/layer_prepostprocess/...`)
    or its `layer_postprocess/layer_norm` (post-norm, no final norms); one of
    the other placement than `norm_type` is a UserError (hparams.json and the
    checkpoint disagree).

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
            target = _single(name, *layer.groups(), parts, norm_type)
        elif modality:
            shards.setdefault(modality.group(3), {})[int(modality.group(4))] = value
            target = ""
        elif name == "transformer/body/target_space_embedding/kernel":
            target = "target_space_embedding.embeddings"
        else:
            final = re.fullmatch(r"transformer/body/(encoder|decoder)/layer_prepostprocess/"
                                 r"layer_norm/layer_norm_(scale|bias)", name)
            if final:   # the stacks' final norms: pre-norm's alone
                _norm_placement(name, NORM_SCOPES["pre"], norm_type)
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
