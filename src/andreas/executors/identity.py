"""Who a job runs as: an unprivileged OS account, never the service's own.

A job is somebody else's code. Run as the service's user it could read the service's
process information (`/proc/<pid>/environ` keeps the admin token even after Python pops it),
its database file and its configuration. So the launch wrapper, which runs with the
executor's privileges (root), starts the job's command as the account the service names
(``--user``), the way slurmd runs a batch script as its submitter.

This module only reads the account database (`pwd`, `grp`): the wrapper imports it on every
job start, on whichever node the job runs, and resolves the name there.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path


class IdentityError(Exception):
    """The account a job must run as cannot be used: unknown, root, or not reachable from
    this process's privileges. The message says which and why."""


@dataclass(frozen=True)
class JobIdentity:
    """An OS account jobs run as: its name, ids, supplementary groups and home."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    @classmethod
    def lookup(cls, name: str) -> "JobIdentity":
        """The account `name` from this machine's account database; an IdentityError if it
        does not exist or is root (uid 0), which would give a job every privilege."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise IdentityError(f"no OS user {name!r} on this machine; create it "
                                f"(useradd --system --no-create-home {name}) or name another"
                                ) from None
        if entry.pw_uid == 0:
            raise IdentityError(f"OS user {name!r} is root (uid 0); jobs must run as an "
                                "unprivileged user")
        try:
            groups = tuple(g for g in os.getgrouplist(name, entry.pw_gid) if g != 0)
        except OSError:
            groups = (entry.pw_gid,)
        return cls(name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)

    def can_switch(self) -> bool:
        """Whether this process may start a process as this account: it is root, or it is
        this account already."""
        return os.geteuid() in (0, self.uid)

    def check_switchable(self) -> None:
        if not self.can_switch():
            me = pwd.getpwuid(os.geteuid()).pw_name
            raise IdentityError(f"cannot start jobs as OS user {self.name!r}: this process runs "
                                f"as {me!r}, not root; run the service (and Ray's or Slurm's "
                                "workers) as root, which only starts jobs, never runs them")

    def popen_kwargs(self) -> dict:
        """The `subprocess.Popen` arguments that start a command as this account; empty when
        this process is that account already."""
        if os.geteuid() == self.uid:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def environment(self) -> dict[str, str]:
        """The variables that name the account (HOME, USER, LOGNAME): the service's own
        would point the job at the service's home."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}


def give_tree(path: Path, identity: JobIdentity) -> None:
    """Make the folder tree at `path` the job's own (an unpacked upload, a checkpoint folder):
    every entry owned by the job's account, never following a link, so a link inside cannot
    hand the job a file of somebody else's."""
    if os.geteuid() != 0:
        return  # only root gives files away; a same-user job owns them already
    top = os.lstat(path)
    if top.st_uid == identity.uid and stat.S_ISDIR(top.st_mode):
        os.chmod(path, 0o700)  # given already (a later run): the job owns what is inside
        return
    os.lchown(path, identity.uid, identity.gid)
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), identity.uid, identity.gid)
    os.chmod(path, 0o700)
