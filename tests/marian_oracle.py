"""transformers' MarianMTModel in numpy, for the importer's tests: teacher-forced
logits of one sentence pair from Hugging Face's tensors and config.json, as
modeling_marian computes them in eval mode (post-norm layers, biased
attention, Marian's sinusoid, `final_logits_bias`). Written from
transformers' documented model, independently of the library's Keras code;
`test_marian_import` checks it against transformers' own logits on the shared
tiny model before trusting it on the kinds of Marian model the shared data
does not have (separate vocabularies, untied projections, other depths and
activations)."""

from __future__ import annotations

import math

import numpy as np

_ACT = {"swish": lambda x: x / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
        "relu": lambda x: np.maximum(x, 0),
        "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))}


def sinusoid(positions: int, dim: int) -> np.ndarray:
    j = np.arange(dim)
    enc = np.arange(positions)[:, None] / np.power(10000, 2 * (j // 2) / dim)[None, :]
    return np.concatenate([np.sin(enc[:, 0::2]), np.cos(enc[:, 1::2])], axis=1)


def _norm(x, t, name):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * t[f"{name}.weight"] + t[f"{name}.bias"]


def _linear(x, t, name):
    return x @ t[f"{name}.weight"].T + t[f"{name}.bias"]


def _attention(x, memory, t, name, heads, causal):
    d = x.shape[-1]
    head = d // heads
    q = _linear(x, t, f"{name}.q_proj") * head ** -0.5
    k, v = _linear(memory, t, f"{name}.k_proj"), _linear(memory, t, f"{name}.v_proj")
    split = lambda a: a.reshape(a.shape[0], heads, head).transpose(1, 0, 2)   # (H, T, d)
    logits = split(q) @ split(k).transpose(0, 2, 1)                            # (H, T, S)
    if causal:
        logits = np.where(np.tril(np.ones(logits.shape[1:], bool)), logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ split(v)).transpose(1, 0, 2).reshape(x.shape[0], d)
    return _linear(out, t, f"{name}.out_proj")


def marian_logits(tensors: dict, config: dict, input_ids, labels) -> np.ndarray:
    """float64 logits `[len(labels), decoder vocabulary]` of one pair."""
    t = {k.removeprefix("model."): np.asarray(v, np.float64) for k, v in tensors.items()}
    d, act = config["d_model"], _ACT[config["activation_function"]]
    scale = math.sqrt(d) if config.get("scale_embedding") else 1.0
    source = t.get("encoder.embed_tokens.weight", t.get("shared.weight"))
    target = t.get("decoder.embed_tokens.weight", t.get("shared.weight"))
    table = sinusoid(config["max_position_embeddings"], d)
    x = source[input_ids] * scale + table[:len(input_ids)]
    for i in range(config["encoder_layers"]):
        p = f"encoder.layers.{i}"
        x = _norm(x + _attention(x, x, t, f"{p}.self_attn", config["encoder_attention_heads"],
                                 False), t, f"{p}.self_attn_layer_norm")
        x = _norm(x + _linear(act(_linear(x, t, f"{p}.fc1")), t, f"{p}.fc2"), t,
                  f"{p}.final_layer_norm")
    decoder_input = [config["decoder_start_token_id"]] + list(labels[:-1])
    y = target[decoder_input] * scale + table[:len(decoder_input)]
    heads = config["decoder_attention_heads"]
    for i in range(config["decoder_layers"]):
        p = f"decoder.layers.{i}"
        y = _norm(y + _attention(y, y, t, f"{p}.self_attn", heads, True), t,
                  f"{p}.self_attn_layer_norm")
        y = _norm(y + _attention(y, x, t, f"{p}.encoder_attn", heads, False), t,
                  f"{p}.encoder_attn_layer_norm")
        y = _norm(y + _linear(act(_linear(y, t, f"{p}.fc1")), t, f"{p}.fc2"), t,
                  f"{p}.final_layer_norm")
    projection = t.get("lm_head.weight", target) if not config.get(
        "tie_word_embeddings", True) else target
    return y @ projection.T + t["final_logits_bias"].reshape(-1)
