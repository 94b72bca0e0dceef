"""`usable_cores()`: the cores this process may run on.

The one owner of that count, for datagen's workers and the CTranslate2
translator's threads. Imports nothing heavy (no TensorFlow).
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
