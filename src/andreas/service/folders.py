"""The service's own folders (its data folder, SQLite's): checked once at startup, so that a
folder the service cannot write to stops it with a sentence, not a job failing later."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import AndreasError


def ensure_writable(folder: Path, what: str, fix: str) -> None:
    """Create `folder` if missing and write a file in it; an AndreasError naming the folder,
    what the service keeps there (`what`), the system's reason (read-only file system, no
    space, permission) and what to do (`fix`) if it cannot."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".andreas-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise AndreasError(f"cannot write to {folder} ({what}): {reason}; {fix}") from None
