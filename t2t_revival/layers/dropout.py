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
    # On the JAX backend: the key type the mask's bits come from (None: Keras'
    # own dropout, a ThreeFry uniform float per element) and the bits per
    # element (8, 16 or 32; fewer bits quantize the keep probability to 1/2**bits).
    JAX_RNG_IMPL = None
    JAX_MASK_BITS = 32

    def call(self, inputs, training=False):
        if training and self.rate > 0 and self.noise_shape is None and self.JAX_RNG_IMPL \
                and keras.backend.backend() == "jax":
            return self._jax_dropout(inputs)
        if (not training or self.rate <= 0 or self.noise_shape is not None
                or keras.backend.backend() != "tensorflow" or not _in_xla_function()):
            return super().call(inputs, training=training)
        import tensorflow as tf

        seed = self.seed_generator.next()   # the state's next [2] seed, as Keras draws it
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, rng_alg=self.XLA_RNG_ALG)


    def _jax_dropout(self, inputs):
        """The mask from `JAX_MASK_BITS` random bits per element of a
        `JAX_RNG_IMPL` key made from the layer's seed, compared with the keep
        probability's threshold; kept elements are scaled by the inverse of
        the threshold's probability, so the expectation is the input."""
        import jax
        import jax.numpy as jnp

        seed = jnp.asarray(self.seed_generator.next(), jnp.uint32)          # [2]
        size = {"rbg": 4, "unsafe_rbg": 4}.get(self.JAX_RNG_IMPL, 2)
        key = jax.random.wrap_key_data(jnp.resize(seed, (size,)), impl=self.JAX_RNG_IMPL)
        bits = self.JAX_MASK_BITS
        threshold = min(round((1.0 - self.rate) * 2 ** bits), 2 ** bits - 1)
        dtype = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}[bits]
        keep = jax.random.bits(key, inputs.shape, dtype) < jnp.asarray(threshold, dtype)
        scale = jnp.asarray(2 ** bits / threshold, inputs.dtype)
        return jnp.where(keep, inputs * scale, jnp.zeros((), inputs.dtype))


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
