"""A job that tries to reach what only the service may: its process environment (the admin
token), its files, its run records, and the service itself. It prints one line,
``RESULT {...}``, saying of each attempt what it got (``read:...``) or why it was refused.

    hostile_job.py SERVICE_PID WRITE_TARGET [READ_TARGET ...]

In the targets, {checkpoint} and {run} stand for the job's checkpoint folder and run id.
"""

import json
import os
import sys


def attempt(out: dict, name: str, action) -> None:
    try:
        out[name] = "read:" + repr(action())[:4000]
    except OSError as exc:
        out[name] = f"refused:{type(exc).__name__}"


def main() -> None:
    where = {"checkpoint": os.environ.get("ANDREAS_CHECKPOINT_DIR", ""),
             "run": os.environ.get("ANDREAS_RUN_ID", "")}
    pid, write_target, *read_targets = (a.format(**where) for a in sys.argv[1:])
    out: dict = {"uid": os.getuid(), "home": os.environ.get("HOME"),
                 "env": sorted(k for k in os.environ if "TOKEN" in k or "PASS" in k)}
    attempt(out, "environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
    attempt(out, "signal", lambda: os.kill(int(pid), 0))
    attempt(out, "write", lambda: open(write_target, "ab").write(b"forged"))
    for target in read_targets:
        attempt(out, target, lambda t=target: open(t, "rb").read())
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
