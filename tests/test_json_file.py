"""`files.json_file.read_json`: each way a JSON file cannot be read is one
UserError of the caller's words (or class), never a traceback."""

import pytest

from t2t_revival.data.data_error import DataError
from t2t_revival.errors import UserError
from t2t_revival.files.json_file import read_json


def test_every_unreadable_json_file_is_one_message(tmp_path):
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, "ü"]}', encoding="utf-8")
    words = dict(missing="MISSING", corrupt="CORRUPT ({why})")
    assert read_json(str(good), **words) == {"a": [1, "ü"]}
    with pytest.raises(UserError, match="^MISSING$"):
        read_json(str(tmp_path / "none.json"), **words)
    with pytest.raises(UserError, match="is a folder, not a file"):
        read_json(str(tmp_path), **words)
    with pytest.raises(UserError, match="^HERE$"):
        read_json(str(tmp_path), directory="HERE", **words)
    for name, data in (("cut.json", b'{"a": '), ("latin1.json", b'{"a": "\xfc"}')):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError, match=r"^CORRUPT \(.+\)$"):
            read_json(str(tmp_path / name), error=DataError, **words)
