"""`DataError`: a missing, corrupt or misaligned data file the user can fix."""

from t2t_revival.errors import UserError


class DataError(UserError):
    """A data file is missing, corrupt or misaligned (one clear message, no traceback).

    Raised for: missing corpora (the message lists every missing file with its
    URL and the path to put it at), source/target files whose line counts
    differ (both files and both counts), a data_dir without generated data.
    """
