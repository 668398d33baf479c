"""Simulation outputs: `summary.json`, `jobs.csv`, `segments.csv`, written all-or-nothing.

`segments.csv` is the ground truth: `recompute` rebuilds every cost of `summary.json` from it
and the scenario alone, through the same cost model the simulator uses.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import astuple, fields
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import yaml

from ..cost import CostBreakdown, account_segments
from ..errors import AndreasError, ScenarioError
from ..io import cluster_document, read_cluster
from ..model import Scenario, Segment
from .engine import JobRecord, SimulationResult

T = TypeVar("T")
SEGMENT_COLUMNS = tuple(f.name for f in fields(Segment))
JOB_COLUMNS = tuple(f.name for f in fields(JobRecord))


@contextmanager
def atomic_directory(out_dir: str | Path, marker: str = "summary.json") -> Iterator[Path]:
    """Yield a temporary directory beside `out_dir`; on success it replaces `out_dir`.

    On any error the temporary directory is removed, so no half-written output is left. An
    existing `out_dir` is only replaced when it is empty or holds an earlier output (`marker`).
    """
    out_dir = Path(out_dir)
    if out_dir.exists():
        if not out_dir.is_dir():
            raise AndreasError(f"{out_dir}: exists and is not a directory")
        if any(out_dir.iterdir()) and not (out_dir / marker).exists():
            raise AndreasError(f"{out_dir}: exists, is not empty and holds no earlier output "
                               f"({marker}); choose another --out")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)


def write_result_files(result: SimulationResult, directory: Path) -> None:
    """summary.json, jobs.csv, segments.csv, and a copy of the cluster (cluster.yaml) so the
    output can be plotted and re-costed on its own."""
    with (directory / "cluster.yaml").open("w", encoding="utf-8") as f:
        yaml.safe_dump(cluster_document(result.scenario.cluster), f, sort_keys=False)
    with (directory / "summary.json").open("w", encoding="utf-8") as f:
        json.dump(result.summary, f, indent=2)
        f.write("\n")
    _write_rows(directory / "jobs.csv", JOB_COLUMNS, (astuple(r) for r in result.jobs))
    _write_rows(directory / "segments.csv", SEGMENT_COLUMNS,
                (astuple(s) for s in result.segments))


def write_result(result: SimulationResult, out_dir: str | Path) -> Path:
    with atomic_directory(out_dir) as tmp:
        write_result_files(result, tmp)
    return Path(out_dir)


def _write_rows(path: Path, columns: tuple[str, ...], rows) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for row in rows:
            w.writerow([repr(x) if isinstance(x, float) else x for x in row])


def _read_rows(path: str | Path, columns: tuple[str, ...], make: Callable[[dict], T]) -> list[T]:
    """Rows of an output CSV built by `make`; errors name the file, the line and what is wrong."""
    path = Path(path)
    records = []
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ScenarioError(path, "missing column", line=1, field=missing[0])
            for row in reader:
                try:
                    records.append(make(row))
                except ValueError as exc:
                    raise ScenarioError(path, f"bad value: {exc}", line=reader.line_num) from None
    except FileNotFoundError:
        raise ScenarioError(path, "file not found") from None
    return records


def read_segments(path: str | Path) -> list[Segment]:
    # The power-limit columns are optional: outputs written before limits existed lack them.
    return _read_rows(path, SEGMENT_COLUMNS[:8], lambda row: Segment(
        row["job_id"], row["node"], row["gpu_type"], int(row["gpus"]), float(row["start"]),
        float(row["end"]), float(row["epochs"]), row["phase"],
        float(row["power_limit_w"]) if row.get("power_limit_w") else None,
        float(row.get("saved_w") or 0.0)))


def recompute(scenario: Scenario, out_dir: str | Path) -> CostBreakdown:
    """Every cost of a simulation rebuilt from its `segments.csv` and the scenario alone."""
    return account_segments(scenario.cluster, scenario.jobs,
                            read_segments(Path(out_dir) / "segments.csv"))


def read_job_records(path: str | Path) -> list[JobRecord]:
    # emissions_kg is optional (outputs written before carbon lack it) and empty without a
    # carbon intensity
    required = tuple(c for c in JOB_COLUMNS if c != "emissions_kg")

    def record(row: dict) -> JobRecord:
        numbers = {c: float(row[c]) for c in required if c not in ("job_id", "restarts")}
        emitted = row.get("emissions_kg")
        return JobRecord(job_id=row["job_id"], restarts=int(row["restarts"]), **numbers,
                         emissions_kg=float(emitted) if emitted else None)

    return _read_rows(path, required, record)


def load_output(out_dir: str | Path):
    """(cluster, segments, job records, summary) of one `andreas simulate` output directory."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise AndreasError(f"{out_dir}: not a directory; expected an 'andreas simulate' output")
    cluster = read_cluster(out_dir / "cluster.yaml")
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(out_dir / "summary.json", "file not found") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(out_dir / "summary.json", f"invalid JSON: {exc.msg}",
                            line=exc.lineno) from None
    return (cluster, read_segments(out_dir / "segments.csv"),
            read_job_records(out_dir / "jobs.csv"), summary)
