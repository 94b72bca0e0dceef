"""`ConversionFailed`: a LiteRT conversion for t2t-decoder that did not finish."""

from __future__ import annotations


class ConversionFailed(Exception):
    """The child conversion (`litert_conversion_worker`) failed, the disk had
    too little room, or its programs could not be kept: one line saying which
    (the decoder says it, then decodes with TensorFlow)."""
