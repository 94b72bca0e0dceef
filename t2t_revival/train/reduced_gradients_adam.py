"""Adam for gradients the trainer has already all-reduced."""

import keras


@keras.saving.register_keras_serializable(package="t2t_revival")
class ReducedGradientsAdam(keras.optimizers.Adam):
    """keras.optimizers.Adam that does not all-reduce gradients again.

    Under tf.distribute, Keras's TF optimizer sums gradients across replicas
    inside `apply`. Our trainer reduces them itself first (to normalize by the
    global token count and to clip by, and report, the global gradient norm),
    so a second sum would multiply them by the number of replicas. Each
    replica then updates its own copy of the variables with identical values.
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Overrides keras/src/backend/tensorflow/optimizer.py (Keras 3.15).
        return list(grads_and_vars)
