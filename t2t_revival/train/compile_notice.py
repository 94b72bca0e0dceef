"""`compile_notice`: a sign of life while a first call compiles (issue 61).

The first update compiles the training step (a minute or two on a CPU with
XLA) and the first evaluation compiles the dev loss and the dev decoding's
search; without a line the trainer looks hung. As t2t-decoder says
`compiling the search for XLA: ...` before its wait, the trainer says what it
compiles before, and how long it took after:

    compiling the training step for XLA...
    compiled the training step in 41.2 s (its first update included)
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator


@contextlib.contextmanager
def compile_notice(log: Callable[[str], None], what: str, xla: bool,
                   included: str = "") -> Iterator[None]:
    """Log that `what` compiles (with XLA) or is traced (without) before the
    block, and the block's wall time after it.

    Args:
        log: a print-like callable.
        what: what the block's first call compiles ("the training step").
        xla: whether it compiles with XLA (else TensorFlow only traces it).
        included: what else the time holds ("its first update").
    """
    verb, done = ("compiling", "compiled") if xla else ("tracing", "traced")
    log(f"{verb} {what}{' for XLA' if xla else ''}...")
    start = time.perf_counter()
    yield
    extra = f" ({included} included)" if included else ""
    log(f"{done} {what} in {time.perf_counter() - start:.1f} s{extra}")
