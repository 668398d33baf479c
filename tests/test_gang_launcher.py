"""The rank launcher (`andreas.executors.gang`) and how a gang's end is read (`ray.gang_end`):
every rank gets its rendezvous variables; one rank's failure ends the others and the gang ends
as that rank did, so the service restarts a killed gang and fails a broken one."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from andreas.executors.base import RunStatus
from andreas.executors.ray import gang_end

GANG = [sys.executable, "-m", "andreas.executors.gang"]


def run_gang(*places: str, code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    argv = [*GANG, *(f"--place={p}" for p in places), "--", sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_every_rank_gets_its_rank_and_node_and_the_same_rendezvous():
    done = run_gang("n1=0,1", "n2=2,3", "n3=5", code=(
        "import json, os; print(json.dumps({k: os.environ[k] for k in ('RANK', 'WORLD_SIZE', "
        "'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'CUDA_VISIBLE_DEVICES', 'ANDREAS_NODE')}))"))
    assert done.returncode == 0, done.stderr
    seen = sorted((json.loads(line) for line in done.stdout.splitlines()),
                  key=lambda e: int(e["RANK"]))
    assert [(e["RANK"], e["ANDREAS_NODE"], e["CUDA_VISIBLE_DEVICES"]) for e in seen] == [
        ("0", "n1", "0,1"), ("1", "n2", "2,3"), ("2", "n3", "5")]
    assert {(e["WORLD_SIZE"], e["LOCAL_RANK"], e["MASTER_ADDR"], e["MASTER_PORT"])
            for e in seen} == {("3", "0", "127.0.0.1", seen[0]["MASTER_PORT"])}


def test_a_failing_rank_stops_its_partner_and_the_gang_exits_with_its_status():
    tic = time.monotonic()
    done = run_gang("a=0", "b=1", code=(
        "import os, time\nif os.environ['RANK'] == '1': raise SystemExit(3)\ntime.sleep(120)"))
    assert done.returncode == 3
    assert "rank 1 exited with status 3; stopping the gang's other ranks" in done.stderr
    assert time.monotonic() - tic < 60  # the sleeping rank 0 was stopped, not waited for


def test_a_rank_killed_by_a_signal_kills_the_gang_with_that_signal():
    done = run_gang("a=0", "b=1", code=(
        "import os, signal, time\nif os.environ['RANK'] == '0': os.kill(os.getpid(), "
        "signal.SIGKILL)\ntime.sleep(120)"))
    assert done.returncode == -9  # as the wrapper sees it: a crash, restarted from a checkpoint
    assert "rank 0 was killed by signal 9" in done.stderr


def test_ranks_lines_never_run_into_each_other():
    done = run_gang("a=0", "b=1", code=(
        "import os, sys\nfor i in range(300):\n    sys.stdout.write(f\"rank {os.environ['RANK']}"
        " line {i}\")\n    sys.stdout.flush()\n    sys.stdout.write('\\n')\n    "
        "sys.stdout.flush()"))
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert len(lines) == 600 and all(line.startswith("rank ") and line.count("rank") == 1
                                     for line in lines)


rank_end = st.tuples(st.just(False), st.one_of(st.none(), st.integers(-15, 3)), st.booleans())


@given(st.lists(rank_end, min_size=1, max_size=4))
def test_a_gang_ends_as_its_first_failed_rank_or_as_rank_0(ranks):
    end = gang_end(ranks)
    failed = [code for _, code, stop in ranks if not stop and code != 0]
    assert not end.alive
    if failed:  # a crash or a failure, never a pause: the service counts it
        assert not end.stop_requested and end.returncode in failed
        if any(c is None or c < 0 for c in failed):  # killed beats errored
            assert end.returncode is None or end.returncode < 0
    else:
        assert end.returncode == ranks[0][1]
        assert end.stop_requested == all(stop for _, _, stop in ranks)


def test_one_rank_ends_as_a_one_node_run_always_did():
    for code in (None, -9, 0, 1):
        for stop in (False, True):
            assert gang_end([(False, code, stop)]) == RunStatus(False, code, stop)
