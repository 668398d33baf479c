"""Errors a user can act on: each says which file, line and field is wrong and what was expected.

The CLI prints `str(error)` on one line and exits with code 2; no traceback.
"""

from __future__ import annotations

from pathlib import Path


class AndreasError(Exception):
    """Base for every error caused by user input rather than by a bug."""


class ScenarioError(AndreasError):
    def __init__(self, file: str | Path, message: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f" field '{self.field}':" if self.field else ""
        return f"{where}:{what} {self.message}"


class PlanError(AndreasError):
    """A policy returned a plan the cluster cannot carry out (a bug in that policy)."""
