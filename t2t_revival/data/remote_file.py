"""`RemoteFile`: a corpus file (usually an archive) with its public URL."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import os
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from typing import IO, Sequence

from absl import logging

from t2t_revival.files.atomic_file import atomic_output
from t2t_revival.data.data_error import DataError

DOWNLOAD_TIMEOUT_S = 20


class _CutShort(Exception):
    """A download that ended before the length its server announced."""


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """A file a problem reads from `tmp_dir`, and where to download it.

    Attributes:
        url: its public address.
        filename: its name inside tmp_dir (the URL's basename by default).
    """

    url: str
    filename: str = ""

    @property
    def name(self) -> str:
        return self.filename or self.url.rstrip("/").rsplit("/", 1)[-1]

    def path(self, tmp_dir: str) -> str:
        return os.path.join(tmp_dir, self.name)

    def download(self, tmp_dir: str) -> bool:
        """Download to `tmp_dir` (temp name, then rename); False when it fails.

        A connection that ends before the Content-Length its server announced
        fails too (Python's HTTP reader ends such a body quietly), so a cut
        download is never kept under the file's name, where a rerun would
        take it as complete.
        """
        return self._download(tmp_dir) is None

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).netloc

    def _download(self, tmp_dir: str) -> Exception | None:
        """`download`: None, or why it failed."""
        target = self.path(tmp_dir)
        logging.info("Downloading %s to %s", self.url, target)
        try:
            with atomic_output(target) as tmp, \
                    urllib.request.urlopen(self.url, timeout=DOWNLOAD_TIMEOUT_S) as r, \
                    open(tmp, "wb") as f:
                shutil.copyfileobj(r, f, length=1 << 20)
                announced = (r.headers.get("Content-Length") or "").strip()
                if announced.isascii() and announced.isdecimal() and f.tell() != int(announced):
                    raise _CutShort(f"the connection ended after {f.tell()} of "
                                    f"{announced} bytes")
            return None
        except (urllib.error.URLError, http.client.HTTPException, _CutShort, OSError,
                ValueError) as e:
            logging.warning("Could not download %s: %s", self.url, e)
            return e


def _unreachable(error: Exception | None) -> bool:
    """Whether a download failed before any server answered (no network, a
    name that does not resolve, a connection refused or timed out), as
    opposed to an answer about this one file (404, a cut body)."""
    return isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError)) \
        and not isinstance(error, urllib.error.HTTPError)


def fetch_all(files: Sequence[RemoteFile], tmp_dir: str, download: bool = True) -> None:
    """Make sure every file is in `tmp_dir`, downloading the missing ones.
    After a host fails to answer once, its other files are not tried (each
    would wait out its own timeout: no network is one wait, not six).

    Raises:
        DataError: listing every file still missing, with its URL and the
            path to put it at (when offline or `download` is False).
    """
    missing = [f for f in files if not os.path.isfile(f.path(tmp_dir))]
    if download:
        unreachable: set[str] = set()
        still = []
        for f in missing:
            if f.host in unreachable:
                still.append(f)
                continue
            error = f._download(tmp_dir)
            if error is not None:
                still.append(f)
                if _unreachable(error):
                    unreachable.add(f.host)
                    logging.warning("%s did not answer; not trying its other files", f.host)
        missing = still
    if missing:
        listing = "; ".join(f"{f.url} -> {f.path(tmp_dir)}" for f in missing)
        raise DataError(
            f"{len(missing)} corpus file(s) missing and not downloadable here; "
            f"download each from its URL and put it at the path shown (or give --tmp_dir "
            f"a folder that holds them), then rerun: {listing}. Received: tmp_dir={tmp_dir!r}")


def _open_member(archive: str, member: str, stack: contextlib.ExitStack) -> IO[bytes]:
    """`member` of a tar/tgz or zip archive, opened for reading (KeyError if absent)."""
    if zipfile.is_zipfile(archive):
        return stack.enter_context(stack.enter_context(zipfile.ZipFile(archive)).open(member))
    tar = stack.enter_context(tarfile.open(archive, "r:*"))
    return stack.enter_context(tar.extractfile(tar.getmember(member)))


def extract_member(archive: str, member: str, out_dir: str) -> str:
    """Extract one member of a tar/tgz or zip archive to `out_dir` (once; temp then rename).

    Returns the extracted file's path. A member missing from the archive is a
    DataError naming both.
    """
    target = os.path.join(out_dir, os.path.basename(archive) + ".d", member)
    if os.path.isfile(target):
        return target
    try:
        with atomic_output(target) as tmp, contextlib.ExitStack() as stack:
            try:
                src = _open_member(archive, member, stack)
            except KeyError:
                raise DataError(
                    f"The archive {archive} has no member {member}; it is damaged or "
                    f"not the expected release, download it again. Received: "
                    f"member={member!r}") from None
            with open(tmp, "wb") as f:
                shutil.copyfileobj(src, f, length=1 << 20)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, zlib.error) as e:
        # (zlib.error: a damaged deflate stream in a .tgz, not an OSError)
        raise DataError(
            f"Cannot read the archive {archive} ({e}); it is damaged or incomplete, "
            f"download it again. Received: archive={archive!r}") from None
    return target
