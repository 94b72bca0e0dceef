"""`read_json`: a JSON file's value, or one line saying why it cannot be read.

    values = read_json(path, missing=f"{path} is missing; write it",
                       corrupt=f"{path} is not valid JSON ({{why}}); fix it")

The one reader of the project's hand-written and tool-written JSON files
(corpora.json, an export's settings, T2T Insights' configuration): a missing
file, a folder in its place, an unreadable one, bytes that are not UTF-8 and
text that is not JSON each become `error(message)`, never a traceback.
"""

from __future__ import annotations

import json
from typing import Any

from t2t_revival.errors import UserError


def read_json(path: str, missing: str, corrupt: str, directory: str | None = None,
              error: type[UserError] = UserError) -> Any:
    """The JSON value in the UTF-8 file `path`.

    Args:
        missing: the message when there is no such file.
        corrupt: the message when it is not UTF-8 JSON; `{why}` in it is
            replaced by the decoder's reason.
        directory: the message when `path` is a folder (default: says so).
        error: the exception class raised (a UserError).
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise error(missing) from None
    except IsADirectoryError:
        raise error(directory or f"{path} is a folder, not a file; name the JSON file") \
            from None
    except PermissionError as e:
        raise error(f"{path} cannot be read ({e.strerror}); fix its permissions") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(corrupt.replace("{why}", str(e))) from None
