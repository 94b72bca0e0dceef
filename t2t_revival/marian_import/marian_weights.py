"""A Marian model's weights (Hugging Face's names) -> ours (`our_weights`), and
the order of its ids in ours (`id_order`).

Hugging Face's `nn.Linear` keeps `[out, in]` weights (ours are `[in, out]`
kernels); q, k, v projections are fused here (`qkv`, and `key_value` for the
encoder-decoder attention); the embeddings' rows and `final_logits_bias` are
reordered so that PAD, EOS and UNK take ids 0, 1, 2 (`special_ids`).
Marian's sinusoid table, where a file holds it (`embed_positions`), is
checked against ours rather than imported. Every tensor finds its place or is
refused by name: none is dropped, none left at its initial value.
"""

from __future__ import annotations

import re

import numpy as np

from t2t_revival.errors import UserError
from t2t_revival.settings.hparams import HParams

_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(\w+)\.(weight|bias)$")
_ATTENTION = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(self_attn|encoder_attn)\."
                        r"(q|k|v|out)_proj\.(weight|bias)$")
_NORMS = {"self_attn_layer_norm": "self_attention_norm", "final_layer_norm": "ffn_norm",
          "encoder_attn_layer_norm": "cross_attention_norm"}
_FFN = {"fc1": "ffn.inner", "fc2": "ffn.output"}
_NORM_PARTS = {"weight": "gamma", "bias": "beta"}
_POSITIONS = ("encoder.embed_positions.weight", "decoder.embed_positions.weight")


def id_order(pieces: list[str], pad: str = "<pad>", eos: str = "</s>",
             unk: str = "<unk>") -> list[int]:
    """Marian's id of each of our ids: PAD, EOS, UNK first, then the other
    pieces in Marian's order."""
    special = [pieces.index(p) for p in (pad, eos, unk)]
    return special + [i for i in range(len(pieces)) if i not in set(special)]


def _linear(tensors: dict, name: str) -> np.ndarray:
    return tensors.pop(name).T   # [out, in] -> [in, out]


def our_weights(tensors: dict[str, np.ndarray], hparams: HParams, source_order: list[int],
                target_order: list[int], folder: str) -> dict[str, np.ndarray]:
    """{our variable path: value} of Hugging Face's `tensors` (`MarianDir.weights`)."""
    tensors = {re.sub(r"^model\.", "", k): v for k, v in tensors.items()}
    ours: dict[str, np.ndarray] = {}
    for stack in ("encoder", "decoder"):
        for i in range(hparams.encoder_layers if stack == "encoder" else hparams.decoder_layers):
            _layer(tensors, ours, stack, i, folder)
    _embeddings(tensors, ours, hparams, source_order, target_order, folder)
    _check_positions(tensors, hparams, folder)
    if tensors:
        name = sorted(tensors)[0]
        raise UserError(f"the Marian model in {folder} holds {name} "
                        f"{list(tensors[name].shape)}, which this Transformer has no place "
                        f"for (its config.json describes another model, or a feature not "
                        f"supported here); it cannot be imported. Received: weight={name!r}")
    return ours


def _layer(tensors, ours, stack, i, folder) -> None:
    prefix, mine = f"{stack}.layers.{i}", f"{stack}_layer_{i}"
    try:
        for hf, attention in (("self_attn", "self_attention"),
                              ("encoder_attn", "cross_attention")):
            if hf == "encoder_attn" and stack == "encoder":
                continue
            base = f"{prefix}.{hf}"
            q, k, v = (_linear(tensors, f"{base}.{p}_proj.weight") for p in "qkv")
            qb, kb, vb = (tensors.pop(f"{base}.{p}_proj.bias") for p in "qkv")
            if attention == "self_attention":
                ours[f"{mine}.{attention}.qkv.kernel"] = np.concatenate([q, k, v], axis=1)
                ours[f"{mine}.{attention}.qkv.bias"] = np.concatenate([qb, kb, vb])
            else:
                ours[f"{mine}.{attention}.query.kernel"] = q
                ours[f"{mine}.{attention}.query.bias"] = qb
                ours[f"{mine}.{attention}.key_value.kernel"] = np.concatenate([k, v], axis=1)
                ours[f"{mine}.{attention}.key_value.bias"] = np.concatenate([kb, vb])
            ours[f"{mine}.{attention}.output.kernel"] = _linear(tensors,
                                                                f"{base}.out_proj.weight")
            ours[f"{mine}.{attention}.output.bias"] = tensors.pop(f"{base}.out_proj.bias")
        for hf, norm in _NORMS.items():
            if hf == "encoder_attn_layer_norm" and stack == "encoder":
                continue
            for part, ours_part in _NORM_PARTS.items():
                ours[f"{mine}.{norm}.{ours_part}"] = tensors.pop(f"{prefix}.{hf}.{part}")
        for hf, ffn in _FFN.items():
            ours[f"{mine}.{ffn}.kernel"] = _linear(tensors, f"{prefix}.{hf}.weight")
            ours[f"{mine}.{ffn}.bias"] = tensors.pop(f"{prefix}.{hf}.bias")
    except KeyError as e:
        raise UserError(f"the Marian model in {folder} has no {e.args[0]}, which its "
                        f"config.json's layers need; the weights are incomplete or of another "
                        f"model. Received: weight={e.args[0]!r}") from None


def _one_of(tensors, names, folder, what):
    """The first of `names` present, popped, with every other present one
    popped too and checked equal to it (tied copies)."""
    present = [n for n in names if n in tensors]
    if not present:
        raise UserError(f"the Marian model in {folder} has no {what} ({' or '.join(names)}); "
                        f"the weights are incomplete. Received: weights without {names[0]!r}")
    first = tensors.pop(present[0])
    for name in present[1:]:
        other = tensors.pop(name)
        if other.shape != first.shape or not np.array_equal(other, first):
            raise UserError(f"the Marian model in {folder} ties {name} to {present[0]} "
                            f"(config.json), but the two differ; it cannot be imported as "
                            f"one matrix. Received: weight={name!r}")
    return first


def _embeddings(tensors, ours, hp: HParams, source_order, target_order, folder) -> None:
    if hp.shared_embedding:
        shared = _one_of(tensors, ["shared.weight", "encoder.embed_tokens.weight",
                                   "decoder.embed_tokens.weight", "lm_head.weight"],
                         folder, "shared embedding")
        ours["shared_embedding.embeddings"] = shared[source_order]
    else:
        if "shared.weight" in tensors:   # shared between the stacks, not the projection
            source = target = _one_of(tensors, ["shared.weight", "encoder.embed_tokens.weight",
                                                "decoder.embed_tokens.weight"],
                                      folder, "shared embedding")
        else:
            source = _one_of(tensors, ["encoder.embed_tokens.weight"], folder, "source embedding")
            target = _one_of(tensors, ["decoder.embed_tokens.weight"] + (
                ["lm_head.weight"] if hp.tie_output_projection else []),
                folder, "target embedding")
        ours["source_embedding.embeddings"] = source[source_order]
        ours["target_embedding.embeddings"] = target[target_order]
        if not hp.tie_output_projection:
            projection = _one_of(tensors, ["lm_head.weight"], folder, "output projection")
            ours["output_projection.kernel"] = projection[target_order].T
    bias = _one_of(tensors, ["final_logits_bias"], folder, "final_logits_bias")
    ours["final_logits_bias"] = bias.reshape(-1)[target_order]


def marian_sinusoid(positions: int, d_model: int) -> np.ndarray:
    """Marian's position table `[positions, d_model]`: sin(pos / 10000^(2i/d))
    for i < d/2, then the cosines (MarianSinusoidalPositionalEmbedding)."""
    angle = np.arange(positions)[:, None] / np.power(10000.0, 2 * np.arange(d_model // 2) / d_model)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1).astype(np.float32)


def _check_positions(tensors, hp: HParams, folder) -> None:
    """A stored sinusoid table (older conversions keep one) must be Marian's."""
    for name in _POSITIONS:
        if name not in tensors:
            continue
        table = tensors.pop(name)
        expected = marian_sinusoid(table.shape[0], hp.d_model)
        if table.shape != expected.shape or not np.allclose(table, expected, atol=1e-4):
            raise UserError(f"the Marian model in {folder} holds {name} {list(table.shape)}, "
                            f"which is not Marian's sinusoid (learned positions are not "
                            f"supported); it cannot be imported. Received: weight={name!r}")
