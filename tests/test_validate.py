"""`andreas validate` and `andreas profile` end to end, in reduced form."""

import json
import subprocess
import sys

import pytest

from andreas.measure.validate import off_by_why

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

TINY = """\
import os, time
from andreas import job
stamps = []
for e in range(job.resume_epoch(), job.epochs()):
    time.sleep({sleep})
    job.progress(e + 1)
    stamps.append(time.time())
with open(os.environ["ANDREAS_GPU_TYPE"] + ".stamps", "w") as f:  # its own clock, for the test
    f.write(" ".join(map(str, stamps)))
"""


def andreas(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "andreas", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_profile_measures_a_known_epoch_time_within_its_spread(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text(TINY.format(sleep=0.2))
    out = tmp_path / "profiles.csv"
    out.write_text("profile,gpu_type,gpus,seconds_per_epoch\nother,a,1,9.0\n")
    run = subprocess.run([sys.executable, "-m", "andreas", "profile", str(script), "--configs",
                          "a:1,b:2", "--epochs", "4", "--out", str(out)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    import csv

    rows = {(r["profile"], r["gpu_type"], r["gpus"]): r for r in csv.DictReader(out.open())}
    assert rows[("other", "a", "1")]["seconds_per_epoch"] == "9.0"  # other rows kept
    for key in (("tiny", "a", "1"), ("tiny", "b", "2")):
        spe, spread = float(rows[key]["seconds_per_epoch"]), float(rows[key]["spread_s"])
        assert int(rows[key]["samples"]) == 4
        # the epoch time the script saw on its own clock (sleep + its progress report), after
        # the warm-up epoch, lies within the measured spread
        stamps = [float(x) for x in (tmp_path / f"{key[1]}.stamps").read_text().split()]
        own = [b - a for a, b in zip(stamps, stamps[1:])]
        true = sum(own) / len(own)
        assert abs(spe - true) <= max(3 * spread, 0.002), (spe, true, spread)
        # (the receiver's clock stamps each report late by a few ms on a loaded machine, so
        # the mean may fall a little under the 0.2 s sleep)
        assert 0.195 <= spe < 0.23
        assert float(rows[key]["startup_s"]) >= 0


def test_profile_rejects_a_script_that_does_not_report(tmp_path):
    script = tmp_path / "silent.py"
    script.write_text("print('hello')\n")
    run = andreas("profile", script, "--configs", "a:1", "--out", tmp_path / "p.csv")
    assert run.returncode == 2 and "does it call andreas.job.progress()" in run.stderr
    assert not (tmp_path / "p.csv").exists()
    bad = andreas("profile", script, "--configs", "a", "--out", tmp_path / "p.csv")
    assert bad.returncode == 2 and "TYPE:GPUS" in bad.stderr


def test_validate_runs_end_to_end_in_reduced_form(tmp_path):
    out = tmp_path / "v"
    run = andreas("validate", "--jobs", 3, "--quick", "--out", out)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((out / "validation.json").read_text())
    assert (out / "validation.png").stat().st_size > 1000
    jobs = result["jobs"]
    assert len(jobs) == 3
    predicted = sum(j["predicted_cost"] for j in jobs)
    measured = sum(j["measured_cost"] for j in jobs)
    assert result["predicted_total_cost"] == pytest.approx(predicted)
    assert result["measured_total_cost"] == pytest.approx(measured)
    assert result["total_deviation"] == pytest.approx(abs(measured - predicted) / measured)
    assert result["worst_job_deviation"] == pytest.approx(max(j["deviation"] for j in jobs))
    history = result["prediction_history"]  # the service recorded it at each decision
    assert history and all(h["predicted_total"] > 0 for h in history)
    for j in jobs:
        assert j["measured_energy_cost"] > 0 and j["predicted_energy_cost"] > 0
        assert j["measured_completion_s"] > j["submitted_s"]
        if j["final_config_seconds_per_epoch"] is not None:  # two reports on its last config
            assert j["learned_error"] < 0.5
    assert any(j["learned_error"] is not None for j in jobs)
    sim = result["simulated"]
    assert {j["job"] for j in sim["jobs"]} == {j["job"] for j in jobs}
    assert sim["total_cost"] > 0
    # the service's own records are kept for inspection
    assert (out / "work" / "state" / "andreas.db").exists()
    # without --gpu, energy is the power table's, and the energy totals add up
    assert result["energy_source"] == "power table"
    assert result["measured_energy_cost"] == pytest.approx(
        sum(j["measured_energy_cost"] for j in jobs))
    assert all(j["measured_energy_cost"] == j["modelled_energy_cost"] for j in jobs)
    # the per-job distribution, recomputed from the jobs
    dist = result["per_job"]
    energy = sorted(j["energy_deviation"] for j in jobs)
    assert dist["energy_deviation"]["worst"] == pytest.approx(energy[-1])
    assert dist["energy_deviation"]["median"] == pytest.approx(energy[1])
    errors = [j["measured_completion_s"] - j["predicted_completion_s"] for j in jobs]
    assert dist["completion_error_s"]["mean"] == pytest.approx(sum(map(abs, errors)) / 3)
    assert dist["mean_completion_error_s"] == pytest.approx(sum(errors) / 3)
    assert "per job, energy deviation: mean" in run.stdout
    why = dist["energy_over_10_percent"]
    assert why == off_by_why(jobs, 0.1) and "per job, energy over 10 % off" in run.stdout
    for j in jobs:  # every job ran somewhere, and the first plan placed it
        assert isinstance(j["on_planned_node"], bool)
        assert j["on_planned_node"] == (set(j["run_nodes"]) == {j["first_planned_node"]})
    flags = [j["completion_within_range"] for j in jobs]
    assert all(isinstance(f, bool) for f in flags)  # every first plan gave a range
    assert dist["completions_within_range"] == pytest.approx(sum(flags) / 3)
    # another seed on these profiles: no profiling (scripts/gpu-validate.sh SEEDS)
    reused = andreas("validate", "--jobs", 3, "--quick", "--seed", 2, "--out", tmp_path / "v2",
                     "--profiles-from", out / "work" / "profiles-measured.csv")
    assert reused.returncode == 0, reused.stderr[-2000:]
    assert "profiling" not in reused.stderr and "profiles from" in reused.stderr
    assert (tmp_path / "v2" / "work" / "profiles-measured.csv").read_text() == \
        (out / "work" / "profiles-measured.csv").read_text()
    wrong = andreas("validate", "--jobs", 3, "--out", tmp_path / "v3",  # not --quick
                    "--profiles-from", out / "work" / "profiles-measured.csv")
    assert wrong.returncode == 2 and "no measurement of mlp-s on big:1" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    again = andreas("validate", "--jobs", 3, "--quick", "--out", out)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_jobs_off_their_energy_say_why():
    # four jobs over 10 % off: two on their planned node (running 20 % slower and 5 % faster
    # than the profile said), one elsewhere, one whose plan is unknown; one job within 10 %
    def entry(deviation, on_node, drift):
        return {"energy_deviation": deviation, "on_planned_node": on_node,
                "speed_drift": drift}
    entries = [entry(0.3, True, 0.2), entry(0.12, True, -0.05), entry(0.5, False, None),
               entry(0.2, None, None), entry(0.05, True, 0.01)]
    assert off_by_why(entries, 0.1) == {"jobs": 4, "on_planned_node": 2, "elsewhere": 1,
                                        "speed_drift_on_planned_node": [-0.05, 0.2]}
    assert off_by_why(entries, 0.4) == {"jobs": 1, "on_planned_node": 0, "elsewhere": 1,
                                        "speed_drift_on_planned_node": None}
