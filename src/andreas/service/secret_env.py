"""The service's secrets, read once and kept out of its process information.

Popping a variable from `os.environ` removes it from the C library's list, but the kernel
still shows the process's first environment in `/proc/<pid>/environ`. So the admin token is
read once, either from a file only its owner may read or from the environment, whose bytes
are then overwritten in place. (Jobs run as another OS account and cannot read that file of
the service's anyway: this is the second wall, not the first; see job_accounts.py.)
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import AndreasError


def take_from_environment(name: str) -> str | None:
    """The variable's value, removed from `os.environ` and its bytes in the process's first
    environment (what `/proc/self/environ` shows) overwritten with NULs."""
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        address = libc.getenv(name.encode())
        if address:  # NAME=value: the value starts at `address`; wipe both
            start = address - len(name.encode()) - 1
            ctypes.memset(start, 0, len(name.encode()) + 1 + len(ctypes.string_at(address)))
    except (OSError, AttributeError):  # no C library to reach (not Linux): popped only
        pass
    os.environ.pop(name, None)
    return value


def read_secret_file(path: Path) -> str:
    """A secret from a file that only its owner may read (mode 0600 or stricter), owned by
    this process's user; an AndreasError naming the file and the fix otherwise."""
    try:
        info = os.stat(path)
        text = path.read_text().strip()
    except OSError as exc:
        raise AndreasError(f"{path}: cannot read the token file: {exc.strerror}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AndreasError(f"{path}: the token file is open to other users (mode "
                           f"{stat.S_IMODE(info.st_mode):04o}); expected 0600: chmod 600 {path}")
    if info.st_uid != os.geteuid():
        raise AndreasError(f"{path}: the token file belongs to another user (uid "
                           f"{info.st_uid}); expected the service's own")
    if not text:
        raise AndreasError(f"{path}: the token file is empty; expected one token")
    return text


def check_config_secrets(config_path: Path, database_url: str, from_command_line: bool) -> None:
    """Refuse a database password that other users could read: on the command line (every
    user sees it in `ps`) or in a service.yaml that is not private to its owner."""
    if not urlsplit(database_url).password:
        return
    if from_command_line:
        raise AndreasError("--database-url: holds a password, which every user of this "
                           "machine sees in the process list; put it in service.yaml (mode "
                           "0600) or in ~/.pgpass instead")
    mode = stat.S_IMODE(os.stat(config_path).st_mode)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AndreasError(f"{config_path}: field 'database_url' holds a password and the "
                           f"file is open to other users (mode {mode:04o}); expected 0600: "
                           f"chmod 600 {config_path}")
