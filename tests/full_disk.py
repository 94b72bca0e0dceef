"""A disk that fills up, for the tests of writes the disk refuses
(test_disk_failures, test_parallel_datagen, test_full_disk, test_decode_journal)."""

import errno
import os

NO_SPACE = os.strerror(errno.ENOSPC)


class FullDiskFile:
    """A file that takes `room` bytes, then fails as a full disk does."""

    def __init__(self, f, room):
        self.f, self.room = f, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, NO_SPACE)
        self.room -= len(data)
        return self.f.write(data)

    def flush(self):
        self.f.flush()

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def disk_full_after(monkeypatch, module, room, suffix=""):
    """`open` in `module` gives, for writes to paths ending in `suffix` (one,
    or a tuple of them), a file that fails once `room` bytes are written."""
    real_open = open

    def fake_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        if ("w" in mode or "a" in mode) and str(path).endswith(suffix):
            return FullDiskFile(f, room)
        return f

    monkeypatch.setattr(module, "open", fake_open, raising=False)


def write_decode_sources(path, total, period):
    """`total` short source lines of the tiny run's words, of varied lengths
    (1-3 words, then 0 to period-1 times "rot"), written to `path` (a
    pathlib.Path) for a decode that the disk stops part-way; returns `path`."""
    path.write_text("".join(f"{' '.join(['ein', 'mann', 'hund'][:1 + i % 3])} "
                            f"{'rot ' * (i % period)}\n" for i in range(total)))
    return path
