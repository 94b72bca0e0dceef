"""TensorFlow's warnings about what `CheckpointFolder` already says in one line.

A restore that fails on a damaged checkpoint (skipped, or reported) leaves
values unread, and TensorFlow warns about them at garbage collection; an
unreadable `checkpoint` index gets a ParseError warning. The folder says each
of these in one line of its own, so the command-line tools hide TensorFlow's
(`hide_restore_warnings`, called once at start-up). No TensorFlow import here.
"""

from __future__ import annotations

import logging


class RestoreWarningsFilter(logging.Filter):
    """Drops TensorFlow's warnings of a failed restore and of an unreadable index."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (record.levelno == logging.WARNING and (
            "Value in checkpoint could not be found in the restored object" in message
            or "is being deleted with unrestored values" in message
            or (record.filename == "checkpoint_management.py"
                and (message.startswith("ParseError") or "Checkpoint ignored" in message))))


def hide_restore_warnings() -> None:
    """Install `RestoreWarningsFilter` on TensorFlow's logger (once)."""
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, RestoreWarningsFilter) for f in logger.filters):
        logger.addFilter(RestoreWarningsFilter())
