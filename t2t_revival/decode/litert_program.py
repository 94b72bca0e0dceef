"""One LiteRT (.tflite) program of fixed shapes, called with numpy arrays by name.

    program = LiteRTProgram(flatbuffer_or_path, input_names, output_names, num_threads=2)
    outputs = program(ids=ids, index=np.int32(3), **cache)   # {name: array}

The interpreter is `ai_edge_litert`'s (the LiteRT runtime alone, without
TensorFlow: what a device ships, and what lets t2t-decoder's small jobs
skip TensorFlow's import). It runs float32 models through the XNNPACK
delegate by default.
"""

from __future__ import annotations

import numpy as np


class LiteRTProgram:
    """A LiteRT program whose inputs and outputs have names.

    Args:
        model: the .tflite flatbuffer (bytes) or its path.
        input_names: the program's input names, as converted (the
            placeholders' names: `litert_conversion`'s).
        output_names: a name for each output, in the program's output
            order (Identity, Identity_1, ...).
        num_threads: the interpreter's (XNNPACK's) threads.

    Calling it sets every input (numpy arrays of the converted shapes and
    dtypes), runs the program and returns {output name: array}, the arrays
    copied out of the interpreter.
    """

    def __init__(self, model: bytes | str, input_names: list[str], output_names: list[str],
                 num_threads: int = 1):
        from ai_edge_litert.interpreter import Interpreter

        if isinstance(model, bytes):
            self.interpreter = Interpreter(model_content=model, num_threads=num_threads)
        else:
            self.interpreter = Interpreter(model_path=model, num_threads=num_threads)
        self.interpreter.allocate_tensors()
        details = {d["name"]: d for d in self.interpreter.get_input_details()}
        missing = [name for name in input_names if name not in details]
        if missing or len(details) != len(input_names):
            raise ValueError(f"the LiteRT program's inputs are {sorted(details)}, "
                             f"not {sorted(input_names)}")
        self._inputs = [(name, details[name]["index"], details[name]["dtype"])
                        for name in input_names]
        outputs = sorted(self.interpreter.get_output_details(),
                         key=lambda d: output_number(d["name"]))
        if len(outputs) != len(output_names):
            raise ValueError(f"the LiteRT program has {len(outputs)} outputs, "
                             f"not {len(output_names)}")
        self._outputs = [(name, d["index"]) for name, d in zip(output_names, outputs)]
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def __call__(self, **inputs) -> dict[str, np.ndarray]:
        for name, index, dtype in self._inputs:
            self.interpreter.set_tensor(index, np.asarray(inputs[name], dtype=dtype))
        self.interpreter.invoke()
        return {name: self.interpreter.get_tensor(index) for name, index in self._outputs}


def output_number(name: str) -> int:
    """n of a converted output named Identity_n (Identity: 0), so that outputs
    sort in the function's order (11 after 2)."""
    base = name.split(":")[0]
    tail = base.rsplit("_", 1)
    number = tail[1] if len(tail) == 2 else ""
    # (str.isdigit takes "²", which int refuses)
    return int(number) if number.isascii() and number.isdecimal() else 0
