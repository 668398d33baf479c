"""Simulations run as tasks on a real local Ray cluster give the tables of a local run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ENGINES

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = [pytest.mark.service, ENGINES]


def andreas(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "andreas", *map(str, args)],
                          capture_output=True, text=True, timeout=900, cwd=cwd)


def test_compare_on_ray_gives_the_local_tables_byte_for_byte(tmp_path, ray_cluster):
    common = ["compare", "--generate", 3, "--instances", 2, "--lambda", 3000,
              "--policies", "fifo,greedy,andreas", "--seeds", "1-2", "--max-iterations", 30]
    local = andreas(*common, "--workers", 1, "--out", tmp_path / "local")
    assert local.returncode == 0, local.stderr
    on_ray = andreas(*common, "--ray", ray_cluster, "--out", tmp_path / "ray")
    assert on_ray.returncode == 0, on_ray.stderr
    for name in ("runs.csv", "jobs.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    # the table, less its one wall-clock column (scheduler_seconds_mean; timings.csv too)
    assert _untimed(tmp_path / "ray") == _untimed(tmp_path / "local")
    assert len(_untimed(tmp_path / "local")) == 3


def test_a_sweep_on_ray_resumes_and_matches_a_local_sweep(tmp_path, ray_cluster):
    common = ["sweep", "--nodes", "2", "--lambdas", "3000,6000", "--instances", 2,
              "--policies", "fifo,greedy", "--seeds", 1]
    local = andreas(*common, "--workers", 1, "--out", tmp_path / "local")
    assert local.returncode == 0, local.stderr
    first = andreas(*common, "--ray", ray_cluster, "--out", tmp_path / "ray")
    assert first.returncode == 0, first.stderr
    again = andreas(*common, "--ray", ray_cluster, "--out", tmp_path / "ray")
    assert again.returncode == 0 and "0 run(s) done now" in again.stdout, again.stdout
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")


def test_an_unreachable_ray_cluster_is_a_clear_error(tmp_path):
    run = andreas("compare", "--generate", 2, "--instances", 1, "--policies", "fifo",
                  "--ray", "127.0.0.1:1", "--out", tmp_path / "x")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "--ray: cannot connect to the Ray cluster at '127.0.0.1:1'" in run.stderr
    assert not (tmp_path / "x").exists()  # nothing half-written


def _untimed(folder: Path) -> list[dict]:
    rows = json.loads((folder / "table.json").read_text())
    return [{k: v for k, v in row.items() if k != "scheduler_seconds_mean"} for row in rows]


def _rows(folder: Path) -> list[str]:
    return sorted((folder / "sweep.csv").read_text().splitlines())
