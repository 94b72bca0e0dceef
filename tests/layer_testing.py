"""The one shared helper for layer tests (like keras-hub's `run_layer_test`).

`run_layer_test` checks, for one layer class and one input:
  * an eager call gives the expected output shape(s), all finite;
  * `get_config` -> `from_config` round-trips (also through
    `keras.saving.serialize_keras_object`), and the rebuilt layer with the
    original weights gives the same output;
  * a compiled call (`tf.function(jit_compile=True)`, XLA) gives the same output;
  * one training step: every trainable weight gets a finite, non-zero gradient.
"""

import numpy as np
import keras
import tensorflow as tf


def _flat(x):
    return [np.asarray(t) for t in keras.tree.flatten(x)]


def run_layer_test(layer_cls, init_kwargs, inputs, call_kwargs=None,
                   expected_output_shape=None, expect_weights=True):
    """Run the standard checks; returns the layer (built) and its eager output.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: the first call argument (numpy array).
        call_kwargs: further call arguments (training=False is added).
        expected_output_shape: a shape tuple, or a nested structure of them
            matching the output.
        expect_weights: whether the layer has trainable weights.
    """
    call_kwargs = dict(call_kwargs or {})
    call_kwargs.setdefault("training", False)

    layer = layer_cls(**init_kwargs)
    output = layer(inputs, **call_kwargs)
    if expected_output_shape is not None:
        got = keras.tree.map_structure(lambda t: tuple(t.shape), output)
        assert got == expected_output_shape, (got, expected_output_shape)
    eager = _flat(output)
    for t in eager:
        if np.issubdtype(t.dtype, np.floating):
            assert np.isfinite(t).all()

    # Serialization round trip.
    config = layer.get_config()
    restored = layer_cls.from_config(config)
    assert restored.get_config() == config
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer))
    assert type(revived) is layer_cls and revived.get_config() == config
    restored(inputs, **call_kwargs)  # build
    restored.set_weights(layer.get_weights())
    for a, b in zip(eager, _flat(restored(inputs, **call_kwargs))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)

    # Compiled (XLA) call.
    compiled = tf.function(lambda x: layer(x, **call_kwargs), jit_compile=True)
    for a, b in zip(eager, _flat(compiled(inputs))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)

    # One training step's gradients.
    if expect_weights:
        assert layer.trainable_weights
        train_kwargs = dict(call_kwargs, training=True)
        with tf.GradientTape() as tape:
            out = layer(inputs, **train_kwargs)
            loss = sum(tf.reduce_sum(tf.square(tf.cast(t, "float32")))
                       for t in keras.tree.flatten(out))
        grads = tape.gradient(loss, layer.trainable_weights)
        for w, g in zip(layer.trainable_weights, grads):
            assert g is not None, w.path
            g = np.asarray(tf.convert_to_tensor(g))  # IndexedSlices for embeddings
            assert np.isfinite(g).all() and np.abs(g).sum() > 0, w.path
    else:
        assert not layer.trainable_weights
    return layer, output
