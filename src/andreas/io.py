"""Read and validate scenario directories: `cluster.yaml`, `profiles.csv`, `workload.csv`.

Every problem raises `ScenarioError` naming the file, the line and the field. Extra columns and
keys are accepted and ignored, so users can keep their own annotations in the files.
"""

from __future__ import annotations

import csv
import difflib
import math
from pathlib import Path
from typing import Any, Iterator

import yaml

from .catalogue import canonical_gpu, gpu_catalogue
from .errors import ScenarioError
from .model import (
    CarbonCap,
    Cluster,
    GpuType,
    Job,
    Node,
    PowerLevel,
    Profiles,
    Scenario,
    Tariff,
    config_key,
)

CLUSTER_FILE = "cluster.yaml"
PROFILES_FILE = "profiles.csv"
WORKLOAD_FILE = "workload.csv"
PROFILE_COLUMNS = ("profile", "gpu_type", "gpus", "seconds_per_epoch")
POWER_LIMIT_COLUMNS = ("power_limit_w", "gpu_power_w")  # optional: see docs/power-limits.md
#: optional: the job's own draw per GPU while it trains (W), instead of the power table's
OWN_POWER_COLUMN = "power_w"
#: optional: the job's own start-up (s), instead of the cluster's restart_overhead_s
STARTUP_COLUMN = "startup_s"
#: optional: nodes of a gang (docs/gangs.md); `gpus` is then per node. Empty or 1: one node
NODES_COLUMN = "nodes"
SPREAD_COLUMN = "spread_slowdown"  # a gang row: how much slower across node groups
#: what `andreas profile` measured beside the speed: kept in the file, not read by the planner
#: (`measured_power_w`: older versions' name for the draw, read as a note, not as `power_w`)
MEASURED_COLUMNS = ("spread_s", "samples", "measured_power_w", "startup_power_w")
WORKLOAD_COLUMNS = ("job_id", "submit_time", "due_date", "tardiness_weight", "epochs", "profile")
# optional per-job controls (model.Job), written only when some job departs from the default
WORKLOAD_FLAGS_DEFAULTS = {"preemptible": True, "start_asap": False}
WORKLOAD_FLAGS = tuple(WORKLOAD_FLAGS_DEFAULTS)


# --------------------------------------------------------------------------- YAML with lines
class _Located:
    """A YAML value together with the line it was found on, for error messages."""

    def __init__(self, value: Any, line: int) -> None:
        self.value = value
        self.line = line


    def plain(self) -> Any:
        """The value with every nested list and mapping unwrapped (no line numbers)."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


class _ComplexKey(Exception):
    """A mapping key that is a list or a mapping (`{{a: 1}}: ...`): no field has such a name."""

    def __init__(self, line: int) -> None:
        self.line = line


def _to_located(node: yaml.Node) -> _Located:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise _ComplexKey(k.start_mark.line + 1)
        return _Located({k.value: _to_located(v) for k, v in node.value}, line)
    if isinstance(node, yaml.SequenceNode):
        return _Located([_to_located(v) for v in node.value], line)
    loader = yaml.SafeLoader("")
    try:
        value = loader.construct_object(node, deep=True)
    finally:
        loader.dispose()
    return _Located(value, line)


def _load_yaml(path: Path) -> _Located:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(path, "file not found") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ScenarioError(path, f"invalid YAML: {problem}", line=line) from None
    if root is None:
        raise ScenarioError(path, "file is empty; expected a mapping")
    try:
        return _to_located(root)
    except _ComplexKey as exc:
        raise ScenarioError(path, "a key is a list or a mapping; expected a name (is a "
                            "'{' doubled?)", line=exc.line) from None


def did_you_mean(name: str, known: tuple[str, ...] | list[str]) -> str:
    """"did you mean 'x'? " for the known name closest to `name` (case aside), or ""."""
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f"did you mean {lowered[close[0]]!r}? " if close else ""


class _Fields:
    """Typed access to a located mapping, raising errors that name the field path and line."""

    def __init__(self, path: Path, located: _Located, prefix: str = "") -> None:
        self.path, self.located, self.prefix = path, located, prefix
        if not isinstance(located.value, dict):
            raise self.error(prefix or "(top level)", "expected a mapping", located.line)

    def error(self, field: str, message: str, line: int | None = None) -> ScenarioError:
        return ScenarioError(self.path, message, line=line or self.located.line, field=field)

    def name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def get(self, key: str) -> _Located | None:
        return self.located.value.get(key)

    def only(self, *known: str) -> None:
        """Refuse a key that is not one of `known`: a misspelt key (`PUE:` for `pue:`) would
        otherwise be ignored and change results without a word. A key starting with `x-` is
        the writer's own annotation, left alone."""
        for key, item in self.located.value.items():
            text = str(key)
            if text in known or text.startswith("x-"):
                continue
            raise self.error(self.name(text), f"unknown key; {did_you_mean(text, known)}"
                             f"expected one of {', '.join(known)} (or x-... for your own "
                             "notes)", item.line)

    def require(self, key: str) -> _Located:
        item = self.get(key)
        if item is None or item.value is None:
            raise self.error(self.name(key), "missing; it is required")
        return item

    def number(self, key: str, *, default: float | None = None, minimum: float | None = None,
               positive: bool = False) -> float:
        item = self.get(key)
        if item is None or item.value is None:
            if default is None:
                raise self.error(self.name(key), "missing; expected a number")
            return default
        value = item.value
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise self.error(self.name(key), f"expected a number, got {value!r}", item.line)
        if positive and value <= 0:
            raise self.error(self.name(key), f"expected a number > 0, got {value!r}", item.line)
        if minimum is not None and value < minimum:
            raise self.error(self.name(key), f"expected a number >= {minimum}, got {value!r}",
                             item.line)
        return float(value)

    def number_or_none(self, key: str, *, default: float, minimum: float | None = None,
                       positive: bool = False) -> float | None:
        """`number`, except that an explicit `null` means none (missing: the default)."""
        item = self.get(key)
        if item is not None and item.value is None:
            return None
        return self.number(key, default=default, minimum=minimum, positive=positive)


CLUSTER_KEYS = ("energy_price", "pue", "restart_overhead_s", "gpu_types", "nodes",
                "carbon_intensity", "carbon_price", "carbon_cap_kg", "carbon_cap_window_s")
CARBON_COLUMN = "Carbon Intensity gCO₂eq/kWh (direct)"  # the green-dcc / Electricity Maps files


def read_cluster(path: Path, *, require_nodes: bool = True, wall_clock: bool = False) -> Cluster:
    """Read `cluster.yaml`; a generator template may leave out `nodes`. `wall_clock` (the live
    service): an hourly price's or intensity's rows hold at their own UTC timestamps, on Unix
    time."""
    doc = _Fields(path, _load_yaml(path))
    doc.only(*CLUSTER_KEYS)
    tariff = None
    price_item = doc.get("energy_price")
    if price_item is not None and isinstance(price_item.value, dict):
        tariff = read_tariff(path, _Fields(path, price_item, "energy_price"), wall_clock)
        price = tariff.mean(0.0, tariff.period_s - tariff.offset_s) if tariff.prices else 0.0
    else:
        price = doc.number("energy_price", minimum=0.0)
    pue = doc.number("pue", default=1.0, minimum=1.0)
    overhead = doc.number("restart_overhead_s", default=0.0, minimum=0.0)
    carbon = None
    carbon_item = doc.get("carbon_intensity")
    if carbon_item is not None:
        if not isinstance(carbon_item.value, dict):
            raise doc.error(doc.name("carbon_intensity"), "expected a mapping: {csv: FILE, "
                            "start: ..., column: ...} or {g_per_kwh: [...]}", carbon_item.line)
        carbon = read_carbon(path, _Fields(path, carbon_item, "carbon_intensity"), wall_clock)
    carbon_price = doc.number("carbon_price", default=0.0, minimum=0.0)
    if carbon_price and carbon is None:
        raise doc.error(doc.name("carbon_price"), "a carbon price needs the grid's "
                        "carbon_intensity (a series in gCO2eq/kWh)", doc.require(
                            "carbon_price").line)
    cap = None
    if doc.get("carbon_cap_kg") is not None:
        if carbon is None:
            raise doc.error(doc.name("carbon_cap_kg"), "a carbon cap needs the grid's "
                            "carbon_intensity (a series in gCO2eq/kWh)",
                            doc.require("carbon_cap_kg").line)
        cap = CarbonCap(doc.number("carbon_cap_kg", positive=True),
                        doc.number("carbon_cap_window_s", default=86400.0, positive=True))
    elif doc.get("carbon_cap_window_s") is not None:
        raise doc.error(doc.name("carbon_cap_window_s"), "a cap's window without a cap; "
                        "expected carbon_cap_kg beside it", doc.require(
                            "carbon_cap_window_s").line)

    types_item = doc.require("gpu_types")
    types_doc = _Fields(path, types_item, "gpu_types")
    gpu_types: dict[str, GpuType] = {}
    from_catalogue: list[str] = []
    idle: dict[str, float | str] = {}  # watts, or "catalogue" (filled in once nodes are known)
    restart: dict[str, float] = {}  # per-GPU watts while a job restarts
    for raw_name, located in types_item.value.items():
        name = canonical_gpu(str(raw_name)) or str(raw_name)
        if isinstance(located.value, dict) and "restart_power_w" in located.value:
            item = located.value["restart_power_w"]
            if isinstance(item.value, bool) or not isinstance(item.value, (int, float)) \
                    or item.value < 0:
                raise types_doc.error(f"gpu_types.{raw_name}.restart_power_w",
                                      f"expected watts >= 0 that one GPU draws while its job "
                                      f"restarts, got {item.value!r}", item.line)
            restart[name] = float(item.value)
        if isinstance(located.value, dict) and "idle_power_w" in located.value:
            item = located.value["idle_power_w"]
            field = f"gpu_types.{raw_name}.idle_power_w"
            if item.value == "catalogue" and canonical_gpu(name) is not None:
                idle[name] = "catalogue"
            elif isinstance(item.value, bool) or not isinstance(item.value, (int, float)) \
                    or item.value < 0:
                raise types_doc.error(field, f"expected watts >= 0 (or 'catalogue' for a "
                                      f"catalogued GPU type), got {item.value!r}", item.line)
            else:
                idle[name] = float(item.value)
        if located.value is None or (isinstance(located.value, dict)
                                     and "node_power_w" not in located.value):
            if canonical_gpu(name) is None:
                raise types_doc.error(f"gpu_types.{raw_name}.node_power_w",
                                      "missing; expected a list of watts for 1..k busy GPUs "
                                      "(only catalogued GPU types may leave it out: "
                                      f"{', '.join(gpu_catalogue())})", located.line)
            from_catalogue.append(name)
            gpu_types[name] = GpuType(name, ())
            continue
        entry = _Fields(path, located, f"gpu_types.{raw_name}")
        entry.only("node_power_w", "idle_power_w", "restart_power_w")
        power_item = entry.require("node_power_w")
        power = power_item.value
        if not isinstance(power, list) or not power:
            raise entry.error(entry.name("node_power_w"),
                              "expected a non-empty list of watts for 1..k busy GPUs",
                              power_item.line)
        watts = []
        for i, w in enumerate(power):
            if isinstance(w.value, bool) or not isinstance(w.value, (int, float)) or w.value < 0:
                raise entry.error(f"{entry.name('node_power_w')}[{i}]",
                                  f"expected watts >= 0, got {w.value!r}", w.line)
            watts.append(float(w.value))
        gpu_types[name] = GpuType(name, tuple(watts))
    if not gpu_types:
        raise types_doc.error("gpu_types", "expected at least one GPU type", types_item.line)

    if not require_nodes and doc.get("nodes") is None:
        return Cluster(_complete(path, types_item.line, gpu_types, from_catalogue, idle,
                                 restart, []), (), price, pue, overhead, tariff, carbon,
                       carbon_price, cap)
    nodes_item = doc.require("nodes")
    if not isinstance(nodes_item.value, list) or not nodes_item.value:
        raise doc.error("nodes", "expected a non-empty list of {name, gpu_type, gpus}",
                        nodes_item.line)
    nodes: list[Node] = []
    seen: set[str] = set()
    for i, located in enumerate(nodes_item.value):
        entry = _Fields(path, located, f"nodes[{i}]")
        entry.only("name", "gpu_type", "gpus", "group")
        name = str(entry.require("name").value)
        if name in seen:
            raise entry.error(entry.name("name"), f"duplicate node name {name!r}")
        seen.add(name)
        type_item = entry.require("gpu_type")
        gpu_type = canonical_gpu(str(type_item.value)) or str(type_item.value)
        if gpu_type not in gpu_types:
            raise entry.error(entry.name("gpu_type"),
                              f"unknown GPU type {gpu_type!r}; expected one of "
                              f"{', '.join(sorted(gpu_types))}", type_item.line)
        gpus_item = entry.require("gpus")
        gpus = gpus_item.value
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise entry.error(entry.name("gpus"), f"expected an integer >= 1, got {gpus!r}",
                              gpus_item.line)
        covered = len(gpu_types[gpu_type].node_power_w)
        if gpu_type in from_catalogue:
            covered = gpus
        if covered < gpus:
            raise entry.error(entry.name("gpus"),
                              f"node has {gpus} GPUs but gpu_types.{gpu_type}.node_power_w "
                              f"lists only {covered} values; expected one per busy-GPU count",
                              gpus_item.line)
        group = None
        group_item = entry.get("group")
        if group_item is not None:
            if not isinstance(group_item.value, (str, int)) or isinstance(group_item.value, bool) \
                    or not str(group_item.value).strip():
                raise entry.error(entry.name("group"), f"expected the name of the node's group "
                                  f"(a rack or switch), got {group_item.value!r}",
                                  group_item.line)
            group = str(group_item.value).strip()
        nodes.append(Node(name, gpu_type, gpus, group))
    cluster = Cluster(_complete(path, types_item.line, gpu_types, from_catalogue, idle,
                                restart, nodes), tuple(nodes), price, pue, overhead, tariff,
                      carbon, carbon_price, cap)
    try:
        _ = cluster.as_planned  # the price and carbon series must combine (same steps)
    except ValueError as exc:
        raise doc.error(doc.name("carbon_intensity"), str(exc), carbon_item.line
                        if carbon_item is not None else None) from None
    return cluster


def read_tariff(path: Path, doc: "_Fields", wall_clock: bool = False) -> Tariff:
    """`energy_price` as a mapping: hourly prices from a CSV (the green-dcc series: a timestamp
    column and a price column, per MWh by default) or listed inline; negative prices allowed.

        energy_price: {csv: prices.csv, start: "2023-07-12 00:00", unit: MWh, scale: 0.92}
        energy_price: {eur_per_kwh: [0.21, 0.18, -0.02, ...], step_s: 3600, offset_s: 0}

    `start` (a timestamp prefix found in the first column, or a row number from 0) is the row
    at simulation time 0; `scale` multiplies every price (e.g. USD to EUR)."""
    doc.only("csv", "start", "unit", "scale", "eur_per_kwh", "step_s", "offset_s", "column")
    unit_item = doc.get("unit")
    unit = str(unit_item.value) if unit_item is not None else None
    if unit not in (None, "MWh", "kWh"):
        raise doc.error(doc.name("unit"), f"expected MWh or kWh, got {unit!r}",
                        unit_item.line if unit_item is not None else None)
    per_kwh = 1.0 if unit == "kWh" else 1e-3  # the green-dcc files are per MWh
    return _read_series(path, doc, "eur_per_kwh", "a price", per_kwh, None, minimum=None,
                        wall_clock=wall_clock)


def read_carbon(path: Path, doc: "_Fields", wall_clock: bool = False) -> Tariff:
    """`carbon_intensity`: the grid's hourly carbon intensity in gCO2eq per kWh, from a CSV
    (the Electricity Maps files green-dcc redistributes; `column` names the intensity, by
    default the direct one) or inline, with the time handling of `energy_price`
    (`read_tariff`). An intensity is never negative.

        carbon_intensity: {csv: carbon_US-CAL-CISO_2023_hourly.csv, start: "2023-05-07"}
        carbon_intensity: {g_per_kwh: [250, 180, 90, ...], step_s: 3600, offset_s: 0}"""
    doc.only("csv", "start", "scale", "g_per_kwh", "step_s", "offset_s", "column")
    return _read_series(path, doc, "g_per_kwh", "an intensity in gCO2eq/kWh", 1.0,
                        CARBON_COLUMN, minimum=0.0, wall_clock=wall_clock)


def _read_series(path: Path, doc: "_Fields", inline_key: str, what: str, per_unit: float,
                 default_column: str | None, minimum: float | None,
                 wall_clock: bool = False) -> Tariff:
    """A step series (`Tariff`) from `doc`: listed inline under `inline_key`, or read from
    the CSV column `column` (default `default_column`, else the last), each value times
    `per_unit` and `scale`, none below `minimum`; `start`, `step_s` and `offset_s` place it
    in time."""
    step = doc.number("step_s", default=3600.0, positive=True)
    scale = doc.number("scale", default=1.0)
    inline = doc.get(inline_key)
    if inline is not None:
        values = inline.value if isinstance(inline.value, list) else None
        out = []
        for i, v in enumerate(values or []):
            if isinstance(v.value, bool) or not isinstance(v.value, (int, float)) \
                    or not math.isfinite(v.value) or (minimum is not None
                                                       and v.value < minimum):
                raise doc.error(f"{doc.name(inline_key)}[{i}]",
                                f"expected {what}, got {v.value!r}", v.line)
            out.append(float(v.value) * scale)
        if not out:
            raise doc.error(doc.name(inline_key), "expected a non-empty list of values",
                            inline.line)
        offset = doc.number("offset_s", default=0.0, minimum=0.0)
        return Tariff(tuple(out), step, offset)
    csv_item = doc.require("csv")
    csv_path = path.parent / str(csv_item.value)
    stamps, out = [], []
    try:
        handle = csv_path.open(newline="", encoding="utf-8")
    except OSError:
        raise doc.error(doc.name("csv"), f"cannot read {csv_path}", csv_item.line) from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header or len(header) < 2:
            raise ScenarioError(csv_path, f"expected a header with a timestamp column and "
                                f"{what}", line=1)
        names = [h.strip() for h in header]
        column_item = doc.get("column")
        column = str(column_item.value) if column_item is not None else (
            default_column if default_column in names else names[-1])
        if column not in names:
            raise ScenarioError(csv_path, f"no column {column!r}; expected one of "
                                f"{', '.join(names)}", line=1, field=column)
        index = names.index(column)
        for row in reader:
            if not row or all(not c.strip() for c in row):
                continue
            value = _float(csv_path, reader.line_num, column, row[index] if index < len(
                row) else "")
            if minimum is not None and value < minimum:
                raise ScenarioError(csv_path, f"expected {what} of at least {minimum:g}, "
                                    f"got {value:g}", line=reader.line_num, field=column)
            out.append(value * per_unit * scale)
            stamps.append(row[0].strip())
    if not out:
        raise ScenarioError(csv_path, "no values; expected one row per step", line=2)
    if wall_clock:  # each row at its own timestamp: Unix time t reads the row covering t
        if doc.get("start") is not None:
            raise doc.error(doc.name("start"), "the live service places each row at its own "
                            "timestamp; expected no start here", doc.require("start").line)
        first_stamp = _unix_time(csv_path, stamps[0], header[0])
        series = Tariff(tuple(out), step)
        return Tariff(tuple(out), step, (-first_stamp) % series.period_s)
    start_item = doc.get("start")
    first = 0
    if start_item is not None:
        value = start_item.value
        if isinstance(value, int) and not isinstance(value, bool):
            first = value
        else:
            matches = [i for i, stamp in enumerate(stamps) if stamp.startswith(str(value))]
            if not matches:
                raise doc.error(doc.name("start"), f"no row of {csv_path.name} starts with "
                                f"{str(value)!r}; expected a timestamp like {stamps[0]!r}",
                                start_item.line)
            first = matches[0]
        if not 0 <= first < len(out):
            raise doc.error(doc.name("start"), f"expected a row from 0 to {len(out) - 1}, "
                            f"got {first}", start_item.line)
    return Tariff(tuple(out), step, first * step)


def _unix_time(path: Path, stamp: str, column: str) -> float:
    """A CSV's first timestamp (ISO 8601; UTC unless it says otherwise) as Unix time."""
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        raise ScenarioError(path, f"expected a timestamp like 2023-05-07 00:00:00+00:00, got "
                            f"{stamp!r}", line=2, field=column.strip()) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _complete(path: Path, line: int, *args) -> dict[str, GpuType]:
    try:
        return _complete_types(*args)
    except ValueError as exc:
        field, message = str(exc).split(": ", 1)
        raise ScenarioError(path, message, line=line, field=field) from None


def _complete_types(gpu_types: dict[str, GpuType], from_catalogue: list[str],
                    idle: dict[str, float | str], restart: dict[str, float],
                    nodes: list[Node]) -> dict[str, GpuType]:
    """Catalogue power for the largest node of each catalogued type that left it out, and the
    idle and restart draws of every type that set them."""
    out = {}
    for name, gt in gpu_types.items():
        spec = gpu_catalogue().get(name)
        k = max((n.gpus for n in nodes if n.gpu_type == name),
                default=spec.gpus_per_node if spec else len(gt.node_power_w))
        power = gt.node_power_w
        if name in from_catalogue:
            assert spec is not None  # only catalogued types may leave their power out
            power = spec.node_power_w(k)
        idle_w = idle.get(name, 0.0)
        if idle_w == "catalogue":
            assert spec is not None  # 'catalogue' is accepted for catalogued types only
            idle_w = spec.host_w + k * spec.idle_w
        assert isinstance(idle_w, float | int)
        if power and idle_w > power[0]:
            raise ValueError(f"gpu_types.{name}.idle_power_w: {idle_w} W exceeds the draw with "
                             f"one busy GPU ({power[0]} W); expected at most that")
        out[name] = GpuType(name, power, float(idle_w), restart.get(name))
    return out


# --------------------------------------------------------------------------- CSV with lines
def csv_rows(path: Path, columns: tuple[str, ...], *, pad_short: bool = False,
             optional: tuple[str, ...] = (), strict: bool = False,
             known: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, row of the required columns, stripped) and check the header has
    every required column. A row with too few values is an error, or with `pad_short` is
    padded with empty values (so that the caller's field check reports or skips it).
    `optional` columns are yielded too, empty when the header lacks them. `strict`: any
    other column is an error (a misspelt optional column would be ignored), except the
    `known` ones (accepted, not yielded) and one named x-... (the writer's own)."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(path, "file not found") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ScenarioError(path, f"file is empty; expected a header with {', '.join(columns)}",
                                line=1)
        header = [h.strip() for h in header]
        for column in columns:
            if column not in header:
                raise ScenarioError(path, f"missing column; expected columns {', '.join(columns)}",
                                    line=1, field=column)
        if strict:
            accepted = columns + optional + known
            for column in header:
                if column not in accepted and not column.startswith("x-"):
                    raise ScenarioError(path, f"unknown column; "
                                        f"{did_you_mean(column, accepted)}expected columns "
                                        f"{', '.join(accepted)} (or x-... for your own "
                                        "notes)", line=1, field=column)
        index = {c: header.index(c) for c in columns + optional if c in header}
        absent = {c: "" for c in optional if c not in header}
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) < len(header):
                if not pad_short:
                    raise ScenarioError(path, f"expected {len(header)} values, got {len(row)}",
                                        line=line)
                row = row + [""] * (len(header) - len(row))
            yield line, {**absent, **{c: row[i].strip() for c, i in index.items()}}


def _float(path: Path, line: int, field: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(path, f"expected a number, got {text!r}", line=line,
                            field=field) from None
    if not math.isfinite(value):
        raise ScenarioError(path, f"expected a finite number, got {text!r}", line=line, field=field)
    return value


def _int(path: Path, line: int, field: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ScenarioError(path, f"expected an integer, got {text!r}", line=line,
                            field=field) from None


def read_profiles(path: Path, cluster: Cluster) -> Profiles:
    """Rows of (profile, gpu_type, gpus, seconds_per_epoch); a configuration may instead have one
    row per GPU power limit, with `power_limit_w` and the measured `gpu_power_w`: the highest
    limit is the default (its speed is the configuration's), the others are options."""
    table: dict[str, dict[tuple[str, int], float]] = {}
    levels: dict[str, dict[tuple[str, int], list[PowerLevel]]] = {}
    power: dict[str, dict[tuple, float]] = {}
    startup: dict[str, dict[tuple, float]] = {}
    gangs: dict[str, dict[tuple[str, int, int], float]] = {}
    spread: dict[str, dict[tuple[str, int, int], float]] = {}
    first_line: dict[tuple[str, tuple], tuple[int, bool]] = {}
    config: Any
    for line, row in csv_rows(path, PROFILE_COLUMNS,
                              optional=POWER_LIMIT_COLUMNS + (OWN_POWER_COLUMN, STARTUP_COLUMN,
                                                              NODES_COLUMN, SPREAD_COLUMN),
                              strict=True, known=MEASURED_COLUMNS):
        gpu_type = canonical_gpu(row["gpu_type"]) or row["gpu_type"]
        if gpu_type not in cluster.gpu_types:
            raise ScenarioError(path, f"unknown GPU type {gpu_type!r}; expected one of "
                                f"{', '.join(sorted(cluster.gpu_types))}", line=line,
                                field="gpu_type")
        gpus = _int(path, line, "gpus", row["gpus"])
        if gpus < 1:
            raise ScenarioError(path, f"expected an integer >= 1, got {gpus}", line=line,
                                field="gpus")
        spe = _float(path, line, "seconds_per_epoch", row["seconds_per_epoch"])
        if spe <= 0:
            raise ScenarioError(path, f"expected a number > 0, got {spe}", line=line,
                                field="seconds_per_epoch")
        if not row["profile"]:
            raise ScenarioError(path, "expected a profile name", line=line, field="profile")
        nodes = _gang_nodes(path, line, row[NODES_COLUMN], cluster, gpu_type, gpus)
        config = config_key(gpu_type, gpus, nodes)
        limited = bool(row["power_limit_w"])
        if row[SPREAD_COLUMN]:
            slowdown = _float(path, line, SPREAD_COLUMN, row[SPREAD_COLUMN])
            if nodes == 1 or not slowdown >= 1.0 or not math.isfinite(slowdown):
                raise ScenarioError(path, "expected, on a gang row (nodes 2 or more), a factor "
                                    ">= 1 by which its seconds per epoch grow when its nodes "
                                    f"span node groups; got {row[SPREAD_COLUMN]!r}"
                                    + (" on a one-node row" if nodes == 1 else ""),
                                    line=line, field=SPREAD_COLUMN)
            spread.setdefault(row["profile"], {})[config] = slowdown
        if limited and nodes > 1:
            raise ScenarioError(path, "a gang runs at the default power limit; give one row "
                                "without power_limit_w", line=line, field="power_limit_w")
        for column, found, low, what, instead in (
                (OWN_POWER_COLUMN, power, 0.0, "the draw of each GPU in watts, a number > 0",
                 "gives its draw per GPU in gpu_power_w"),
                (STARTUP_COLUMN, startup, None, "the start-up in seconds, a number >= 0",
                 "takes the cluster's restart_overhead_s")):
            if not row[column]:
                continue
            if limited:
                raise ScenarioError(path, f"a row with a power limit {instead}; leave {column} "
                                    f"empty", line=line, field=column)
            value = _float(path, line, column, row[column])
            if value < 0 or value == low:
                raise ScenarioError(path, f"expected {what}, got {row[column]}", line=line,
                                    field=column)
            found.setdefault(row["profile"], {})[config] = value
        seen = first_line.setdefault((row["profile"], config), (line, limited))
        if seen[1] != limited:
            raise ScenarioError(path, f"({row['profile']}, {gpu_type}, {gpus}) mixes rows with and "
                                f"without power_limit_w (first on line {seen[0]}); give every row "
                                f"of a configuration its limit, the default one included",
                                line=line, field="power_limit_w")
        if not limited:
            if seen[0] != line:
                what = f"{gpus}" if nodes == 1 else f"{gpus} per node, {nodes} nodes"
                raise ScenarioError(path, f"duplicate row for ({row['profile']}, {gpu_type}, "
                                    f"{what})", line=line, field="gpus")
            (gangs if nodes > 1 else table).setdefault(row["profile"], {})[config] = spe
            continue
        limit = _float(path, line, "power_limit_w", row["power_limit_w"])
        if not row["gpu_power_w"]:
            raise ScenarioError(path, "expected the measured draw per GPU at this power limit",
                                line=line, field="gpu_power_w")
        watts = _float(path, line, "gpu_power_w", row["gpu_power_w"])
        if limit <= 0 or watts < 0:
            field_name = "power_limit_w" if limit <= 0 else "gpu_power_w"
            raise ScenarioError(path, f"expected a positive number of watts, got "
                                f"{row[field_name]}", line=line, field=field_name)
        known = levels.setdefault(row["profile"], {}).setdefault(config, [])
        if any(lv.limit_w == limit for lv in known):
            raise ScenarioError(path, f"duplicate row for ({row['profile']}, {gpu_type}, {gpus}) "
                                f"at {limit:g} W", line=line, field="power_limit_w")
        known.append(PowerLevel(limit, spe, watts))
    for profile, configs in levels.items():
        for config, known in configs.items():
            table.setdefault(profile, {})[config] = max(known, key=lambda lv: lv.limit_w) \
                .seconds_per_epoch
    return Profiles(table, {p: {c: tuple(ls) for c, ls in cs.items()}
                            for p, cs in levels.items()}, power, startup, gangs, spread)


def _gang_nodes(path: Path, line: int, text: str, cluster: Cluster, gpu_type: str,
                gpus: int) -> int:
    """The `nodes` of a profile row (1 when empty); a gang (2 or more) must fit the cluster:
    its GPUs per node on some node of its type, and enough such nodes."""
    if not text:
        return 1
    nodes = _int(path, line, NODES_COLUMN, text)
    if nodes < 1:
        raise ScenarioError(path, f"expected a node count >= 1, got {nodes}", line=line,
                            field=NODES_COLUMN)
    if nodes == 1 or not cluster.nodes:  # a generator template's cluster has no nodes yet
        return nodes
    sizes = [n.gpus for n in cluster.nodes if n.gpu_type == gpu_type]
    if not any(size >= gpus for size in sizes):
        raise ScenarioError(path, f"a gang of {gpus} {gpu_type} GPUs per node, but the largest "
                            f"{gpu_type} node has {max(sizes, default=0)}", line=line,
                            field="gpus")
    holding = sum(1 for size in sizes if size >= gpus)
    if holding < nodes:
        raise ScenarioError(path, f"a gang over {nodes} nodes, but only {holding} {gpu_type} "
                            f"node{'s' if holding != 1 else ''} with {gpus} GPUs or more",
                            line=line, field=NODES_COLUMN)
    return nodes


def feasible_configs(cluster: Cluster, configs: dict[tuple[str, int], float] | Any) -> list:
    """Configurations of a profile that the cluster can host: a (type, GPUs) one on one node
    of its type with that many GPUs; a gang's (type, GPUs per node, nodes) on that many."""
    largest: dict[str, int] = {}
    for node in cluster.nodes:
        largest[node.gpu_type] = max(largest.get(node.gpu_type, 0), node.gpus)
    return [c for c in configs if c[1] <= largest.get(c[0], 0) and (
        len(c) < 3 or sum(1 for n in cluster.nodes
                          if n.gpu_type == c[0] and n.gpus >= c[1]) >= c[-1])]


def read_workload(path: Path, cluster: Cluster, profiles: Profiles) -> tuple[Job, ...]:
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for line, row in csv_rows(path, WORKLOAD_COLUMNS, optional=WORKLOAD_FLAGS):
        job_id = row["job_id"]
        if not job_id:
            raise ScenarioError(path, "expected a job id", line=line, field="job_id")
        if job_id in seen:
            raise ScenarioError(path, f"duplicate job id {job_id!r} (first on line {seen[job_id]})",
                                line=line, field="job_id")
        seen[job_id] = line
        submit = _float(path, line, "submit_time", row["submit_time"])
        if submit < 0:
            raise ScenarioError(path, f"expected a time >= 0, got {submit}", line=line,
                                field="submit_time")
        due = _float(path, line, "due_date", row["due_date"])
        if due < submit:
            raise ScenarioError(path, f"due date {due} is before the submission time {submit}",
                                line=line, field="due_date")
        weight = _float(path, line, "tardiness_weight", row["tardiness_weight"])
        if weight < 0:
            raise ScenarioError(path, f"expected a weight >= 0, got {weight}", line=line,
                                field="tardiness_weight")
        epochs = _float(path, line, "epochs", row["epochs"])
        if epochs <= 0:
            raise ScenarioError(path, f"expected epochs > 0, got {epochs}", line=line,
                                field="epochs")
        profile = row["profile"]
        if profile not in profiles.table:
            raise ScenarioError(path, f"unknown profile {profile!r}; not in {PROFILES_FILE}",
                                line=line, field="profile")
        if not feasible_configs(cluster, profiles.table[profile]) \
                and profile not in profiles.gangs:
            raise ScenarioError(path, f"profile {profile!r} has no allowed configuration on any "
                                f"node of the cluster", line=line, field="profile")
        flags = {name: _flag(path, line, name, row[name], default)
                 for name, default in WORKLOAD_FLAGS_DEFAULTS.items()}
        jobs.append(Job(job_id, submit, due, weight, epochs, profile, **flags))
    return tuple(sorted(jobs, key=lambda j: j.submit_time))


def _flag(path: Path, line: int, name: str, text: str, default: bool) -> bool:
    """An optional true/false column: empty means the default."""
    value = text.strip().lower()
    if not value:
        return default
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise ScenarioError(path, f"expected true or false, got {text!r}", line=line, field=name)


def load_scenario(directory: str | Path) -> Scenario:
    """Read and validate a scenario directory; raise `ScenarioError` on the first problem."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ScenarioError(directory, "not a directory; expected a scenario directory with "
                            f"{CLUSTER_FILE}, {PROFILES_FILE} and {WORKLOAD_FILE}")
    cluster = read_cluster(directory / CLUSTER_FILE)
    profiles = read_profiles(directory / PROFILES_FILE, cluster)
    jobs = read_workload(directory / WORKLOAD_FILE, cluster, profiles)
    return Scenario(cluster, profiles, jobs, name=directory.name)


# --------------------------------------------------------------------------- writing
def _number(x: float) -> str:
    """Shortest text that reads back as the same float (integers without a trailing .0)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def cluster_document(cluster: Cluster) -> dict:
    price: float | dict = cluster.energy_price
    if cluster.tariff is not None:
        t = cluster.tariff
        price = {"eur_per_kwh": list(t.prices), "step_s": t.step_s, "offset_s": t.offset_s}
    carbon: dict = {}
    if cluster.carbon is not None:
        c = cluster.carbon
        carbon["carbon_intensity"] = {"g_per_kwh": list(c.prices), "step_s": c.step_s,
                                      "offset_s": c.offset_s}
    if cluster.carbon_price:
        carbon["carbon_price"] = cluster.carbon_price
    if cluster.carbon_cap is not None:
        carbon["carbon_cap_kg"] = cluster.carbon_cap.kg
        carbon["carbon_cap_window_s"] = cluster.carbon_cap.window_s
    return {
        "energy_price": price,
        **carbon,
        "pue": cluster.pue,
        "restart_overhead_s": cluster.restart_overhead_s,
        "gpu_types": {t.name: {"node_power_w": list(t.node_power_w),
                               **({"idle_power_w": t.idle_w} if t.idle_w else {}),
                               **({"restart_power_w": t.restart_w}
                                  if t.restart_w is not None else {})}
                      for t in cluster.gpu_types.values()},
        "nodes": [{"name": n.name, "gpu_type": n.gpu_type, "gpus": n.gpus,
                   **({"group": n.group} if n.group is not None else {})}
                  for n in cluster.nodes],
    }


def write_scenario(scenario: Scenario, directory: str | Path) -> None:
    """Write the three scenario files; `load_scenario` reads back an equal scenario."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / CLUSTER_FILE).open("w", encoding="utf-8") as f:
        yaml.safe_dump(cluster_document(scenario.cluster), f, sort_keys=False)
    with (directory / PROFILES_FILE).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        profiles = scenario.profiles
        own = {name: values for name, values in ((OWN_POWER_COLUMN, profiles.power),
                                                 (STARTUP_COLUMN, profiles.startup)) if values}
        ganged = bool(profiles.gangs)
        spread = bool(profiles.spread_slowdown)
        w.writerow(PROFILE_COLUMNS + (POWER_LIMIT_COLUMNS if profiles.levels else ())
                   + tuple(own) + ((NODES_COLUMN,) if ganged else ())
                   + ((SPREAD_COLUMN,) if spread else ()))
        nodes_cell = [""] * (ganged + spread)
        blanks = ["", ""] if profiles.levels else []

        def plain_row(profile: str, key: tuple, spe: float, nodes: list[str]) -> None:
            """A row without a power limit: its own draw and start-up where given."""
            mine = [values.get(profile, {}).get(key) for values in own.values()]
            w.writerow([profile, key[0], key[1], _number(spe)] + blanks
                       + ["" if v is None else _number(v) for v in mine] + nodes)

        for profile, configs in profiles.table.items():
            for (gpu_type, gpus), spe in configs.items():
                for lv in profiles.power_levels(profile, (gpu_type, gpus)):
                    w.writerow([profile, gpu_type, gpus, _number(lv.seconds_per_epoch),
                                _number(lv.limit_w), _number(lv.gpu_power_w)]
                               + [""] * len(own) + nodes_cell)
                if not profiles.power_levels(profile, (gpu_type, gpus)):
                    plain_row(profile, (gpu_type, gpus), spe, nodes_cell)
        for profile, gang_configs in profiles.gangs.items():
            for key, spe in gang_configs.items():
                slowdown = profiles.spread_slowdown.get(profile, {}).get(key)
                plain_row(profile, key, spe, [str(key[2])] + (
                    ["" if slowdown is None else _number(slowdown)] if spread else []))
    with (directory / WORKLOAD_FILE).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        flags = [name for name, default in WORKLOAD_FLAGS_DEFAULTS.items()
                 if any(getattr(j, name) != default for j in scenario.jobs)]
        w.writerow(WORKLOAD_COLUMNS + tuple(flags))
        for j in scenario.jobs:
            w.writerow([j.job_id, _number(j.submit_time), _number(j.due_date),
                        _number(j.tardiness_weight), _number(j.epochs), j.profile]
                       + [str(getattr(j, name)).lower() for name in flags])


# Public names for other readers of located YAML (the service configuration).
load_located_yaml = _load_yaml
Fields = _Fields
