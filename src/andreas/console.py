"""What every command of the `andreas` command line shares: where it prints, and how a user
error becomes one line on stderr and exit code 2 instead of a traceback."""

from __future__ import annotations

import sys
from functools import wraps
from typing import Callable

import typer
from rich.console import Console

from .errors import AndreasError

console = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True)


def user_errors(fn: Callable) -> Callable:
    """Turn an AndreasError into one line on stderr and exit code 2: no traceback."""
    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AndreasError as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
    return wrapper
