"""User text files: one sentence a line, UTF-8, read plain or gzipped."""

from __future__ import annotations

import gzip
import io
import zlib
from typing import Callable, Sequence

from t2t_revival.files.atomic_file import write_atomically
from t2t_revival.errors import UserError

# What ends a line where these files are read (`read_text_lines`, as sacrebleu
# reads them: universal newlines), and what also ends a field of a
# tab-separated line (n-best lists, --score_file pairs).
LINE_BREAKS = "\r\n"
FIELD_BREAKS = LINE_BREAKS + "\t"
_AS_SPACES_IN_LINE = str.maketrans({c: " " for c in LINE_BREAKS})
_AS_SPACES_IN_FIELD = str.maketrans({c: " " for c in FIELD_BREAKS})


def one_line(text: str) -> str:
    """`text` with each line break (`LINE_BREAKS`) as a space: it stays one line
    of a line file, so the files of a corpus stay aligned line by line."""
    return text.translate(_AS_SPACES_IN_LINE)


def one_field(text: str) -> str:
    """`text` with each line break and tab (`FIELD_BREAKS`) as a space: one
    line, and one field of a tab-separated line (a translation: a model's
    byte pieces can spell any of them)."""
    return text.translate(_AS_SPACES_IN_FIELD)


def read_text_lines(path: str, what: str, error: type[UserError] = UserError) -> list[str]:
    """The lines of a UTF-8 text file (.gz too), newline \\n, \\r\\n or \\r as the
    sacrebleu command line reads them.

    Raises `error` (a UserError) for a missing or unreadable file, or bytes
    that are not UTF-8 (naming the line). `what` names the file in messages.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise error(f"the {what} file does not exist; pass the path of a text file, "
                    f"one sentence a line. Received: {what}={path!r}") from None
    except (OSError, EOFError, zlib.error) as e:
        # A damaged .gz: EOFError (cut short), BadGzipFile (an OSError) or
        # zlib.error (a damaged deflate stream, which is not an OSError).
        kind = "zlib.error" if isinstance(e, zlib.error) else type(e).__name__
        reason = getattr(e, "strerror", None) or f"{kind}: {e}"
        raise error(f"cannot read the {what} file ({reason}). "
                    f"Received: {what}={path!r}") from None
    return text_lines_of(data, f"the {what} file", f"{what}={path!r}", error)


def text_lines_of(data: bytes, what: str, received: str,
                  error: type[UserError] = UserError) -> list[str]:
    """The lines of UTF-8 `data` (newline \\n, \\r\\n or \\r), as `read_text_lines`
    reads a file's; bytes that are not UTF-8 raise `error` naming the line.
    `what` names the text in that message ("standard input") and `received`
    ends it (`Received: {received}`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{what} is not UTF-8 text: byte {data[e.start]:#04x} at line "
                    f"{line} cannot be decoded; convert it (e.g. iconv -t UTF-8). "
                    f"Received: {received}") from None
    return [line.rstrip("\n") for line in io.StringIO(text, newline=None)]


def read_record_text(path: str, corrupt: Callable[[str], Exception]) -> str:
    """The whole text of a UTF-8 record file (hparams.json, run.json, best.json).

    Bytes that are not UTF-8 raise `corrupt(why)`, the record's own one-line
    error; FileNotFoundError and other OS errors are the caller's.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise corrupt(str(e)) from None


def write_text_lines(path: str, lines: Sequence[str]) -> None:
    """Write lines, each ended by a newline, atomically (a temp name, then rename)."""
    write_atomically(path, "".join(line + "\n" for line in lines))


def read_text_pairs(path: str, what: str, error: type[UserError] = UserError
                    ) -> list[tuple[str, str]]:
    """(source, target) pairs of a file of `source<TAB>target` lines (.gz too).

    tensor2tensor's `--score_file` format. An empty line, a line without a tab
    or with more than one is `error` (naming the line), as are the faults of
    `read_text_lines`; an empty source or target (a line `source<TAB>`) is a pair.
    """
    pairs = []
    for number, line in enumerate(read_text_lines(path, what, error), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            problem = "is empty" if not line else (
                "has no tab" if len(fields) == 1 else f"has {len(fields) - 1} tabs")
            raise error(f"line {number} of the {what} file {problem}; each line must be "
                        f"source<TAB>target. Received: line {number}={line[:60]!r}")
        pairs.append((fields[0], fields[1]))
    return pairs
