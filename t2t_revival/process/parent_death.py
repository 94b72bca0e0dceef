"""`die_with_parent`: a child process that ends when its parent does.

A child doing long work for its parent alone (the LiteRT conversion of
`litert_conversion_worker`, which `LiteRTProgramCache.convert` waits for)
should not outlive a parent killed with `kill -9`, which runs no clean-up:
it would go on using the cores and write into a folder no one reads. On
Linux the kernel sends the child a signal when its parent dies
(`prctl(PR_SET_PDEATHSIG)`), set here at the child's start; a parent that
died before that is seen by the parent pid having changed. Elsewhere
nothing is done.

    die_with_parent(request["parent_pid"])   # first thing in the child
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> bool:
    """Have the kernel send this process `signum` when its parent dies; exit
    now when the parent `parent_pid` is already gone. Returns whether the
    signal is set (False off Linux, or without prctl)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        done = libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        done = False
    if os.getppid() != parent_pid:   # the parent died before the signal was set
        os._exit(1)
    return done
