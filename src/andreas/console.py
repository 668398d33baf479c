"""What every command of the `andreas` command line shares: where it prints, and how a user
error becomes one line on stderr and exit code 2 instead of a traceback."""

from __future__ import annotations

import re
import sys
from functools import wraps
from typing import Callable

import typer
from rich.console import Console
from rich.markup import escape

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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(value: object) -> str:
    """A value someone else wrote (a job's name, message or reason, a user name) as text to
    show: control characters removed (an escape sequence could retitle, recolour or rewrite
    an admin's terminal) and rich's markup escaped (`[link=...]` would become a link)."""
    return escape(_CONTROL.sub("", "" if value is None else str(value)))
