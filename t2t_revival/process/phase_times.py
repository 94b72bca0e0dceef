"""`phase`: where a process's start-up goes, printed on request (issue 61).

With the environment variable `T2T_PHASE_TIMES=1`, each `phase(name)` the
CLIs pass prints one line to stderr,

    t2t-phase: restored 1795859406.096

(the phase that just ended and the Unix time it ended at), so that
`benchmarks/first_translation.py` splits a fresh process's wait into its
phases from the process itself rather than by guessing. Without the variable
it prints nothing and costs a dictionary look-up. The phases, in order:

- `checked`: the flags, names and run files checked (before TensorFlow);
- `imported`: TensorFlow, Keras and the model code imported;
- `built`: the model built from hparams.json;
- `restored`: its weights read from the checkpoint;
- `first_batch`: t2t-decoder's first batch of a file decoded (the
  compilation of its XLA program included).

Imports nothing heavy.
"""

from __future__ import annotations

import os
import sys
import time

ENV_VAR = "T2T_PHASE_TIMES"
PREFIX = "t2t-phase: "


def phase(name: str) -> None:
    """Print `t2t-phase: <name> <unix time>` to stderr when T2T_PHASE_TIMES is set."""
    if os.environ.get(ENV_VAR, "") not in ("", "0"):
        print(f"{PREFIX}{name} {time.time():.3f}", file=sys.stderr, flush=True)
