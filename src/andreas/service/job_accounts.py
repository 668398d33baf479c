"""The OS accounts jobs run as, and the folders that keep them apart from the service.

The service (as root) starts every job as an unprivileged account (`service.yaml`'s
`job_user`, or `job_users` per submitting user) through the launch wrapper. What a job can
reach is then what its account can reach, so the data folder is laid out for it:

    data_dir/                 0711 service   (others pass through, cannot list)
      andreas.db              0600 service   (SQLite; its -wal and -shm files copy the mode)
      jobs/                   0711 service
        <job>/                0711 service
          checkpoint/         0700 the job's account   (ANDREAS_CHECKPOINT_DIR)
          workdir/            0700 the job's account   (an upload unpacked by an older version)
          logs/               0700 service   (the job writes its log through an inherited fd)
          runs/<n>/           0700 service   (pid.json, exit.json: the job cannot forge them)
          lock                0600 service
      uploads/                0711 service
        <upload>/             0711 service   (names.json, meta.json: 0600)
          tree/               0700 the owner's job account   (the jobs' working folder)

`andreas serve` also sets its umask to 077, so any other file it writes is its own alone.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from ..errors import AndreasError
from ..executors.identity import IdentityError, JobIdentity, give_tree
from .config import ServiceConfig

PASS_THROUGH = 0o711  # others may pass through to a path they know, never list
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

#: Run as a job's account at start-up: the interpreter jobs start with, the job helper, and
#: the way to the jobs' folders must all be open to it
_REACH_CHECK = ("import os, sys\n"
                "import andreas.job\n"
                "sys.exit(0 if os.access(sys.argv[1], os.X_OK) else 3)\n")


class JobAccounts:
    """Which account each job runs as, and the folders that account may reach."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self._identities: dict[str, JobIdentity] = {}

    def name_for(self, owner: str) -> str | None:
        """The OS account a job of service user `owner` runs as; None: the service's own
        (jobs_as_service_user)."""
        return None if self.config.jobs_as_service_user else self.config.job_account(owner)

    def identity(self, name: str) -> JobIdentity:
        if name not in self._identities:
            self._identities[name] = JobIdentity.lookup(name)
        return self._identities[name]

    def names(self) -> set[str]:
        if self.config.jobs_as_service_user:
            return set()
        return {n for n in (self.config.job_user, *self.config.job_users.values()) if n}

    # ------------------------------------------------------------------ start-up
    def secure_data_folder(self, database_file: Path | None) -> None:
        """Close the data folder to jobs: pass-through only, the database file private."""
        jobs = self.config.data_dir / "jobs"
        jobs.mkdir(parents=True, exist_ok=True)
        for folder in (self.config.data_dir, jobs):
            os.chmod(folder, PASS_THROUGH)
        if database_file is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                path = database_file.with_name(database_file.name + suffix)
                if path.exists():
                    os.chmod(path, PRIVATE_FILE)

    def check_reach(self) -> None:
        """Each account can run the job interpreter (with the job helper) and reach the jobs'
        folders; else an AndreasError that says which and what to do, before any job fails."""
        jobs = self.config.data_dir / "jobs"
        for name in sorted(self.names()):
            try:
                identity = self.identity(name)
                identity.check_switchable()
            except IdentityError as exc:
                raise AndreasError(f"{self.config.path}: {exc}") from None
            try:
                result = subprocess.run([sys.executable, "-c", _REACH_CHECK, str(jobs)],
                                        capture_output=True, text=True, timeout=120,
                                        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                        cwd="/", **identity.popen_kwargs())
            except OSError as exc:  # the interpreter itself is out of its reach
                raise AndreasError(
                    f"{self.config.path}: the job user {name!r} cannot run {sys.executable} "
                    f"({exc.strerror}): jobs start with it; install the service where every "
                    "user may read it (not under /root)") from None
            if result.returncode == 3:
                raise AndreasError(
                    f"{self.config.path}: the job user {name!r} cannot reach {jobs}: a folder "
                    "above it is closed to other users; put data_dir where every user may pass "
                    "(e.g. /var/lib/andreas) or open the folders above it (chmod o+x)")
            if result.returncode != 0:
                why = (result.stderr.strip().splitlines() or ["no output"])[-1]
                raise AndreasError(
                    f"{self.config.path}: the job user {name!r} cannot run {sys.executable} "
                    f"with the andreas package ({why}); install the service where every user "
                    "may read it (not under /root)")

    # ------------------------------------------------------------------ per job
    def prepare(self, job_dir: Path, owner: str, workdir: str | None = None) -> str | None:
        """Create `job_dir`'s folders with their owners and modes (see the module's
        docstring) for a job of `owner`, and give it `workdir` when that is an upload's
        unpacked folder (data_dir/uploads/<id>/tree, shared by the upload's jobs, all of one
        owner); return the account it runs as (None: the service's own). An OSError if the
        data folder refuses the writes."""
        for folder, mode in ((job_dir, PASS_THROUGH), (job_dir / "logs", PRIVATE_DIR),
                             (job_dir / "runs", PRIVATE_DIR)):
            folder.mkdir(mode=mode, parents=True, exist_ok=True)
        checkpoint = job_dir / "checkpoint"
        checkpoint.mkdir(mode=PRIVATE_DIR, exist_ok=True)
        name = self.name_for(owner)
        if name is None:
            return None
        os.chmod(job_dir, PASS_THROUGH)
        identity = self.identity(name)
        give_tree(checkpoint, identity)
        uploads = self.config.data_dir / "uploads"
        for tree in (job_dir / "workdir", Path(workdir) if workdir else None):
            if tree is not None and tree.is_dir() and not tree.is_symlink() and (
                    tree.parent.parent == uploads or tree.parent == job_dir):
                give_tree(tree, identity)
        return name


def read_job_file(path: Path, limit: int = 64 * 1024) -> tuple[bytes, float] | None:
    """At most `limit` bytes of a regular file a job wrote, and its modification time; None
    if it is missing or anything else (a link, a FIFO that would block the service, a device
    that never ends). The job's account owns the folder, so nothing in it is trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return os.read(fd, limit), info.st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)
