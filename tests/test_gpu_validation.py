"""The pieces of `andreas validate --gpu` that need no GPU: naming the GPU type, the power
table from measured board power, NVML energy priced, and mean power from energy counters.
The whole run needs an NVIDIA GPU: `scripts/gpu-validate.sh` (docs/service-measured.md)."""

import csv
import subprocess
import sys

import pytest

from andreas.errors import AndreasError
from andreas.io import read_cluster, read_profiles
from andreas.measure.nvml import NvmlMeter, gpu_type_name
from andreas.measure.profiler import Measurement, _Launch, write_profiles
from andreas.measure.validate import GpuMachine, gpu_cluster_yaml, nvml_energy_cost


@pytest.mark.parametrize("product, name", [
    ("NVIDIA H200", "h200"), ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
    ("  ", "gpu")])
def test_gpu_type_names_come_from_the_product_name(product, name):
    assert gpu_type_name(product) == name


def _measurement(profile, watts, startup_watts=None):
    return Measurement(profile, "H200", 1, 0.5, 0.01, 10, 7.5, watts, startup_watts)


def test_power_table_is_the_mean_measured_board_power_per_busy_gpu(tmp_path):
    machine = GpuMachine(NvmlMeter(), "NVIDIA H200", "H200", 3)
    text = gpu_cluster_yaml(machine, [_measurement("a", 200.0), _measurement("b", 400.0)], 7.5)
    (tmp_path / "cluster.yaml").write_text(text)
    cluster = read_cluster(tmp_path / "cluster.yaml")
    h200 = cluster.gpu_types["H200"]
    assert [h200.power_w(k) for k in range(4)] == [0.0, 300.0, 600.0, 900.0]
    assert cluster.restart_overhead_s == 7.5 and cluster.nodes[0].gpus == 3
    assert "a 200.0 W, b 400.0 W" in text  # the measurements behind the table, for readers
    assert h200.restart_w is None  # no start-up draw measured: restarts draw as busy
    weighted = gpu_cluster_yaml(machine, [_measurement("a", 200.0), _measurement("b", 400.0)],
                                7.5, {"a": 30.0, "b": 10.0})  # the workload runs a 3x longer
    (tmp_path / "cluster.yaml").write_text(weighted)
    assert read_cluster(tmp_path / "cluster.yaml").gpu_types["H200"].power_w(1) == 250.0
    with_startup = gpu_cluster_yaml(machine, [_measurement("a", 200.0, 100.0),
                                              _measurement("b", 400.0, 140.0)], 7.5)
    (tmp_path / "cluster.yaml").write_text(with_startup)
    assert read_cluster(tmp_path / "cluster.yaml").gpu_types["H200"].restart_w == 120.0
    with pytest.raises(AndreasError, match="no energy readings while profiling b"):
        gpu_cluster_yaml(machine, [_measurement("a", 200.0), _measurement("b", None)], 7.5)


def test_nvml_energy_is_priced_at_the_clusters_price_and_pue(tmp_path):
    (tmp_path / "cluster.yaml").write_text(
        "energy_price: 0.25\npue: 1.2\ngpu_types:\n  X: {node_power_w: [100]}\n"
        "nodes:\n  - {name: n, gpu_type: X, gpus: 1}\n")
    cluster = read_cluster(tmp_path / "cluster.yaml")
    assert nvml_energy_cost(cluster, 3.6e6) == pytest.approx(0.25 * 1.2)  # one kWh


def test_mean_power_from_counters_read_after_the_warm_up_and_at_the_last_report():
    launch = _Launch("H200", 1, "k", 0.0, None, (0,))
    # (reports seen, time, cumulative mJ): 1 warm-up epoch, then 3 epochs of 2 s at 250 W
    launch.energy = [(0, 0.0, 0.0), (1, 10.0, 1_000_000.0), (2, 12.0, 1_500_000.0),
                     (4, 16.0, 2_500_000.0)]
    assert launch.power_w(warmup=1) == pytest.approx(250.0)
    assert launch.power_w(warmup=2) == pytest.approx(250.0)
    assert _Launch("H200", 1, "k", 0.0, None, (0,)).power_w(1) is None  # never read
    # start-up: 10 s to the first report, 2 s of it the first epoch at 250 W -> 8 s of start-up
    # drew 1000 J - 500 J: 62.5 W
    assert launch.startup_power_w(8.0, 2.0, 250.0) == pytest.approx(62.5)
    assert launch.startup_power_w(8.0, 2.0, None) is None


def test_measured_power_is_written_beside_the_profile_and_the_file_still_reads(tmp_path):
    path = tmp_path / "profiles.csv"
    write_profiles(path, [_measurement("a", 212.345, 101.23), _measurement("b", None)])
    rows = {r["profile"]: r for r in csv.DictReader(path.open())}
    assert rows["a"]["power_w"] == "212.3" and rows["b"]["power_w"] == ""
    assert rows["a"]["startup_power_w"] == "101.2" and rows["b"]["startup_power_w"] == ""
    (tmp_path / "cluster.yaml").write_text(
        "energy_price: 0.25\ngpu_types:\n  H200: {node_power_w: [300]}\n"
        "nodes:\n  - {name: n, gpu_type: H200, gpus: 1}\n")
    profiles = read_profiles(path, read_cluster(tmp_path / "cluster.yaml"))
    assert profiles.seconds_per_epoch("a", "H200", 1) == pytest.approx(0.5)
    assert profiles.gpu_power_w("a", ("H200", 1)) == pytest.approx(212.3)  # the job's own
    assert profiles.gpu_power_w("b", ("H200", 1)) is None


@pytest.mark.skipif(NvmlMeter().available, reason="this machine has an NVIDIA GPU")
def test_validate_gpu_says_clearly_when_there_is_no_gpu(tmp_path):
    run = subprocess.run([sys.executable, "-m", "andreas", "validate", "--gpu", "--quick",
                          "--out", str(tmp_path / "v")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 2 and "NVML finds no NVIDIA GPU" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "v" / "work").exists()  # nothing half-written


def test_restart_power_is_read_checked_and_written_back(tmp_path):
    from andreas.errors import ScenarioError
    from andreas.io import cluster_document

    base = ("energy_price: 0.25\nrestart_overhead_s: 5\ngpu_types:\n"
            "  X: {{node_power_w: [100, 200]{extra}}}\nnodes:\n  - {{name: n, gpu_type: X, "
            "gpus: 2}}\n")
    (tmp_path / "cluster.yaml").write_text(base.format(extra=", restart_power_w: 30"))
    cluster = read_cluster(tmp_path / "cluster.yaml")
    assert cluster.gpu_types["X"].restart_w == 30.0
    assert cluster.gpu_types["X"].restart_saving_w(2) == pytest.approx(2 * (100 - 30))
    import yaml
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(cluster_document(cluster)))
    assert read_cluster(tmp_path / "again.yaml") == cluster
    (tmp_path / "cluster.yaml").write_text(base.format(extra=", restart_power_w: -1"))
    with pytest.raises(ScenarioError, match=r"restart_power_w.*expected watts >= 0") as caught:
        read_cluster(tmp_path / "cluster.yaml")
    assert "cluster.yaml" in str(caught.value)


def test_measurements_read_back_as_written_and_bad_ones_name_the_line(tmp_path):
    from andreas.measure.profiler import read_measurements

    path = tmp_path / "profiles.csv"
    written = [_measurement("a", 212.5, 101.25), _measurement("b", None)]
    write_profiles(path, written)
    back = read_measurements(path)
    assert [(m.profile, m.gpus, m.seconds_per_epoch, m.startup_s, m.power_w,
             m.startup_power_w) for m in back] == [
        ("a", 1, 0.5, 7.5, 212.5, 101.2), ("b", 1, 0.5, 7.5, None, None)]
    path.write_text(path.read_text().replace("0.5", "fast", 1))
    with pytest.raises(AndreasError, match="profiles.csv:2: field 'seconds_per_epoch'"):
        read_measurements(path)
