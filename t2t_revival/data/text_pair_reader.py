"""`TextPairReader`: aligned source/target sentence files -> (source, target) pairs."""

from __future__ import annotations

import gzip
import re
import zlib
from typing import IO, Iterator

from absl import logging

from t2t_revival.data.data_error import DataError
from t2t_revival.files.text_lines import one_line

_SEG = re.compile(r"<seg[^>]*>(.*)</seg>")
_MAX_WARNINGS = 10


def _open(path: str) -> IO[bytes]:
    """`path` opened for reading bytes (.gz decompressed); a file that cannot
    be opened (missing, a directory, no permission) is a DataError naming it."""
    try:
        if str(path).endswith(".gz"):
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as e:
        why = ("does not exist" if isinstance(e, FileNotFoundError) else
               "is a directory, not a file" if isinstance(e, IsADirectoryError) else
               f"cannot be read ({e.strerror or e})")
        raise DataError(f"The corpus file {path} {why}; check --tmp_dir (or the "
                        f"problem's file names) and rerun t2t-datagen. "
                        f"Received: path={path!r}") from None


def _read_lines(f: IO[bytes], path: str) -> Iterator[bytes]:
    """The raw lines of `f`; a truncated or corrupt file is a DataError naming it."""
    try:
        yield from f
    except (EOFError, OSError, zlib.error) as e:  # gzip: EOFError, BadGzipFile (an OSError)
        raise DataError(
            f"The corpus file {path} is truncated or corrupt ({type(e).__name__}: {e}); "
            f"delete it and download it again, then rerun t2t-datagen. "
            f"Received: path={path!r}") from None


def _count_rest(f: IO[bytes], fmt: str, path: str) -> int:
    if fmt == "sgm":
        return sum(1 for raw in _read_lines(f, path) if raw.lstrip().startswith(b"<seg"))
    return sum(1 for _ in _read_lines(f, path))


class TextPairReader:
    """Reads two line-aligned files (plain text, `.gz`, or WMT `.sgm`) as pairs.

    Policy for bad input (counted in the attributes below):
    - A pair where either side is empty (after stripping whitespace) is dropped
      and counted in `empty_dropped`.
    - A line that is not valid UTF-8 is skipped together with its partner and
      counted in `undecodable_skipped`; a warning names the file and line
      number (the first 10 are logged one by one, then a summary). Web-crawled
      corpora (Common Crawl) hold a few such lines, so this is not fatal.
    - Files with different numbers of lines (or `<seg>` lines) are misaligned:
      a `DataError` names both files and both counts.
    - A carriage return inside a line becomes a space (`text_lines.one_line`):
      the dev and test text files datagen writes are read back as the
      sacrebleu command line reads them, where a bare CR ends a line too.
    - A file that cannot be opened (missing, a directory, unreadable) is a
      `DataError` naming it.
    - Files whose every pair has an empty side (all blank) are a `DataError`
      naming both files and `what`: they hold no text.

    In `.sgm` files only `<seg ...>text</seg>` lines count; the text between
    the tags is taken as is (like sacrebleu: no entity unescaping).

    Args:
        source_path, target_path: the aligned files.
        fmt: "text" (also `.gz`) or "sgm".
        what: where the files are named, for that error (e.g. corpora.json's
            `"train"`); "" for none.
        source_prefix: put before each source line (a multilingual corpus's
            target-language token and a space, `language_tokens`); "" for none.
    """

    def __init__(self, source_path: str, target_path: str, fmt: str = "text",
                 what: str = "", source_prefix: str = ""):
        if fmt not in ("text", "sgm"):
            raise ValueError(f"fmt must be 'text' or 'sgm', got {fmt!r}")
        self.source_path = str(source_path)
        self.target_path = str(target_path)
        self.fmt = fmt
        self.what = what
        self.source_prefix = source_prefix
        self.pairs = 0
        self.empty_dropped = 0
        self.undecodable_skipped = 0

    def _lines(self, f: IO[bytes], path: str) -> Iterator[tuple[int, bytes]]:
        for number, raw in enumerate(_read_lines(f, path), start=1):
            if self.fmt == "sgm":
                if not raw.lstrip().startswith(b"<seg"):
                    continue
            yield number, raw

    def _decode(self, raw: bytes, path: str, number: int) -> str | None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.undecodable_skipped += 1
            if self.undecodable_skipped <= _MAX_WARNINGS:
                logging.warning("%s:%d is not valid UTF-8 (%s); skipping this pair.",
                                path, number, e.reason)
            return None
        if self.fmt == "sgm":
            m = _SEG.search(text)
            text = m.group(1) if m else ""
        return one_line(text.strip())

    def __iter__(self) -> Iterator[tuple[str, str]]:
        with _open(self.source_path) as fs, _open(self.target_path) as ft:
            src_lines = self._lines(fs, self.source_path)
            tgt_lines = self._lines(ft, self.target_path)
            count = 0
            while True:
                s = next(src_lines, None)
                t = next(tgt_lines, None)
                if s is None or t is None:
                    if s is None and t is None:
                        break
                    n_src = count + (0 if s is None else
                                     1 + _count_rest(fs, self.fmt, self.source_path))
                    n_tgt = count + (0 if t is None else
                                     1 + _count_rest(ft, self.fmt, self.target_path))
                    unit = "<seg> lines" if self.fmt == "sgm" else "lines"
                    raise DataError(
                        f"Source and target files are misaligned: {self.source_path} "
                        f"has {n_src} {unit} and {self.target_path} has {n_tgt}; "
                        f"they must be line-aligned translations (replace the "
                        f"damaged file). Received: source_lines={n_src}, "
                        f"target_lines={n_tgt}")
                count += 1
                src = self._decode(s[1], self.source_path, s[0])
                tgt = self._decode(t[1], self.target_path, t[0])
                if src is None or tgt is None:
                    continue
                if not src or not tgt:
                    self.empty_dropped += 1
                    continue
                self.pairs += 1
                yield self.source_prefix + src, tgt
        if self.undecodable_skipped > _MAX_WARNINGS:
            logging.warning("%d pairs of %s / %s were not valid UTF-8 and were skipped.",
                            self.undecodable_skipped, self.source_path, self.target_path)
        if self.empty_dropped and not self.pairs:
            named = f" (named by {self.what})" if self.what else ""
            raise DataError(
                f"{self.source_path} / {self.target_path}{named} hold no text: all "
                f"{self.empty_dropped} pairs have an empty side (blank lines); put the "
                f"aligned translations in them, or name other files. "
                f"Received: pairs={self.empty_dropped}, non_empty=0")
        if self.empty_dropped:
            logging.info("Dropped %d pairs with an empty side from %s / %s.",
                         self.empty_dropped, self.source_path, self.target_path)
