"""Errors a user can fix, as opposed to bugs.

Every CLI catches `UserError` and prints its message as one line on stderr with
a non-zero exit status, never a traceback. Messages follow the house style: say
what is wrong, how to fix it, and end with `Received: x=...`.
"""


class UserError(Exception):
    """A problem with the user's input (flags, hparams, files), not a bug."""
