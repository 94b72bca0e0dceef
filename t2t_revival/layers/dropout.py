"""Dropout whose random bits are cheap inside an XLA-compiled CPU step."""

import keras


@keras.saving.register_keras_serializable(package="t2t_revival")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, drawing its masks with ThreeFry inside XLA on TensorFlow.

    Keras' TensorFlow backend draws dropout masks with
    `tf.nn.experimental.stateless_dropout` and no algorithm (`auto_select`),
    which XLA on the CPU compiles to a slow generator: on the 2-core
    development machine one 1M-element mask in a `jit_compile=True` function
    took about 490 ms with `auto_select`, 11 ms with Philox and 4 ms with
    ThreeFry, and the model's compiled forward/backward was 1.14x (tiny) and
    1.23x (multi30k) faster with ThreeFry (`benchmarks/dropout_rng.py`;
    `benchmarks/RESULTS.md`, "Dropout's random bits"). So inside an
    XLA-compiled TensorFlow function (the trainer's per-replica step) this
    layer asks for ThreeFry, JAX's default generator. TensorFlow's non-XLA
    kernels have no ThreeFry, so outside XLA, and on the other backends, it is
    Keras' dropout unchanged. Either way the mask is a function of the
    layer's `keras.random.SeedGenerator`: runs reproduce from their seed.
    (This is the one place a model layer names its backend; the model's maths
    stays `keras.ops`, this only chooses how random bits are drawn.)

    Args:
        rate: the fraction of the inputs to drop, in [0, 1).
        noise_shape, seed: as `keras.layers.Dropout`.

    Call arguments:
        inputs: any shape.
        training: enables dropout.

    Returns:
        The inputs' shape: each element zeroed with probability `rate`, the
        kept ones scaled by `1 / (1 - rate)`.
    """

    XLA_RNG_ALG = "threefry"

    def call(self, inputs, training=False):
        if (not training or self.rate <= 0 or self.noise_shape is not None
                or keras.backend.backend() != "tensorflow" or not _in_xla_function()):
            return super().call(inputs, training=training)
        import tensorflow as tf

        seed = self.seed_generator.next()   # the state's next [2] seed, as Keras draws it
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, rng_alg=self.XLA_RNG_ALG)


def _in_xla_function():
    """Whether TensorFlow is tracing a function XLA will compile (a
    `jit_compile=True` one, or one called from it). TensorFlow has no public
    test for this; if its internal one moves, the answer is False and dropout
    falls back to Keras' own (slower under XLA, never wrong)."""
    try:
        from tensorflow.python.framework import ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()))
