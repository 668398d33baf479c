"""`andreas profile`: measure a training script's seconds per epoch on each configuration.

The script runs as the service would run it (same environment variables, its own checkpoint
directory, the configuration's GPUs in CUDA_VISIBLE_DEVICES) for `warmup + epochs` epochs. The
epoch time is the spacing of its progress reports after the warm-up epochs (so start-up and
first-epoch effects are left out); start-up is reported on its own, because the scheduler
should know it as the restart overhead. Where NVML is there, the GPUs' mean board power over the
measured epochs is recorded too, per GPU (`power_w`), from their energy counters read as the
reports arrive: the job's own draw, which the planner, the simulator and the service charge it
instead of the power table's draw per busy GPU; and their mean power during start-up
(`startup_power_w`): what they draw while a job restarts.
"""

from __future__ import annotations

import csv
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AndreasError
from .receiver import ProgressReceiver

PROFILE_COLUMNS = ("profile", "gpu_type", "gpus", "seconds_per_epoch", "spread_s", "samples",
                   "startup_s", "power_w", "startup_power_w")


@dataclass(frozen=True)
class Measurement:
    profile: str
    gpu_type: str
    gpus: int
    seconds_per_epoch: float
    spread_s: float  # sample standard deviation of the epoch times
    samples: int
    startup_s: float  # launch to first report, less one epoch
    power_w: float | None = None  # the GPUs' mean board power while measured, all together
    # (NVML); the profile's `power_w` is per GPU
    startup_power_w: float | None = None  # ... and while the script started up

    def row(self) -> dict[str, str]:
        return {"profile": self.profile, "gpu_type": self.gpu_type, "gpus": str(self.gpus),
                "seconds_per_epoch": f"{self.seconds_per_epoch:.6g}",
                "spread_s": f"{self.spread_s:.3g}", "samples": str(self.samples),
                "startup_s": f"{self.startup_s:.3g}",
                "power_w": "" if self.power_w is None else f"{self.power_w / self.gpus:.4g}",
                "startup_power_w": ("" if self.startup_power_w is None
                                    else f"{self.startup_power_w:.4g}")}


def parse_configs(text: str) -> list[tuple[str, int]]:
    """`big:1,small:2` -> [("big", 1), ("small", 2)]."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.rpartition(":")
        if not name or not count.isdigit() or int(count) < 1:
            raise AndreasError(f"--configs: expected TYPE:GPUS items like V100:2, got {part!r}")
        out.append((name, int(count)))
    if not out:
        raise AndreasError("--configs: expected at least one TYPE:GPUS item")
    return out


def profile_script(command: list[str], profile: str, configs: list[tuple[str, int]], *,
                   epochs: int = 4, warmup: int = 1, min_seconds: float = 0.0,
                   gpu_indices: dict[tuple[str, int], tuple[int, ...]] | None = None,
                   timeout_s: float = 600.0, parallel: bool = False,
                   on_config=None, meter=None) -> list[Measurement]:
    """Run `command` once per configuration and measure it.

    Each run lasts `warmup + epochs` epochs, or, with `min_seconds`, until at least that long
    has been measured (the script is then stopped with SIGTERM, as the service would pause it):
    on a shared or noisy machine, a few short epochs say little. With `parallel`, all
    configurations run at once, so the machine is as loaded as when the scheduler keeps every
    GPU busy (on logical GPUs, jobs share the CPU). With an available `meter`
    (`andreas.measure.nvml.NvmlMeter`) each configuration's board power is measured as well;
    do not combine it with `parallel` on shared GPUs."""
    if epochs < 2:
        raise AndreasError("--epochs: expected at least 2 measured epochs")
    with ProgressReceiver() as receiver, tempfile.TemporaryDirectory(
            prefix="andreas-profile-") as scratch:
        launches: list[_Launch] = []
        for gpu_type, gpus in configs:
            if on_config:
                on_config(gpu_type, gpus)
            key = f"{profile}/{gpu_type}/{gpus}"
            indices = (gpu_indices or {}).get((gpu_type, gpus), tuple(range(gpus)))
            total = 10 ** 6 if min_seconds > 0 else warmup + epochs
            env = dict(os.environ, ANDREAS_JOB_ID=f"profile-{profile}",
                       ANDREAS_CHECKPOINT_DIR=str(Path(scratch) / key),
                       ANDREAS_EPOCHS=str(total), ANDREAS_PROGRESS_URL=receiver.url(key),
                       ANDREAS_PROGRESS_TOKEN="-",
                       CUDA_VISIBLE_DEVICES=",".join(map(str, indices)),
                       CUDA_DEVICE_ORDER=os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
                       ANDREAS_GPU_TYPE=gpu_type)
            launched = time.time()
            try:
                proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
            except OSError as exc:
                raise AndreasError(f"cannot run {command[0]!r}: {exc}") from None
            launch = _Launch(gpu_type, gpus, key, launched, proc, indices)
            launch.read_energy(meter, 0)  # the counters at launch, for the start-up's draw
            launches.append(launch)
            if not parallel:
                _run_to_end([launch], receiver, warmup + epochs, warmup, min_seconds,
                            timeout_s, meter)
        if parallel:
            _run_to_end(launches, receiver, warmup + epochs, warmup, min_seconds, timeout_s,
                        meter)
        return [_measure(receiver, launch, profile, warmup) for launch in launches]


@dataclass
class _Launch:
    gpu_type: str
    gpus: int
    key: str
    launched: float
    proc: subprocess.Popen
    indices: tuple[int, ...] = ()
    energy: list[tuple[int, float, float]] = field(default_factory=list)  # reports, time, mJ

    def read_energy(self, meter, reports: int) -> None:
        """Record the GPUs' energy counters as the `reports`-th report is seen."""
        if meter is None or not meter.available or not self.indices:
            return
        if self.energy and self.energy[-1][0] == reports:
            return
        values = meter.read_mj(self.indices)
        if values is not None:
            self.energy.append((reports, time.time(), sum(values.values())))

    def power_w(self, warmup: int) -> float | None:
        """Mean power from the counters read at the end of the warm-up and at the last
        report."""
        first = next((e for e in self.energy if e[0] >= max(1, warmup)), None)
        last = self.energy[-1] if self.energy else None
        if first is None or last is None or last[1] <= first[1]:
            return None
        return (last[2] - first[2]) / 1000.0 / (last[1] - first[1])

    def startup_power_w(self, startup_s: float, seconds_per_epoch: float,
                        run_power_w: float | None) -> float | None:
        """Mean power from launch to the first report, less the first epoch (counted at the
        run's power), over the start-up time."""
        launch = next((e for e in self.energy if e[0] == 0), None)
        first = next((e for e in self.energy if e[0] >= 1), None)
        if launch is None or first is None or run_power_w is None or startup_s <= 0:
            return None
        joules = (first[2] - launch[2]) / 1000.0 - run_power_w * seconds_per_epoch
        return max(0.0, joules / startup_s)


def _run_to_end(launches: list[_Launch], receiver: ProgressReceiver, reports: int,
                warmup: int, min_seconds: float, timeout_s: float, meter=None) -> None:
    """Wait until every run has `reports` reports and `min_seconds` measured, then stop the
    ones still running with SIGTERM; raise if one fails or runs out of time."""
    deadline = time.monotonic() + timeout_s

    def enough(launch: _Launch) -> bool:
        times = [t for t, _ in receiver.reports.get("/" + launch.key, [])]
        if len(times) < reports:
            return False
        return times[-1] - times[max(0, warmup - 1)] >= min_seconds

    while not all(enough(x) or x.proc.poll() is not None for x in launches):
        for x in launches:
            x.read_energy(meter, len(receiver.reports.get("/" + x.key, [])))
        if time.monotonic() > deadline:
            for x in launches:
                x.proc.kill()
            raise AndreasError(f"profiling ran over {timeout_s:.0f} s; use fewer --epochs or a "
                               f"shorter --min-seconds")
        time.sleep(0.05)
    for x in launches:
        x.read_energy(meter, len(receiver.reports.get("/" + x.key, [])))
    stopped = set()
    if min_seconds > 0:  # the runs were started for "many" epochs: stop them now
        for x in launches:
            if x.proc.poll() is None:
                x.proc.terminate()
                stopped.add(x.key)
    for x in launches:
        stdout, stderr = x.proc.communicate(timeout=120)
        if x.proc.returncode != 0 and not (x.key in stopped and x.proc.returncode == -15):
            tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
            raise AndreasError(f"the script failed on {x.gpu_type}:{x.gpus} with exit code "
                               f"{x.proc.returncode}: {tail[0]}")


def _measure(receiver: ProgressReceiver, launch: _Launch, profile: str,
             warmup: int) -> Measurement:
    gpu_type, gpus, key, launched = launch.gpu_type, launch.gpus, launch.key, launch.launched
    reports = sorted(receiver.reports.get("/" + key, []))
    if len(reports) < warmup + 2:
        raise AndreasError(f"the script reported {len(reports)} epoch(s) on {gpu_type}:{gpus}; "
                           f"expected more: does it call andreas.job.progress() after each "
                           f"epoch?")
    times = [t for t, _ in reports]
    measured = times[max(0, warmup - 1):]  # from the end of the last warm-up epoch on
    intervals = [b - a for a, b in zip(measured, measured[1:])]
    spe = statistics.fmean(intervals)
    spread = statistics.stdev(intervals) if len(intervals) > 1 else 0.0
    startup = max(0.0, times[0] - launched - spe)
    power = launch.power_w(warmup)
    return Measurement(profile, gpu_type, gpus, spe, spread, len(intervals), startup, power,
                       launch.startup_power_w(startup, spe, power))


def read_measurements(path: Path) -> list[Measurement]:
    """The measurements `write_profiles` wrote to `path` (an earlier run's), or a clear error
    naming the file, line and field."""
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise AndreasError(f"{path}: cannot read it ({exc.strerror})") from None
    out = []
    with handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            gpus = int(_number(path, line, row, "gpus"))
            watts = _number(path, line, row, "power_w", optional=True)
            out.append(Measurement(
                row.get("profile") or "", row.get("gpu_type") or "", gpus,
                _number(path, line, row, "seconds_per_epoch"),
                _number(path, line, row, "spread_s"),
                int(_number(path, line, row, "samples")), _number(path, line, row, "startup_s"),
                None if watts is None else watts * gpus,
                _number(path, line, row, "startup_power_w", optional=True)))
    return out


def _number(path: Path, line: int, row: dict, field: str, optional: bool = False):
    """Field `field` of a profiles row as a number (None if empty and `optional`)."""
    text = (row.get(field) or "").strip()
    if optional and not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise AndreasError(f"{path}:{line}: field {field!r}: expected a number, got "
                           f"{text!r}") from None


def write_profiles(path: Path, measurements: list[Measurement]) -> None:
    """Merge into `path`: rows for the measured (profile, type, GPUs) are replaced, others
    kept. Written atomically."""
    rows: dict[tuple[str, str, str], dict[str, str]] = {}
    if path.exists():
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                rows[(row["profile"], row["gpu_type"], row["gpus"])] = {
                    c: row.get(c, "") or "" for c in PROFILE_COLUMNS}
    for m in measurements:
        rows[(m.profile, m.gpu_type, str(m.gpus))] = m.row()
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=PROFILE_COLUMNS)
        writer.writeheader()
        for key in sorted(rows, key=lambda k: (k[0], k[1], int(k[2]))):
            writer.writerow(rows[key])
    os.replace(tmp, path)
