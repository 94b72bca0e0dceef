"""`CorruptCheckpointError`: a checkpoint whose files cannot be read back."""

from __future__ import annotations

from t2t_revival.errors import UserError


class CorruptCheckpointError(UserError):
    """A checkpoint that is truncated, damaged or missing files.

    A UserError (one line, exit 2) when the checkpoint was named; when it was
    not, `TrainingDirectory` catches it and falls back to the next older
    intact checkpoint, saying which one it skipped and why.

    Attributes:
        reason: what is wrong, for that line ("its .data file is truncated ...").
    """

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message

    @classmethod
    def on_restore(cls, path: str, error: BaseException) -> "CorruptCheckpointError":
        """The error for `error`, raised by TensorFlow while restoring `path`."""
        text = (getattr(error, "message", None) or str(error)).strip().split("\n", 1)[0]
        text = text.split("}} ", 1)[-1][:200]
        reason = f"its files are damaged ({type(error).__name__}: {text})"
        return cls(f"the checkpoint {path} cannot be restored: {reason}; name another "
                   f"--checkpoint_path, or leave it out to use the newest intact "
                   f"checkpoint. Received: checkpoint_path={path!r}", reason=reason)
