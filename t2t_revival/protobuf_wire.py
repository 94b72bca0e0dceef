"""Protocol-buffer wire format, the two pieces this project writes by hand.

The datagen workers (`data/sharded_record_writer.py`) serialize
`tf.train.Example`s and the exporter (`export/warmup_requests.py`) TF
Serving's warm-up `PredictionLog`s without importing TensorFlow or its
protos; both tests parse the bytes with the real protos.
"""

from __future__ import annotations


def varint(value: int) -> bytes:
    """Base-128 varint; a negative int64 as its ten-byte two's complement."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """A wire-type-2 field (string, bytes, message or packed list): key, length, payload."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload
