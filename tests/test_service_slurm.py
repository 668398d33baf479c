"""The slurm executor on a real Slurm (slurmctld and two slurmd on this machine), real jobs.

Not skipped when Slurm is missing: `make test` installs it (scripts/install-slurm.sh)."""

import subprocess
import sys

import pytest
from conftest import ENGINES, epoch_lines, train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.executors.slurm import SlurmExecutor, expand_nodes, parse_gres, parse_node_line
from andreas.executors.slurm_sandbox import LocalSlurm
from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.sandbox import LocalService

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = [pytest.mark.service, ENGINES]

ADMIN = {"Authorization": "Bearer admin-secret"}
NODES = [("n1", "fast", 2), ("n2", "slow", 1)]  # the types of conftest's cluster.yaml


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with LocalSlurm(tmp_path_factory.mktemp("slurm"), NODES) as cluster, \
            pytest.MonkeyPatch.context() as mp:
        for key, value in cluster.env.items():
            mp.setenv(key, value)
        yield cluster


def squeue(*args):
    return subprocess.run(["squeue", "--noheader", *args], capture_output=True, text=True,
                          timeout=30).stdout


def foreign_job(node, gres):
    """A job someone else submitted to Slurm, holding GPUs."""
    out = subprocess.run(["sbatch", "--parsable", f"--nodelist={node}", f"--gres={gres}",
                          "--job-name=someone-else", "--output=/dev/null",
                          "--wrap", "sleep 600"],
                         capture_output=True, text=True, timeout=30, check=True)
    job_id = out.stdout.strip()
    wait_for(lambda: squeue("-j", job_id, "--format=%T").strip() == "RUNNING", timeout=60,
             what="the foreign job to run")
    return job_id


def service(tmp_path, extra=""):
    path = write_service_files(tmp_path, nodes="", executor="slurm", extra=extra)
    return create_app(read_service_config(path), admin_token="admin-secret")


def test_gres_and_node_lines_parse():
    assert parse_gres("gpu:v100:4,gpu:t4:2(S:0-1)") == [("v100", 4), ("t4", 2)]
    assert parse_gres("gres:gpu:fast:1") == [("fast", 1)]
    assert parse_gres("gpu:2") == [(None, 2)] and parse_gres("(null)") == []
    fields = parse_node_line("NodeName=n1 Arch=x86_64 Gres=gpu:fast:2 State=IDLE "
                             "Reason=maintenance by ops [root@2026-12-01]")
    assert fields["Gres"] == "gpu:fast:2" and fields["Reason"].startswith("maintenance by")
    assert expand_nodes("n1,n2") == ["n1", "n2"] and expand_nodes("(null)") == []


def test_the_local_slurms_daemons_get_distinct_ports(tmp_path):
    """The controller and every slurmd on a port of its own (one port shared: neither
    starts). Asked one at a time, the kernel may hand back a port it just gave out."""
    sandbox = LocalSlurm(tmp_path, [(f"n{i}", "V100", 1) for i in range(100)])
    for _ in range(10):  # one port asked at a time repeated one in about three writes here
        sandbox.write()
        ports = [int(word.split("=")[1]) for word in sandbox.conf.read_text().split()
                 if word.startswith(("SlurmctldPort=", "Port="))]
        assert len(ports) == 101 and len(set(ports)) == 101


def test_jobs_run_where_the_plan_says_and_cancel_reaches_slurm(tmp_path, slurm):
    executor = SlurmExecutor()
    assert [(n.name, n.gpu_type, n.gpus) for n in executor.nodes()] == NODES
    with TestClient(service(tmp_path)) as client:
        show_env = client.post("/jobs", headers=ADMIN, json={
            "command": [sys.executable, "-c", "import os; print('GPUS=' + "
                        "os.environ['CUDA_VISIBLE_DEVICES'], 'NODE=' + "
                        "os.environ['SLURMD_NODENAME'], 'SLURM=' + os.environ['SLURM_JOB_ID'],"
                        " 'ADMIN=' + str('ANDREAS_ADMIN_TOKEN' in os.environ))"],
            "epochs": 1, "deadline_s": 600, "profile": "one"}).json()["id"]
        train = client.post("/jobs", headers=ADMIN, json=train_job(3, profile="one")).json()["id"]
        wait_for(lambda: all(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"] ==
                             "completed" for j in (show_env, train)), timeout=120,
                 what="both Slurm jobs to complete")
        log = client.get(f"/jobs/{show_env}/logs", headers=ADMIN).text
        # the run that ran it (a replan may have moved it before Slurm started the first)
        run = client.get(f"/jobs/{show_env}/runs", headers=ADMIN).json()[-1]
        assert f"NODE={run['node']}" in log.split("--- run ")[-1]  # where the plan said
        assert log.split("GPUS=")[1].split()[0] in ("0", "1") and "ADMIN=False" in log
        assert run["exit_code"] == 0
        assert epoch_lines(client.get(f"/jobs/{train}/logs", headers=ADMIN).text) == [1, 2, 3]

        long = client.post("/jobs", headers=ADMIN, json=train_job(500, profile="one")).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{long}", headers=ADMIN).json()["epochs_done"] >= 1,
                 timeout=60, what="the long job to make progress")
        slurm_id = client.get(f"/jobs/{long}/runs", headers=ADMIN).json()[-1]
        assert squeue("--name=andreas-run-" + str(slurm_id["id"]), "--format=%T").strip() \
            == "RUNNING"
        client.post(f"/jobs/{long}/cancel", headers=ADMIN)
        wait_for(lambda: client.get(f"/jobs/{long}", headers=ADMIN).json()["state"] ==
                 "cancelled", timeout=60, what="cancellation")
        run = client.get(f"/jobs/{long}/runs", headers=ADMIN).json()[-1]
        assert run["stop_reason"] == "cancel" and run["state"] == "ended"
        assert squeue("--name=andreas-run-" + str(run["id"]), "--states=RUNNING") == ""


def test_stopping_a_run_slurm_has_not_started_yet_cancels_it(tmp_path, slurm):
    # a pause or move can reach a run that Slurm still holds PENDING: `scancel --signal`
    # fails on it (exit 229 with no message, or no answer in 30 s), and that failed the
    # scheduler's whole tick in CI
    from andreas.executors import LaunchRequest

    other = foreign_job("n2", "gpu:slow:1")  # n2's only GPU: our run must wait for it
    try:
        executor = SlurmExecutor()
        request = LaunchRequest(
            run_id=1, job_id="j", node="n2", gpu_indices=(0,),
            command=(sys.executable, "-c", "pass"), workdir=None, env={},
            run_dir=tmp_path / "run", log_path=tmp_path / "run.log", lock_path=tmp_path / "lock")
        handle = executor.start(request)
        job_id = handle["slurm_job_id"]
        wait_for(lambda: squeue("-j", job_id, "--format=%T").strip() == "PENDING",
                 timeout=60, what="our run to wait for the GPU")
        executor.stop([(handle, request.run_dir)], grace_s=5)
        assert squeue("-j", job_id, "--states=PENDING,RUNNING", "--format=%T").strip() == ""
        assert not executor.status(handle, request.run_dir).alive
        executor.stop([(handle, request.run_dir)], grace_s=5)  # ended already: no error
    finally:
        subprocess.run(["scancel", other], timeout=30)


def test_a_foreign_slurm_job_keeps_its_gpus_and_is_never_touched(tmp_path, slurm):
    # someone else holds the slow node's GPU, where the planner would put the job (less energy)
    other = foreign_job("n2", "gpu:slow:1")
    try:
        with TestClient(service(tmp_path)) as client:
            nodes = {n["name"]: n for n in client.get("/nodes", headers=ADMIN).json()}
            assert set(nodes) == {"n1", "n2"}
            job = client.post("/jobs", headers=ADMIN, json=train_job(3)).json()["id"]
            wait_for(lambda: client.get(f"/jobs/{job}", headers=ADMIN).json()["state"] ==
                     "completed", timeout=120, what="the job to complete on the free node")
            runs = client.get(f"/jobs/{job}/runs", headers=ADMIN).json()
            assert [r["node"] for r in runs] == ["n1"]  # n2's GPU is taken
        assert squeue("-j", other, "--format=%T").strip() == "RUNNING"  # left alone
    finally:
        subprocess.run(["scancel", other], timeout=30)


def test_an_urgent_job_pauses_one_through_slurm_and_it_resumes_from_its_checkpoint(
        tmp_path, slurm):
    with TestClient(service(tmp_path, extra="decision_budget_ms: 0\n")) as client:
        relaxed = [client.post("/jobs", headers=ADMIN, json=train_job(
            40, deadline_s=3600, profile="one", priority=1)).json()["id"] for _ in range(3)]
        wait_for(lambda: all(client.get(f"/jobs/{j}", headers=ADMIN).json()["epochs_done"] >= 2
                             for j in relaxed), timeout=120,
                 what="the three relaxed jobs to make progress on the three GPUs")
        urgent = client.post("/jobs", headers=ADMIN, json=train_job(
            3, deadline_s=4, profile="one", weight=10.0)).json()["id"]
        wait_for(lambda: all(j["state"] == "completed"
                             for j in client.get("/jobs", headers=ADMIN).json()),
                 timeout=240, what="all jobs to complete")
        jobs = {j["id"]: j for j in client.get("/jobs", headers=ADMIN).json()}
        assert any(jobs[j]["restarts"] >= 1 for j in relaxed), "no job was paused"
        for job_id in relaxed + [urgent]:
            runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
            log = client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text
            assert sorted(epoch_lines(log)) == list(range(1, int(jobs[job_id]["epochs"]) + 1))
            for before, after in zip(runs, runs[1:]):
                assert before["stop_reason"] in ("pause", "move")  # SIGTERM reached it
                assert after["epochs_at_start"] == before["epochs_at_end"]
                assert after["started_at"] >= before["ended_at"]


def test_after_kill_9_the_service_re_adopts_its_slurm_jobs(tmp_path, slurm):
    from conftest import TRAIN

    profiles = "profile,gpu_type,gpus,seconds_per_epoch\none,fast,1,0.3\none,slow,1,0.5\n"
    cluster = ("energy_price: 0.2\npue: 1.0\nrestart_overhead_s: 1\ngpu_types:\n"
               "  fast: {node_power_w: [400, 700]}\n  slow: {node_power_w: [200, 380]}\n")
    live = LocalService(tmp_path / "svc", cluster, profiles,
                        options="executor: slurm\npolicy_options: {seed: 1, "
                                "consolidate.share: null, wait.share: null, "
                                "company.share: null}\nperiod_s: null\npoll_s: 0.1\n")
    with live:
        job = live.post("/jobs", json={"script": str(TRAIN), "args": ["--samples", "60000"],
                                       "epochs": 12, "deadline_s": 3600,
                                       "profile": "one"}).json()["id"]
        wait_for(lambda: live.get(f"/jobs/{job}").json()["epochs_done"] >= 2, timeout=120,
                 what="the job to make progress")
        run_id = live.get(f"/jobs/{job}/runs").json()[0]["id"]
        live.kill9()
        running = squeue(f"--name=andreas-run-{run_id}", "--format=%T").strip()
        assert running == "RUNNING"  # Slurm runs it on without the service
        live.start()
        wait_for(lambda: live.get(f"/jobs/{job}").json()["state"] == "completed", timeout=180,
                 what="the re-adopted job to complete")
        runs = live.get(f"/jobs/{job}/runs").json()
        assert len(runs) == 1 and runs[0]["exit_code"] == 0  # adopted, not started again
        log = live.get(f"/jobs/{job}/logs").text
        assert epoch_lines(log) == list(range(1, 13))  # every epoch once


def test_a_gpu_type_slurm_names_and_the_cluster_file_lacks_is_an_error_at_start(tmp_path, slurm):
    from andreas.errors import AndreasError

    path = write_service_files(tmp_path, nodes="", executor="slurm")
    cluster = tmp_path / "cluster.yaml"  # describe only the fast type
    cluster.write_text(cluster.read_text().replace("  slow: {node_power_w: [200, 380]}\n", ""))
    (tmp_path / "profiles.csv").write_text("profile,gpu_type,gpus,seconds_per_epoch\n"
                                           "one,fast,1,0.3\n")
    with pytest.raises(AndreasError, match="GPU types slow, which the cluster file does not"):
        create_app(read_service_config(path), admin_token="admin-secret")
