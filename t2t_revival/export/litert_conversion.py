"""The model's encoder and cached decoder step as fixed-shape LiteRT programs.

    specs = cache_specs(model, sentences=1, rows=4, source_length=64, cache_length=114)
    step = step_function(model, specs, rows=4)      # a tf.function's concrete function
    flatbuffer = to_litert(step)                    # bytes of a .tflite model

LiteRT (TensorFlow Lite) runs a graph of fixed shapes through XNNPACK's CPU
kernels. The decoding cache (`Transformer.init_cache`: nested dicts) crosses
the program's boundary as flat, named tensors (`flat_cache`, which names them).

    encoder:  inputs int32 [sentences, source_length]
              -> the cache's per-sentence leaves (`PER_SENTENCE`), by name
    step:     ids int32 [rows], index int32 [], every cache leaf by name
              -> logits float32 [rows, vocab], then the rows' (self-attention)
                 leaves, by name (the per-sentence leaves do not change)

The self-attention buffers start as zeros ([rows, heads, cache_length,
d_k]); the step writes position `index` and attends to positions <= index.
`cache_length` is the most positions a search may run. Inputs are padded to
`source_length` (the padding is masked, as in `Decoder`'s batches).

Conversion: the variables are first frozen into constants
(`convert_variables_to_constants_v2`): TFLiteConverter given the live
function kept them as resource variables that the interpreter never filled
(TF 2.21: 78 KB models, NaN logits). Outputs are read by position (the
converted program names them Identity, Identity_1, ...), in the order
`step_output_names` and `encoder_output_names` give.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from keras import ops

from t2t_revival.decode.flat_cache import LOGITS, flat_cache, is_per_sentence, nested_cache
from t2t_revival.layers.sentence_cache import map_cache


def cache_specs(model, sentences: int, rows: int, source_length: int,
                cache_length: int) -> dict[str, tf.TensorSpec]:
    """{name: TensorSpec} of the cache of `sentences` sources of
    `source_length` tokens searched with `rows` rows (a multiple of
    `sentences`: beam search's batch x beam) over `cache_length` positions."""
    inputs = np.ones((sentences, source_length), np.int32)
    encoder_output, padding = model.encode(inputs, training=False)
    cache = model.init_cache(encoder_output, padding, cache_length)
    cache = map_cache(cache, lambda x: ops.repeat(x, rows // sentences, axis=0), lambda x: x)
    return {name: tf.TensorSpec(leaf.shape, leaf.dtype, name=name)
            for name, leaf in flat_cache(cache).items()}


def step_output_names(specs: dict[str, tf.TensorSpec]) -> list[str]:
    """The step program's outputs in order: logits, then the rows' leaves."""
    return [LOGITS] + [name for name in specs if not is_per_sentence(name)]


def encoder_output_names(specs: dict[str, tf.TensorSpec]) -> list[str]:
    """The encoder program's outputs in order: the per-sentence leaves."""
    return [name for name in specs if is_per_sentence(name)]


def step_function(model, specs: dict[str, tf.TensorSpec], rows: int, jit_compile: bool = False):
    """The concrete function of `model.decode_step` at fixed shapes:
    (ids int32 [rows], index int32 [], *cache leaves in `specs`' order)
    -> [logits [rows, vocab], *rows' leaves] (`step_output_names`);
    compiled by XLA with `jit_compile` (to time it beside LiteRT)."""
    names = list(specs)

    def step(ids, index, *leaves):
        logits, new_cache = model.decode_step(ids, nested_cache(dict(zip(names, leaves))),
                                              index)
        new = flat_cache(new_cache)
        return [logits] + [new[name] for name in step_output_names(specs)[1:]]

    return tf.function(step, autograph=False, jit_compile=jit_compile).get_concrete_function(
        tf.TensorSpec([rows], tf.int32, name="ids"), tf.TensorSpec([], tf.int32, name="index"),
        *specs.values())


def encoder_function(model, specs: dict[str, tf.TensorSpec], sentences: int,
                     source_length: int, cache_length: int):
    """The concrete function of the encoder and the cache's per-sentence part:
    inputs int32 [sentences, source_length] -> the per-sentence leaves
    (`encoder_output_names`)."""

    def encode(inputs):
        encoder_output, padding = model.encode(inputs, training=False)
        flat = flat_cache(model.init_cache(encoder_output, padding, cache_length))
        return [flat[name] for name in encoder_output_names(specs)]

    return tf.function(encode, autograph=False).get_concrete_function(
        tf.TensorSpec([sentences, source_length], tf.int32, name="inputs"))


def to_litert(concrete_function) -> bytes:
    """A LiteRT flatbuffer (.tflite bytes) of `concrete_function`, float32,
    its variables frozen into constants."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    from absl import logging as absl_logging

    frozen = convert_variables_to_constants_v2(concrete_function)
    # The converter logs its choices (the deprecated path of a function
    # without a trackable object: the frozen one needs none) on every call.
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        return tf.lite.TFLiteConverter.from_concrete_functions([frozen]).convert()
    finally:
        absl_logging.set_verbosity(verbosity)
