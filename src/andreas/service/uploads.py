"""Working folders sent with a job (`andreas submit --working-dir DIR`, as `ray job submit
--working-dir` does): a gzipped tar uploaded to POST /uploads, checked, unpacked once into the
upload's own folder (`tree/`), where every job that names it runs, as Ray shares a working_dir.

An archive is refused unless every member is a plain file or folder with a relative path that
stays inside (no absolute path, no `..`, no link, no device, no file with members below it),
it has at most MAX_MEMBERS of them, and unpacked it stays under `max_upload_bytes` x 10 (no
zip bomb). A user's uploads together hold at most `max_upload_bytes_per_user` unpacked. An
upload belongs to the user who sent it: another user's id is not found. It is deleted
`upload_ttl_s` after it was sent (service.yaml, 7 days by default) once no waiting or running
job uses it: each new upload sweeps the expired ones. One copy per upload, not one per job: a
1 MB upload and a few hundred jobs once filled a 300 MB data folder with copies left behind.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import tarfile
import time
from collections.abc import Set as AbstractSet
from pathlib import Path, PurePosixPath

from .refused import Refused

UNPACKED_FACTOR = 10  # unpacked size allowed, as a multiple of the upload limit


def uploads_dir(data_dir: Path) -> Path:
    return data_dir / "uploads"


MAX_MEMBERS = 100_000  # files and folders in one working folder


def check_archive(path: Path, max_unpacked: int, max_members: int = MAX_MEMBERS
                  ) -> tuple[list[str], int]:
    """The member names of a safe archive and its size unpacked; Refused(422) naming the
    first unsafe member. The members are read one at a time and counted, so an archive of
    two million empty files (12 MB, which once held the API for 97 s and took a gigabyte)
    stops at the limit."""
    names: list[str] = []
    total = 0
    files: set[str] = set()  # a path that is a file cannot hold another member
    kinds: dict[str, bool] = {}  # path -> is a folder
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for m in tar:
                name = PurePosixPath(m.name)
                if len(names) >= max_members:
                    raise Refused(422, f"upload: more than {max_members} files and folders; "
                                       "send fewer (an archive of the folder's archives, say)")
                if name.is_absolute() or ".." in name.parts:
                    raise Refused(422, f"upload: member {m.name!r} would land outside the "
                                       "working folder")
                if not (m.isfile() or m.isdir()):
                    raise Refused(422, f"upload: member {m.name!r} is not a plain file or "
                                       "folder (links and devices are refused)")
                above = next((str(a) for a in name.parents if str(a) in files), None)
                if above is not None or kinds.get(str(name), m.isdir()) != m.isdir():
                    raise Refused(422, f"upload: member {m.name!r} is both a file and a "
                                       f"folder in this archive (at {above or m.name!r})")
                kinds[str(name)] = m.isdir()
                if m.isfile():
                    files.add(str(name))
                total += m.size
                if total > max_unpacked:
                    raise Refused(422, f"upload: unpacked it would exceed {max_unpacked} bytes")
                names.append(str(name))
                tar.members = []  # type: ignore[attr-defined]  # keep no header: names only
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise Refused(422, f"upload: expected a gzipped tar archive ({exc})") from None
    return names, total


def sweep(data_dir: Path, ttl_s: float, now: float, in_use: AbstractSet[str] = frozenset()
          ) -> list[str]:
    """Delete the uploads sent more than `ttl_s` before `now` (by their meta.json's time, or
    the folder's for one that never got to write it), except those `in_use` by a waiting or
    running job; the ids deleted."""
    gone = []
    folders = uploads_dir(data_dir)
    for folder in sorted(folders.iterdir()) if folders.is_dir() else ():
        if folder.name in in_use:
            continue
        try:
            sent = json.loads((folder / "meta.json").read_text()).get("sent_at")
        except (OSError, ValueError):
            sent = None
        try:
            sent = float(sent) if sent is not None else folder.stat().st_mtime
        except (OSError, TypeError, ValueError):
            continue
        if now - sent > ttl_s:
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder.name)
    return gone


def save(data_dir: Path, owner_id: int, chunks: list[bytes], max_bytes: int,
         ttl_s: float | None = None, per_user_bytes: int | None = None,
         in_use: AbstractSet[str] = frozenset()) -> dict:
    """Check an uploaded archive for `owner_id` and unpack it once into its folder's `tree/`,
    having deleted the uploads older than `ttl_s` (None: none) that no job uses (`in_use`);
    its id, size and when it expires. Refused (413) past `per_user_bytes` unpacked for this
    user's uploads together; 507 on a full disk; nothing half-written is kept."""
    now = time.time()
    if ttl_s is not None:
        sweep(data_dir, ttl_s, now, in_use)
    upload_id = "upl-" + secrets.token_hex(8)
    folder = uploads_dir(data_dir) / upload_id
    archive = folder / "archive.tar.gz"
    try:
        folder.mkdir(parents=True)
        os.chmod(uploads_dir(data_dir), 0o711)  # jobs pass through to their tree, list none
        with archive.open("wb") as f:
            for chunk in chunks:
                f.write(chunk)
        names, unpacked = check_archive(archive, max_bytes * UNPACKED_FACTOR)
        used = held_by(data_dir, owner_id)
        if per_user_bytes is not None and used + unpacked > per_user_bytes:
            raise Refused(413, f"upload: your uploads would hold {used + unpacked} bytes "
                               f"unpacked; the limit is {per_user_bytes} per user "
                               f"(max_upload_bytes_per_user); they are deleted upload_ttl_s "
                               f"after they are sent, once no job uses them")
        unpack(archive, folder / "tree")
        size = archive.stat().st_size
        archive.unlink()  # the tree is what jobs use
        os.chmod(folder, 0o711)
        (folder / "names.json").write_text(json.dumps(names))
        (folder / "meta.json").write_text(json.dumps({
            "owner": owner_id, "bytes": size, "unpacked_bytes": unpacked,
            "files": len(names), "sent_at": now}))
    except OSError as exc:  # nothing half-written is kept
        shutil.rmtree(folder, ignore_errors=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise Refused(507, "upload: the service's disk is full; nothing was stored; send "
                               "it again later", retry_after=60) from None
        raise
    except Refused:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return {"id": upload_id, "bytes": size, "files": len(names),
            "expires_at": None if ttl_s is None else now + ttl_s}


def held_by(data_dir: Path, owner_id: int) -> int:
    """Unpacked bytes of `owner_id`'s uploads (by their meta.json)."""
    total = 0
    folders = uploads_dir(data_dir)
    for folder in folders.iterdir() if folders.is_dir() else ():
        try:
            meta = json.loads((folder / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if meta.get("owner") == owner_id:
            total += int(meta.get("unpacked_bytes") or 0)
    return total


def find(data_dir: Path, upload_id: str, owner_id: int) -> tuple[Path, list[str]]:
    """An upload of `owner_id`'s: its unpacked folder, where its jobs run, and the names in
    it; Refused(404) otherwise."""
    folder = uploads_dir(data_dir) / upload_id
    try:
        meta = json.loads((folder / "meta.json").read_text())
        names = json.loads((folder / "names.json").read_text())
    except (OSError, ValueError):
        meta = None
    if meta is None or meta.get("owner") != owner_id or "/" in upload_id:
        raise Refused(404, f"working_dir: no upload {upload_id!r} of yours (an upload is kept "
                           f"for upload_ttl_s after it is sent; send the folder again)")
    return folder / "tree", names


def upload_of(workdir: str | None, data_dir: Path) -> str | None:
    """The upload id whose tree `workdir` is, or None."""
    if not workdir:
        return None
    path = Path(workdir)
    if path.name == "tree" and path.parent.parent == uploads_dir(data_dir):
        return path.parent.name
    return None


def unpack(archive: Path, into: Path) -> None:
    """Unpack a checked archive into a job's working folder (tarfile's 'data' filter: the
    same refusals, once more, as the files are written)."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, mode="r:gz") as tar:
        tar.extractall(into, filter="data")
