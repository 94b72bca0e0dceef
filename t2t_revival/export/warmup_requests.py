"""TF Serving warm-up records (`assets.extra/tf_serving_warmup_requests`).

TF Serving runs the requests of this TFRecord file once when it loads a model
version, so the first user request does not pay for graph set-up. Each record
is a serialized `tensorflow.serving.PredictionLog`. We write those few bytes
by hand rather than depend on the `tensorflow-serving-api` package for one
message: the wire format is stable, and the field numbers below are those of
tensorflow_serving/apis/{prediction_log,predict,model}.proto:

    PredictionLog  { PredictLog predict_log = 6; }
    PredictLog     { PredictRequest request = 1; }
    PredictRequest { ModelSpec model_spec = 1; map<string, TensorProto> inputs = 2; }
    ModelSpec      { string name = 1; string signature_name = 3; }
    map entry      { string key = 1; TensorProto value = 2; }

The TensorProto itself comes from `tf.make_tensor_proto`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import tensorflow as tf

from t2t_revival.files.protobuf_wire import length_delimited as field

WARMUP_FILE = "tf_serving_warmup_requests"
# Sentences of a few lengths, so warm-up traces the usual shapes.
DEFAULT_WARMUP_SENTENCES = (
    "A man is riding a bicycle.",
    "Two young children are playing with a ball on the grass in a park near a lake.",
    "",
)


def predict_log_bytes(model_name: str, signature_name: str,
                      inputs: Mapping[str, "tf.Tensor | object"]) -> bytes:
    """A serialized PredictionLog holding one PredictRequest.

    Args:
        model_name: ModelSpec.name (TF Serving's --model_name).
        signature_name: the signature the request calls.
        inputs: {input name: value}, each turned into a TensorProto.
    """
    spec = field(1, model_name.encode()) + field(3, signature_name.encode())
    request = field(1, spec)
    for key, value in inputs.items():
        proto = tf.make_tensor_proto(value).SerializeToString()
        request += field(2, field(1, key.encode()) + field(2, proto))
    return field(6, field(1, request))


def write_warmup_requests(path: str, sentences: Sequence[str] = DEFAULT_WARMUP_SENTENCES,
                          model_name: str = "t2t") -> None:
    """Write one serving_default request per sentence and one with them all."""
    batches = [[s] for s in sentences] + [list(sentences)]
    with tf.io.TFRecordWriter(path) as writer:
        for batch in batches:
            tensor = tf.constant(batch, tf.string)
            writer.write(predict_log_bytes(model_name, "serving_default",
                                           {"sentences": tensor}))
