"""`RunLock`: one trainer at a time on a training directory.

An exclusive `fcntl.flock` on `output_dir/.lock` (`file_names.LOCK_FILE`),
held while the trainer runs. The operating system releases it when the
process ends, however it ends (SIGKILL, a crash, a reboot), so a killed run
never leaves the directory locked; the file itself stays, and says which
process held the lock last (its pid and host), so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
import socket

from t2t_revival.files.atomic_file import disk_failure, disk_failure_fix
from t2t_revival.errors import UserError
from t2t_revival.run_dir.file_names import LOCK_FILE


class RunLock:
    """The exclusive lock of a directory, for the process that holds it.

        lock = RunLock("t2t_train/tiny", "t2t-trainer")
        lock.acquire()     # a UserError naming the holder when another process has it
        ...
        lock.release()     # or let the process end

    Args:
        directory: the directory to lock (created when missing).
        holder: what holds it, for the message another process gets.
    """

    def __init__(self, directory: str, holder: str = "t2t-trainer"):
        self.directory = str(directory)
        self.holder = holder
        self.path = os.path.join(self.directory, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        """Take the lock now, or raise a UserError saying who holds it."""
        if self._fd is not None:
            return self
        os.makedirs(self.directory, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise UserError(
                f"{self.directory} is in use by another {self.holder} ({who}); two runs "
                f"writing one directory would overwrite each other's checkpoints. Wait for "
                f"it to end (or stop it: a stopped or killed run releases the lock), or use "
                f"another --output_dir. Received: output_dir={self.directory!r}") from None
        except BaseException:
            os.close(fd)
            raise
        holder = f"pid {os.getpid()} on {socket.gethostname()}\n".encode()
        try:
            os.pwrite(fd, holder, 0)   # over the last holder's line, then cut to length
            os.ftruncate(fd, len(holder))
        except OSError as e:
            os.close(fd)
            reason = disk_failure(e)
            if reason is None:
                raise
            # A disk full to the last byte still lets an empty file be made (the
            # writability check), but no run could save anything there.
            raise UserError(
                f"could not write {self.path} ({reason}), so nothing this "
                f"{self.holder} saves could be written in {self.directory} either; "
                f"{disk_failure_fix(reason)}, then rerun. "
                f"Received: output_dir={self.directory!r}") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
