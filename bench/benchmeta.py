"""What every benchmark table says about itself: when, on what, at which commit, how to re-run."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The short hash of the checkout's HEAD ('unknown' outside git)."""
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=ROOT)
    return run.stdout.strip() or "unknown"


def measured_line(verb: str = "Measured") -> str:
    """'Measured <UTC time> on <machine> (<n> CPUs), Python <v>, commit <c>: `python <argv>`.'"""
    return (f"{verb} {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
            f"({os.cpu_count()} CPUs), Python {platform.python_version()}, commit {commit()}: "
            f"`python {' '.join(sys.argv)}`.")


def append_row(path: Path, header: str, row: str) -> None:
    """Add a table row to a Markdown file of dated runs, writing the header first if the file
    is new: campaigns accumulate, each run a line."""
    text = path.read_text() if path.exists() else header
    path.write_text(text + row + "\n")
