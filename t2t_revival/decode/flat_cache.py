"""The decoding cache as flat, named leaves: how it crosses a LiteRT program's boundary.

    flat = flat_cache(model.init_cache(...))   # {"layer_0__self__key": ..., ...}
    cache = nested_cache(flat)                 # the nested dicts again

The names join the cache's keys with `SEPARATOR` ("layer_0__self__key",
"layer_0__per_sentence__cross__key", "per_sentence__encoder_padding"), in
sorted key order (tf.nest's). Written with no backend: the conversion
(`litert_conversion`, TensorFlow) and the translator (`LiteRTTranslator`,
which runs without TensorFlow) share it.
"""

from __future__ import annotations

from typing import Any

from t2t_revival.layers.sentence_cache import PER_SENTENCE

SEPARATOR = "__"
"""Joins a cache leaf's keys into its name in the LiteRT programs."""
LOGITS = "logits"
"""The step program's first output: float32 [rows, vocab]."""


def flat_cache(cache, prefix: str = "") -> dict[str, Any]:
    """{name: leaf} of a nested-dict cache, in sorted key order (tf.nest's)."""
    flat = {}
    for key in sorted(cache):
        name = f"{prefix}{SEPARATOR}{key}" if prefix else key
        if isinstance(cache[key], dict):
            flat.update(flat_cache(cache[key], name))
        else:
            flat[name] = cache[key]
    return flat


def nested_cache(flat: dict[str, Any]) -> dict:
    """The nested-dict cache of `flat_cache`'s {name: leaf}."""
    cache: dict = {}
    for name, leaf in flat.items():
        *keys, last = name.split(SEPARATOR)
        node = cache
        for key in keys:
            node = node.setdefault(key, {})
        node[last] = leaf
    return cache


def is_per_sentence(name: str) -> bool:
    """Whether the leaf `name` is a sentence's (`PER_SENTENCE`), not a row's."""
    return PER_SENTENCE in name.split(SEPARATOR)
