"""GPU catalogue and trace import, on excerpts of the real traces shipped in tests/data."""

import subprocess
import sys
from pathlib import Path

import pytest

from andreas.catalogue import canonical_gpu, gpu_catalogue
from andreas.errors import ScenarioError
from andreas.io import load_scenario, read_cluster
from andreas.sim.traces import DUE_FACTORS, REFERENCE_GPU, import_trace

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def cluster():
    return read_cluster(DATA / "cluster_catalogue.yaml")


def test_catalogue_names_and_power(cluster):
    assert canonical_gpu("tesla-v100") == canonical_gpu("V100M32") == "V100"
    assert canonical_gpu("h200") == "H200" and canonical_gpu("G2") is None
    assert set(gpu_catalogue()) >= {"K80", "P100", "V100", "T4", "A100", "H100", "H200"}
    assert [n.gpu_type for n in cluster.nodes] == ["V100", "V100", "P100", "K80"]
    v100 = gpu_catalogue()["V100"]
    power = cluster.gpu_types["V100"].node_power_w
    assert len(power) == 8  # the largest V100 node
    assert power[0] == pytest.approx(v100.host_w + v100.busy_w + 7 * v100.idle_w)
    assert power[-1] == pytest.approx(v100.host_w + 8 * v100.busy_w)
    assert len(cluster.gpu_types["K80"].node_power_w) == 4


def check_jobs(sc, expected):
    assert [(j.job_id, j.submit_time) for j in sc.jobs] == [(i, s) for i, s, *_ in expected]
    for j, (_, _, duration, gpus, allowed) in zip(sc.jobs, expected):
        configs = sc.profiles.configs(j.profile)
        assert {t for t, _ in configs} <= allowed
        model = j.profile.split("@")[0]
        from andreas.catalogue import catalogue_profiles_path
        ref = [r for r in catalogue_profiles_path().read_text().splitlines()
               if r.startswith(f'"{model}",{REFERENCE_GPU},{min(gpus, 8)},')
               or r.startswith(f"{model},{REFERENCE_GPU},{min(gpus, 8)},")]
        spe = float(ref[0].rsplit(",", 1)[1])
        assert j.epochs * spe == pytest.approx(duration * gpus / min(gpus, 8))
        fastest = min(s * j.epochs for s in configs.values())
        assert any(j.due_date - j.submit_time == pytest.approx(m * fastest, abs=2e-3)
                   for m in DUE_FACTORS)


def test_philly_excerpt(cluster):
    sc, report = import_trace("philly", DATA / "philly_excerpt.csv", cluster, start=235696,
                              seed=3)
    expected = [("philly-2", 0.0, 3256045, 1), ("philly-3", 21533.0, 2643038, 1),
                ("philly-4", 22556.0, 3219826, 1), ("philly-5", 22866.0, 2887527, 1),
                ("philly-6", 80264.0, 2912468, 1), ("philly-7", 81260.0, 3218085, 1)]
    check_jobs(sc, [e + ({"V100", "P100", "K80"},) for e in expected])
    assert report.rows == 7 and report.jobs == 6
    again, _ = import_trace("philly", DATA / "philly_excerpt.csv", cluster, start=235696, seed=3)
    assert again.jobs == sc.jobs  # seeded
    limited, _ = import_trace("philly", DATA / "philly_excerpt.csv", cluster, limit=2)
    assert [j.job_id for j in limited.jobs] == ["philly-1", "philly-2"]
    assert "@" not in limited.jobs[0].profile


def test_alibaba_excerpt(cluster):
    sc, report = import_trace("alibaba", DATA / "alibaba_excerpt.csv", cluster, seed=1)
    any_type = {"V100", "P100", "K80"}
    expected = [("openb-pod-0000", 0.0, 12537496, 1, any_type),
                ("openb-pod-0001", 427061.0, 12902960 - 427061, 1, any_type),
                ("openb-pod-0002", 1558381.0, 12902960 - 1558381, 1, any_type),
                ("openb-pod-0003", 2690044.0, 12902960 - 2690044, 1, any_type),
                ("openb-pod-0004", 2758084.0, 12902960 - 2758084, 1, any_type),
                ("openb-pod-0087", 10017643.0, 10019780 - 10017677, 1, {"P100", "V100"})]
    check_jobs(sc, expected)
    assert sc.jobs[-1].profile.endswith("@P100+V100")
    # Failed pods did not run; G2- and T4-only pods have no GPU type in this cluster.
    assert (report.skipped_not_run, report.skipped_no_gpu_type, report.rows) == (2, 3, 11)


def test_malformed_rows_and_skip_bad(cluster, tmp_path):
    bad = tmp_path / "philly.csv"
    bad.write_text((DATA / "philly_excerpt.csv").read_text().replace("257229,", "soon,"))
    with pytest.raises(ScenarioError) as err:
        import_trace("philly", bad, cluster)
    assert "philly.csv:4: field 'submit_time_s'" in str(err.value)
    sc, report = import_trace("philly", bad, cluster, skip_bad=True)
    assert report.skipped_bad == 1 and len(sc.jobs) == 6


def test_import_trace_command_writes_a_scenario(tmp_path):
    run = subprocess.run([sys.executable, "-m", "andreas", "import-trace", "alibaba",
                          str(DATA / "alibaba_excerpt.csv"), "--cluster",
                          str(DATA / "cluster_catalogue.yaml"), "--out", str(tmp_path / "sc")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "6 jobs from 11 rows" in run.stdout
    sc = load_scenario(tmp_path / "sc")
    assert len(sc.jobs) == 6 and [n.gpu_type for n in sc.cluster.nodes][0] == "V100"
    bad = subprocess.run([sys.executable, "-m", "andreas", "import-trace", "philly",
                          str(tmp_path / "missing.csv"), "--cluster",
                          str(DATA / "cluster_catalogue.yaml"), "--out", str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "missing.csv: file not found" in bad.stderr
    assert not (tmp_path / "x").exists()


def test_short_rows_are_errors_or_skipped(cluster, tmp_path):
    short = tmp_path / "short.csv"
    short.write_text((DATA / "philly_excerpt.csv").read_text().replace(
        "258252,3219826,1,6214e9", "258252"))
    with pytest.raises(ScenarioError) as err:
        import_trace("philly", short, cluster)
    assert "short.csv:5: field 'duration_s'" in str(err.value)
    _, report = import_trace("philly", short, cluster, skip_bad=True)
    assert report.skipped_bad == 1 and report.jobs == 6


def test_idle_power_from_the_catalogue(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("energy_price: 0.2\ngpu_types:\n  a100: {idle_power_w: catalogue}\n"
                    "  X: {node_power_w: [100, 150], idle_power_w: 40}\nnodes:\n"
                    "  - {name: a, gpu_type: A100, gpus: 4}\n  - {name: x, gpu_type: X, gpus: 2}\n")
    cl = read_cluster(path)
    spec = gpu_catalogue()["A100"]
    assert cl.gpu_types["A100"].idle_w == pytest.approx(spec.host_w + 4 * spec.idle_w)
    assert cl.gpu_types["X"].idle_w == 40.0 and cl.gpu_types["X"].extra_w(2) == 110.0
    from andreas.io import cluster_document
    assert cluster_document(cl)["gpu_types"]["X"]["idle_power_w"] == 40.0
