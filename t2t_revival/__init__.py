"""t2t-revival: tensor2tensor's Transformer workflow on Keras 3 and TensorFlow."""

__version__ = "0.1.0"
