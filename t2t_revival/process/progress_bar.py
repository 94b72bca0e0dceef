"""`ProgressBar`: t2t-decoder's one-line progress display (no TensorFlow here:
the decoder's LiteRT path shows it too)."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A one-line progress display on stderr: `decoded 320/1000 (12.1 sentences/s)`.

    Its `compiling` method is `Decoder.translate`'s `compiling` callback: a
    line before the bar, so that the compilations' wait (about 8 s a program
    on 2 cores, before the first batch is done) says what it is.
    """

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.start = time.time()

    def compiling(self, programs: int) -> None:
        self.stream.write(f"compiling the search for XLA: {programs} program"
                          f"{'s' if programs > 1 else ''} (one per batch size and "
                          "padded input length; seconds each, once)\n")
        self.stream.flush()

    def __call__(self, done: int, total: int) -> None:
        rate = done / max(time.time() - self.start, 1e-9)
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\rdecoding [{'#' * filled}{'.' * (width - filled)}] "
                          f"{done}/{total} ({rate:.1f} sentences/s)")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
