"""`build_model`: a registered model for resolved hparams, its weights created."""

from __future__ import annotations

from t2t_revival import registry
from t2t_revival.settings.hparams import HParams


def build_model(hparams: HParams, model_name: str = "transformer"):
    """The registered model `model_name` for `hparams`, built (its weights
    created, so a checkpoint can be restored into it). Keras only: the JAX
    benchmark of the training step (`benchmarks.train_step --backend jax`)
    builds the model through it too."""
    return built(registry.models.get(model_name)(hparams))


def built(model):
    """`model` with its weights created (called once on a dummy batch),
    on the device scope of the caller (`device_pool.copy_to_device`)."""
    import keras

    dummy = keras.ops.zeros((1, 8), "int32")
    model({"inputs": dummy, "targets": dummy}, training=False)
    return model
