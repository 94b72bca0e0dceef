"""Protocol-buffer wire format, the pieces this project writes (and checks) by hand.

The datagen workers (`data/sharded_record_writer.py`) serialize
`tf.train.Example`s and the exporter (`export/warmup_requests.py`) TF
Serving's warm-up `PredictionLog`s without importing TensorFlow or its
protos; both tests parse the bytes with the real protos. The XLA compile
cache (`xla_compile_cache.py`) checks that an entry TensorFlow wrote is a
whole message (`top_level_fields`) before it shares it.
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


def top_level_fields(data: bytes) -> list[tuple[int, int]]:
    """(field number, wire type) of each top-level field of a serialized
    message; ValueError where `data` does not parse to its last byte (a
    truncated or garbled message)."""
    fields, i, n = [], 0, len(data)

    def read_varint() -> int:
        nonlocal i
        value = shift = 0
        while True:
            if i >= n or shift > 63:
                raise ValueError(f"a varint runs past byte {i}")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < n:
        key = read_varint()
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"field number 0 at byte {i}")
        if wire_type == 0:
            read_varint()
        elif wire_type in (1, 5):
            i += 8 if wire_type == 1 else 4
        elif wire_type == 2:
            length = read_varint()
            i += length
        else:
            raise ValueError(f"wire type {wire_type} at byte {i}")
        if i > n:
            raise ValueError(f"field {number} runs past the end ({n} bytes)")
        fields.append((number, wire_type))
    return fields
