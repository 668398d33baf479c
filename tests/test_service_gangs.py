"""Gangs run for real (docs/gangs.md): a job of a 2-node profile trains with
``torch.distributed`` (examples/train_ddp.py, DistributedDataParallel over gloo) as two ranks
on the two planned nodes, on the local executor, on a real local Slurm (two slurmd on this
machine) and on a real local Ray cluster (two raylets on this machine). A pause (the service
stopping its jobs as it shuts down) reaches both ranks, which stop at the same step; the next
service resumes both from rank 0's checkpoint; a killed rank brings the whole gang back from
its checkpoint; every epoch trains exactly once."""

from __future__ import annotations

import os
import signal

import psutil
import pytest
from conftest import (
    ENGINES,
    EXAMPLES,
    assert_each_epoch_once,
    epoch_lines,
    wait_for,
    write_service_files,
)
from fastapi.testclient import TestClient
from test_service_ray import _own_ray_cluster, _stop_ray_cluster

from andreas.executors.slurm_sandbox import LocalSlurm
from andreas.service.api import create_app
from andreas.service.config import read_service_config

pytestmark = pytest.mark.service
torch = pytest.importorskip("torch", reason="the gang example trains with torch.distributed")

ADMIN = {"Authorization": "Bearer admin-secret"}
TWO_NODES = ("nodes:\n  - {name: n1, gpu_type: fast, gpus: 1}\n"
             "  - {name: n2, gpu_type: fast, gpus: 1}\n")
# a gang profile alone: the job can only run on both nodes at once
GANG_PROFILE = "profile,gpu_type,gpus,seconds_per_epoch,nodes\nddp,fast,1,1.0,2\n"
# long enough that the job is still training when the service, shutting down, stops it:
# 22 epochs left after the 2 the tests wait for (about 10 s on an idle 2-core machine)
EPOCHS = 24


@pytest.fixture(scope="module")
def slurm_two(tmp_path_factory):
    """A real Slurm with two one-GPU nodes of one type."""
    with LocalSlurm(tmp_path_factory.mktemp("slurm-gangs"),
                    [("g1", "fast", 1), ("g2", "fast", 1)]) as cluster, \
            pytest.MonkeyPatch.context() as mp:
        for key, value in cluster.env.items():
            mp.setenv(key, value)
        yield cluster


@pytest.fixture(scope="module")
def ray_two():
    """A real Ray cluster of its own: a head without GPUs and two nodes of one `fast` GPU."""
    address, session = _own_ray_cluster(workers=2)
    try:
        yield address
    finally:
        _stop_ray_cluster(session)


# on the local executor a gang needs no engine: those run beside the engines' group
@pytest.fixture(params=["local", pytest.param("slurm", marks=ENGINES),
                        pytest.param("ray", marks=ENGINES)])
def gang_service(request, tmp_path):
    """The config of a service whose only profile is a 2-node gang, and its two nodes."""
    if request.param == "slurm":
        request.getfixturevalue("slurm_two")
        path = write_service_files(tmp_path, nodes="", executor="slurm")
        nodes = {"g1", "g2"}
    elif request.param == "ray":
        address = request.getfixturevalue("ray_two")
        path = write_service_files(tmp_path, nodes="", executor="ray",
                                   extra=f"ray_address: '{address}'\n")
        nodes = None  # Ray names them: the two with GPUs
    else:
        path = write_service_files(tmp_path, nodes=TWO_NODES)
        nodes = {"n1", "n2"}
    (path.parent / "profiles.csv").write_text(GANG_PROFILE)
    return read_service_config(path), nodes


def node_names(client, expected: set[str] | None) -> set[str]:
    """The two nodes the gang must run on: `expected`, or those the service reports (Ray
    names its nodes itself)."""
    found = {n["name"] for n in client.get("/nodes", headers=ADMIN).json()}
    assert len(found) == 2 and (expected is None or found == expected), found
    return found


def submit(client) -> str:
    return client.post("/jobs", headers=ADMIN, json={
        "script": str(EXAMPLES / "train_ddp.py"), "args": ["--samples", "20000"],
        "epochs": EPOCHS, "deadline_s": 3600, "profile": "ddp"}).json()["id"]


def job_of(client, job_id):
    return client.get(f"/jobs/{job_id}", headers=ADMIN).json()


def ranks(job_id) -> dict[int, psutil.Process]:
    """The live training processes of a job, by their RANK (the wrapper and the rank
    launcher, whose command lines name the script too, have none)."""
    out = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            env = proc.environ()
            if "train_ddp.py" in " ".join(proc.info["cmdline"] or []) and \
                    env.get("ANDREAS_JOB_ID") == job_id and "RANK" in env and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                out[int(env["RANK"])] = proc
        except psutil.Error:
            continue
    return out


def wait_running(client, job_id, epochs: int) -> None:
    wait_for(lambda: job_of(client, job_id)["epochs_done"] >= epochs
             and len(ranks(job_id)) == 2, timeout=180,
             what=lambda: f"{epochs} epochs and two live ranks: {job_of(client, job_id)}")


def wait_ended(client, job_id) -> dict:
    return wait_for(lambda: (lambda j: j if j["state"] in ("completed", "failed") else None)(
        job_of(client, job_id)), timeout=240, what="the gang to end")


def check_every_run_is_a_gang(client, job_id, nodes: set[str]) -> list[dict]:
    """Each run held both nodes, and each rank said so in the log, starting where the run
    started; every epoch trained once."""
    runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
    log = client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text
    for run in runs:
        assert {run["node"], *(p["node"] for p in run["more_nodes"])} == nodes, run
    for rank in (0, 1):
        starts = [line for line in log.splitlines() if line.startswith(f"rank {rank}/2 on ")]
        assert [int(line.split()[-1]) for line in starts] == \
            [int(r["epochs_at_start"]) for r in runs], log
    assert_each_epoch_once(log, EPOCHS)
    return runs


def start_gang(client, expected: set[str] | None) -> tuple[set[str], str]:
    """The gang's two nodes and its job, once it has trained 2 epochs with a rank on each."""
    nodes = node_names(client, expected)
    job_id = submit(client)
    wait_running(client, job_id, 2)
    assert {r.environ()["ANDREAS_NODE"] for r in ranks(job_id).values()} == nodes
    planned = client.get("/plan", headers=ADMIN).json()["assignments"][job_id]
    assert {planned["node"], *planned["more_nodes"]} == nodes  # what `andreas plan` lists
    return nodes, job_id


def test_a_gang_is_paused_and_resumed_from_its_checkpoint_on_both_nodes(gang_service):
    config, expected = gang_service
    with TestClient(create_app(config, admin_token="admin-secret",
                               stop_jobs_on_exit=True)) as client:
        nodes, job_id = start_gang(client, expected)
    # the service stopped its jobs as it shut down: both ranks got SIGTERM and agreed to stop
    wait_for(lambda: not ranks(job_id), timeout=60, what="both ranks to stop")
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job = wait_ended(client, job_id)
        assert job["state"] == "completed", job
        runs = check_every_run_is_a_gang(client, job_id, nodes)
        assert runs[0]["stop_reason"] == "shutdown" and runs[1]["epochs_at_start"] >= 2
        assert f"resumed from checkpoint at epoch {int(runs[1]['epochs_at_start'])}" in \
            client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text


def test_a_killed_rank_brings_the_gang_back_from_its_checkpoint(gang_service):
    config, expected = gang_service
    with TestClient(create_app(config, admin_token="admin-secret",
                               stop_jobs_on_exit=True)) as client:
        nodes, job_id = start_gang(client, expected)
        partner = ranks(job_id)[0]
        os.kill(ranks(job_id)[1].pid, signal.SIGKILL)
        wait_for(lambda: not partner.is_running() or partner.status() == psutil.STATUS_ZOMBIE,
                 timeout=60, what="rank 0 to stop with its partner")
        job = wait_ended(client, job_id)
        assert job["state"] == "completed", job
        runs = check_every_run_is_a_gang(client, job_id, nodes)
        assert runs[0]["stop_reason"] == "crashed" and len(runs) >= 2


def test_an_inline_gang_runs_and_one_no_nodes_can_hold_is_refused(tmp_path):
    """`andreas submit --gpu-type fast --gpus 1 --nodes 2` sends this inline row."""
    config = read_service_config(write_service_files(tmp_path, nodes=TWO_NODES))
    body = {"script": str(EXAMPLES / "train_ddp.py"), "args": ["--samples", "4000"],
            "epochs": 3, "deadline_s": 3600}
    row = {"gpu_type": "fast", "gpus": 1, "seconds_per_epoch": 1.0}
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        refused = client.post("/jobs", headers=ADMIN, json={
            **body, "inline_profile": [{**row, "nodes": 3}]})
        assert refused.status_code == 400
        assert "inline_profile[0].nodes: no 3 nodes of fast" in refused.json()["detail"]
        job_id = client.post("/jobs", headers=ADMIN, json={
            **body, "inline_profile": [{**row, "nodes": 2}]}).json()["id"]
        job = wait_ended(client, job_id)
        assert job["state"] == "completed", job
        run = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()[0]
        assert {run["node"], *(p["node"] for p in run["more_nodes"])} == {"n1", "n2"}
        log = client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text
        assert "rank 1/2 on " in log and sorted(epoch_lines(log)) == [1, 2, 3], log
        # the dashboard: the run on both nodes, and a bar on each node's lane of the Gantt
        client.cookies.set("andreas_session", "admin-secret")
        page = client.get(f"/ui/jobs/{job_id}").text
        assert f"{run['node']}, {run['more_nodes'][0]['node']}" in page and "per node" in page
        plan = client.get("/ui/plan").text
        assert plan.count(f'data-run="{run["id"]}"') == 2, plan
