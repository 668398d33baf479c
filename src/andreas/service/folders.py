"""The service's own folders (its data folder, SQLite's): checked once at startup, so that a
folder the service cannot write to stops it with a sentence, not a job failing later; and a
folder that stops taking writes while the service runs told apart from a job's own error."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

from ..errors import AndreasError


def _probe(folder: Path) -> None:
    """Create and remove a file in `folder`: the OSError if the folder refuses it."""
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".andreas-probe-"):
        pass


def ensure_writable(folder: Path, what: str, fix: str) -> None:
    """Create `folder` if missing and write a file in it; an AndreasError naming the folder,
    what the service keeps there (`what`), the system's reason (read-only file system, no
    space, permission) and what to do (`fix`) if it cannot."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _probe(folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise AndreasError(f"cannot write to {folder} ({what}): {reason}; {fix}") from None


def sqlite_folder(url: str) -> Path | None:
    """The folder of a SQLite database URL (`sqlite:///path/andreas.db`); None for another
    engine or an in-memory database."""
    if not url.startswith("sqlite") or ":///" not in url:  # sqlite:// is in memory too
        return None
    path = url.split(":///", 1)[1]
    return Path(path).parent if path and path != ":memory:" else None


def read_only(folder: Path) -> bool:
    """Whether `folder` refuses to create a file because its file system is read-only. A
    kernel remounts a file system so after a disk error, under the files the service and its
    jobs hold open (SQLite then says only "disk I/O error"); ext4 does it without changing
    the mount's own flag, so a probe file tells, not statvfs."""
    try:
        _probe(folder)
    except OSError as exc:
        return exc.errno == errno.EROFS
    return False


REFUSED_WRITES = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM}


class FolderRefused(AndreasError):
    """The service's own folder refused a write (read-only, full, no permission): nothing a
    job did, so the job waits and the service says why until the folder takes writes."""


def refused_write(exc: OSError, folder: Path) -> FolderRefused | None:
    """A FolderRefused naming the path and the system's reason when `exc` is a refused write
    inside `folder`; None for any other error (a job's missing working folder, say)."""
    if exc.errno not in REFUSED_WRITES or exc.filename is None:
        return None
    path = Path(exc.filename)
    if not path.is_relative_to(folder):
        return None
    # the reason first: a failed tick's description keeps 200 characters, and two long
    # paths before it once cut "Read-only" to "Read-onl"
    return FolderRefused(f"the data folder refuses writes ({exc.strerror}): jobs wait until "
                         f"it takes them again; cannot write to {path} in {folder}")
