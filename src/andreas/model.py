"""Plain typed data for a scenario: GPU types, nodes, cluster, profiles and jobs.

Everything here is immutable and free of I/O, so policies, the simulator and the
service can share it without copying or defensive checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping


@dataclass(frozen=True)
class GpuType:
    """A GPU model and the power its node draws with 1..k busy GPUs (index b-1).

    `idle_w` is what a node with no busy GPU draws: 0 by default (switched off, as in the
    paper); a cluster whose nodes stay powered sets it. `restart_w`, if set, is what one GPU
    draws while its job restarts (interpreter, data, CUDA, checkpoint): well below a training
    GPU's draw (measured on an H200 in docs/service-measured.md). Unset, a restarting GPU
    counts as busy (the paper).
    """

    name: str
    node_power_w: tuple[float, ...]
    idle_w: float = 0.0
    restart_w: float | None = None

    def power_w(self, busy_gpus: int) -> float:
        """Node draw in watts with `busy_gpus` busy; `idle_w` (default 0 W: off) when none."""
        return self.idle_w if busy_gpus <= 0 else self.node_power_w[busy_gpus - 1]

    def restart_saving_w(self, gpus: int) -> float:
        """Watts below the table's draw while a job restarts on `gpus` of these GPUs: each
        draws `restart_w` instead of its share of a full node's draw (exact for tables linear
        in the busy count, as GPU-board tables are)."""
        if self.restart_w is None or not self.node_power_w:
            return 0.0
        return gpus * (self.node_power_w[-1] / len(self.node_power_w) - self.restart_w)

    @cached_property
    def busy_gpu_w(self) -> float:
        """What one busy GPU adds to the table's draw: the table's mean step from one busy GPU
        to all (power tables are close to linear in the busy count); on a one-GPU node, its
        draw above idle (the host's share is then counted as the GPU's). A job whose profile
        gives its own draw per GPU (`Profiles.power`) draws that instead, on each of its GPUs
        (`andreas.cost.own_power_saved_w`)."""
        table = self.node_power_w
        if len(table) >= 2:
            return (table[-1] - table[0]) / (len(table) - 1)
        return (table[0] - self.idle_w) if table else 0.0

    def extra_w(self, busy_gpus: int) -> float:
        """Draw above idle with `busy_gpus` busy: what running jobs add, and what a plan can
        change (the idle draw is paid whatever the plan)."""
        return self.power_w(busy_gpus) - self.idle_w


@dataclass(frozen=True)
class Tariff:
    """A time-varying energy price: `prices[i]` (EUR per kWh, may be negative) holds from
    `(i * step_s - offset_s)` to `((i + 1) * step_s - offset_s)` in simulation seconds, so
    time 0 falls `offset_s` into the series. Past its end the series repeats.

    A grid's carbon intensity is the same kind of series (`Cluster.carbon`: gCO2eq per kWh in
    `prices`, never negative): emissions integrate it as the energy cost integrates a price."""

    prices: tuple[float, ...]
    step_s: float = 3600.0
    offset_s: float = 0.0
    _cumulative: tuple[float, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        cumulative = [0.0]
        for p in self.prices:
            cumulative.append(cumulative[-1] + p * self.step_s)
        object.__setattr__(self, "_cumulative", tuple(cumulative))

    @property
    def period_s(self) -> float:
        return len(self.prices) * self.step_s

    def price_at(self, t: float) -> float:
        i = int(math.floor((t + self.offset_s) / self.step_s)) % len(self.prices)
        return self.prices[i]

    def _area(self, u: float) -> float:
        """Integral of the price from series time 0 to series time `u` (EUR/kWh x s)."""
        cycles, rest = divmod(u, self.period_s)
        i = min(int(rest // self.step_s), len(self.prices) - 1)
        within = self._cumulative[i] + self.prices[i] * (rest - i * self.step_s)
        return cycles * self._cumulative[-1] + within

    def integral(self, t0: float, t1: float) -> float:
        """Integral of the price over [t0, t1] in simulation seconds (EUR/kWh x s)."""
        return self._area(t1 + self.offset_s) - self._area(t0 + self.offset_s)

    def mean(self, t0: float, t1: float) -> float:
        return self.price_at(t0) if t1 <= t0 else self.integral(t0, t1) / (t1 - t0)

    def from_time(self, t0: float) -> "Tariff":
        """The same series on a clock whose 0 is `t0` (a forecast runs on times relative to
        its now): the price at t is this series' price at t0 + t."""
        return Tariff(self.prices, self.step_s, (self.offset_s + t0) % self.period_s)

    def next_change(self, t: float) -> float:
        """The first price boundary strictly after `t`."""
        u = t + self.offset_s
        return (math.floor(u / self.step_s + 1e-9) + 1) * self.step_s - self.offset_s

    def changes(self, t0: float, t1: float) -> list[float]:
        out, t = [], self.next_change(t0)
        while t < t1:
            out.append(t)
            t = self.next_change(t)
        return out


@dataclass(frozen=True)
class Node:
    """A node: its GPUs, all of one type. `group` (optional, `cluster.yaml`) names the rack
    or switch it hangs off: a gang over nodes of more than one group may run slower
    (`Profiles.spread_slowdown`)."""

    name: str
    gpu_type: str
    gpus: int
    group: str | None = None


@dataclass(frozen=True)
class CarbonCap:
    """At most `kg` CO2eq emitted in each window of `window_s` seconds of simulation time
    ([0, window_s), [window_s, 2 window_s), ...: days by default). The drivers enforce it
    (`policies.carbon_cap`); runs report how far they went over where they could not."""

    kg: float
    window_s: float = 86400.0

    def window_of(self, t: float) -> tuple[float, float]:
        """The window [start, end) that holds time `t`."""
        start = math.floor(t / self.window_s + 1e-9) * self.window_s
        return start, start + self.window_s


@dataclass(frozen=True)
class Cluster:
    """Hardware and tariff: what a scenario's `cluster.yaml` describes."""

    gpu_types: Mapping[str, GpuType]
    nodes: tuple[Node, ...]
    energy_price: float  # EUR per kWh (with a tariff: its mean, for reports)
    pue: float = 1.0
    restart_overhead_s: float = 0.0
    tariff: Tariff | None = None  # a time-varying price; None: `energy_price` always
    carbon: Tariff | None = None  # the grid's carbon intensity (gCO2eq/kWh); None: unknown
    carbon_price: float = 0.0  # EUR per tonne CO2eq emitted, in the objective (0: not priced)
    carbon_cap: CarbonCap | None = None  # emissions allowed per window; None: no cap

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_types", MappingProxyType(dict(self.gpu_types)))

    def __reduce__(self):  # read-only mappings do not pickle; worker processes need this
        return (Cluster, (dict(self.gpu_types), self.nodes, self.energy_price, self.pue,
                          self.restart_overhead_s, self.tariff, self.carbon, self.carbon_price,
                          self.carbon_cap))

    @cached_property
    def total_gpus(self) -> int:
        """GPUs of all nodes (read at every decision by the load estimates)."""
        return sum(n.gpus for n in self.nodes)

    @cached_property
    def node_positions(self) -> Mapping[str, int]:
        """Each node's index by name (read-only; the plan check reads it at every decision)."""
        return MappingProxyType({node.name: i for i, node in enumerate(self.nodes)})

    def node_index(self, name: str) -> int:
        return self.node_positions[name]

    @cached_property
    def _groups(self) -> Mapping[str, str | None] | None:
        """Each node's group by name; None when no node names one."""
        if all(n.group is None for n in self.nodes):
            return None
        return MappingProxyType({n.name: n.group for n in self.nodes})

    def group(self, name: str) -> str | None:
        """The group node `name` belongs to; None if it names none."""
        groups = self._groups
        return None if groups is None else groups.get(name)

    def spans_groups(self, nodes: tuple[str, ...]) -> bool:
        """Whether a gang on `nodes` spans more than one node group (nodes without a group
        count as one group of their own). False on a cluster that names no groups."""
        groups = self._groups
        if groups is None or len(nodes) < 2:
            return False
        first = groups.get(nodes[0])
        return any(groups.get(n) != first for n in nodes[1:])

    def eur_per_joule(self, t0: float | None = None, t1: float | None = None) -> float:
        """Price of one joule drawn by IT equipment, facility overhead (PUE) included; with a
        tariff, the mean over [t0, t1] (or at t0)."""
        if self.tariff is None or t0 is None:
            return self.energy_price * self.pue / 3.6e6
        return self.tariff.mean(t0, t0 if t1 is None else t1) * self.pue / 3.6e6

    def energy_eur(self, watts: float, t0: float, t1: float) -> float:
        """EUR for drawing `watts` from t0 to t1: the price integrated over the interval."""
        if self.tariff is None:
            return watts * (t1 - t0) * self.eur_per_joule()
        return watts * self.tariff.integral(t0, t1) * self.pue / 3.6e6

    def carbon_g(self, watts: float, t0: float, t1: float) -> float:
        """Grams CO2eq emitted by drawing `watts` (IT equipment; the facility's PUE included)
        from t0 to t1: the carbon intensity integrated over the interval (0 without one)."""
        if self.carbon is None:
            return 0.0
        return watts * self.carbon.integral(t0, t1) * self.pue / 3.6e6

    def from_time(self, t0: float) -> "Cluster":
        """This cluster on a clock whose 0 is `t0`: its price and carbon series shifted, so
        that a forecast on times relative to now reads the hours it simulates."""
        if t0 == 0.0 or (self.tariff is None and self.carbon is None):
            return self
        return replace(self, tariff=None if self.tariff is None else self.tariff.from_time(t0),
                       carbon=None if self.carbon is None else self.carbon.from_time(t0))

    @property
    def as_planned(self) -> "Cluster":
        """The cluster as policies see it: with a carbon price, the price they weigh energy by
        is the tariff plus the carbon price times the intensity (`priced_tariff`), so every
        estimate, score and step prices carbon through the one energy formula (the view keeps
        the intensity, for policies that read it, at a carbon price of 0: not counted twice).
        Without a carbon price, this cluster itself (decisions exactly as without carbon; not
        cached, which would make every cluster a reference cycle of its own)."""
        if self.carbon is None or self.carbon_price == 0.0:
            return self
        return self._priced_view

    @cached_property
    def _priced_view(self) -> "Cluster":
        assert self.carbon is not None
        tariff = priced_tariff(self.tariff or self.energy_price, self.carbon,
                               self.carbon_price * 1e-6)
        mean = tariff.mean(0.0, tariff.period_s - tariff.offset_s)
        return Cluster(self.gpu_types, self.nodes, mean, self.pue, self.restart_overhead_s,
                       tariff, self.carbon, 0.0, self.carbon_cap)


MAX_SERIES_STEPS = 1_000_000  # a combined price series longer than this is refused


def priced_tariff(price: "Tariff | float", carbon: Tariff, eur_per_g: float) -> Tariff:
    """The series price + `eur_per_g` x intensity (EUR per kWh), on the carbon series' steps.
    A price series must have the same step and its boundaries on the carbon series' (as two
    hourly series do); the combination repeats after both have (their lengths' least common
    multiple of steps)."""
    if isinstance(price, Tariff):
        if price.step_s != carbon.step_s or (price.offset_s - carbon.offset_s) % price.step_s:
            raise ValueError(f"the price series (steps of {price.step_s:g} s, offset "
                             f"{price.offset_s:g} s) and the carbon series (steps of "
                             f"{carbon.step_s:g} s, offset {carbon.offset_s:g} s) must change "
                             f"at the same times")
        n = math.lcm(len(price.prices), len(carbon.prices))
    else:
        n = len(carbon.prices)
    if n > MAX_SERIES_STEPS:
        raise ValueError(f"the price and carbon series together repeat only after {n} steps "
                         f"(at most {MAX_SERIES_STEPS}); give series of equal lengths")
    values = []
    for k in range(n):
        at = price.price_at(k * carbon.step_s - carbon.offset_s + 0.5 * carbon.step_s) \
            if isinstance(price, Tariff) else price
        values.append(at + eur_per_g * carbon.prices[k % len(carbon.prices)])
    return Tariff(tuple(values), carbon.step_s, carbon.offset_s)


@dataclass(frozen=True)
class Job:
    job_id: str
    submit_time: float
    due_date: float
    tardiness_weight: float  # EUR per second late
    epochs: float
    profile: str
    preemptible: bool = True  # False: once started, never paused or moved (policies/pinning.py)
    start_asap: bool = False  # True: never held back to save energy (policies/steps/pipeline.py)


Config = tuple[str, int]
"""A configuration: (GPU type name, GPU count)."""

GangConfig = tuple[str, int, int]
"""A configuration over several nodes: (GPU type name, GPUs per node, nodes >= 2)."""


def config_key(gpu_type: str, gpus: int, nodes: int = 1) -> "Config | GangConfig":
    """How `Profiles` keys a configuration: (type, gpus) on one node, (type, gpus per node,
    nodes) for a gang over several (`Profiles.gangs`)."""
    return (gpu_type, gpus) if nodes == 1 else (gpu_type, gpus, nodes)


@dataclass(frozen=True)
class PowerLevel:
    """A configuration run with its GPUs capped at `limit_w` watts each, as measured (e.g. by
    Zeus): seconds per epoch and the average draw per GPU at that cap."""

    limit_w: float
    seconds_per_epoch: float
    gpu_power_w: float


@dataclass(frozen=True)
class Profiles:
    """Seconds per epoch for each (profile, GPU type, GPU count); a missing row = not allowed.

    `levels` optionally lists, per profile and configuration, the GPU power limits it may run
    at, highest first. The highest is the default: its speed is the table's, and a lower limit
    saves the difference of the per-GPU draws on each GPU the job holds.

    `power` optionally gives, per profile and configuration, the draw of each of its GPUs while
    it trains (W, measured: `andreas profile` through NVML): the job draws that instead of the
    power table's draw per busy GPU (`GpuType.busy_gpu_w`); without it, the table's (the
    paper's model). `startup` likewise gives its start-up (s, measured: launch to the first
    progress report, less an epoch), which its restarts take instead of the cluster's
    `restart_overhead_s`.

    `gangs` gives, per profile, seconds per epoch on several nodes at once, keyed (GPU type,
    GPUs per node, nodes >= 2): a job of such a profile (a *gang profile*) runs on all its
    nodes together or not at all (`policies.gangs`). `power` and `startup` key a gang's
    configuration the same way (`config_key`). Every gang profile is in `table` too, with its
    one-node configurations (possibly none).
    """

    table: Mapping[str, Mapping[Config, float]]
    levels: Mapping[str, Mapping[Config, tuple[PowerLevel, ...]]] = field(default_factory=dict)
    # keyed by Config, or GangConfig for a gang (typed Any: Mapping's keys are invariant)
    power: Mapping[str, Mapping[Any, float]] = field(default_factory=dict)
    startup: Mapping[str, Mapping[Any, float]] = field(default_factory=dict)
    gangs: Mapping[str, Mapping[GangConfig, float]] = field(default_factory=dict)
    # per profile and gang configuration: its seconds per epoch are this many times longer
    # when its nodes span more than one node group (`Cluster.spans_groups`); 1 if absent
    spread_slowdown: Mapping[str, Mapping[GangConfig, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        table = {p: dict(c) for p, c in self.table.items()}
        for p in self.gangs:
            table.setdefault(p, {})
        frozen = {p: MappingProxyType(c) for p, c in table.items()}
        object.__setattr__(self, "table", MappingProxyType(frozen))
        levels = {p: MappingProxyType({c: tuple(sorted(ls, key=lambda x: -x.limit_w))
                                       for c, ls in cs.items() if ls})
                  for p, cs in self.levels.items()}
        object.__setattr__(self, "levels", MappingProxyType({p: c for p, c in levels.items()
                                                             if c}))
        for name in ("power", "startup", "gangs", "spread_slowdown"):
            given = {p: MappingProxyType(dict(c)) for p, c in getattr(self, name).items() if c}
            object.__setattr__(self, name, MappingProxyType(given))

    def __reduce__(self):
        return (Profiles, ({p: dict(c) for p, c in self.table.items()},
                           {p: dict(c) for p, c in self.levels.items()},
                           {p: dict(c) for p, c in self.power.items()},
                           {p: dict(c) for p, c in self.startup.items()},
                           {p: dict(c) for p, c in self.gangs.items()},
                           {p: dict(c) for p, c in self.spread_slowdown.items()}))

    def gang_configs(self, profile: str) -> list[GangConfig]:
        """Every configuration `profile` may run in, as (GPU type, GPUs per node, nodes): its
        one-node ones with nodes 1, then its gangs. What the gang planner chooses among."""
        return ([(t, g, 1) for t, g in self.table.get(profile, {})]
                + list(self.gangs.get(profile, {})))

    def gpu_seconds_per_epoch(self, profile: str) -> list[float]:
        """GPU-seconds an epoch of `profile` takes in each configuration it may run in (its
        one-node ones, then its gangs): the work a job asks of the cluster, whatever the
        plan (the offered load, the backlog of the forward checks' futures)."""
        return ([g * spe for (_, g), spe in self.table.get(profile, {}).items()]
                + [g * n * spe for (_, g, n), spe in self.gangs.get(profile, {}).items()])

    def restart_s(self, profile: str, config: Config | GangConfig, default: float) -> float:
        """How long a restart of `profile` on `config` takes: its measured start-up where
        the profile gives one, else `default` (the cluster's `restart_overhead_s`)."""
        return self.startup.get(profile, {}).get(config, default)

    def gpu_power_w(self, profile: str, config: Config | GangConfig) -> float | None:
        """The measured draw of each GPU of `config` while `profile` trains; None: the table's."""
        return self.power.get(profile, {}).get(config)

    def configs(self, profile: str) -> Mapping[Config, float]:
        return self.table[profile]

    def seconds_per_epoch(self, profile: str, gpu_type: str, gpus: int,
                          limit_w: float | None = None, nodes: int = 1,
                          spread: bool = False) -> float:
        """Seconds per epoch on `gpus` GPUs of `gpu_type` (per node, on `nodes` nodes;
        `spread`: over more than one node group, slowed by `spread_slowdown`)."""
        if nodes != 1:
            key = (gpu_type, gpus, nodes)
            spe = self.gangs[profile][key]
            return spe * self.spread_slowdown.get(profile, {}).get(key, 1.0) if spread else spe
        if limit_w is None:
            return self.table[profile][(gpu_type, gpus)]
        return self.level(profile, (gpu_type, gpus), limit_w).seconds_per_epoch

    def power_levels(self, profile: str, config: Config) -> tuple[PowerLevel, ...]:
        """The power limits this configuration may run at, default (highest) first; () when
        its profile gives none."""
        return self.levels.get(profile, {}).get(config, ())

    def level(self, profile: str, config: Config, limit_w: float) -> PowerLevel:
        for lv in self.power_levels(profile, config):
            if lv.limit_w == limit_w:
                return lv
        raise KeyError(f"profile {profile!r} has no power limit {limit_w:g} W on {config}")

    def saved_w(self, profile: str, config: Config, limit_w: float | None) -> float:
        """Watts per GPU that running at `limit_w` draws below the default limit."""
        if limit_w is None:
            return 0.0
        levels = self.power_levels(profile, config)
        return levels[0].gpu_power_w - self.level(profile, config, limit_w).gpu_power_w


@dataclass(frozen=True)
class Scenario:
    cluster: Cluster
    profiles: Profiles
    jobs: tuple[Job, ...]
    name: str = field(default="scenario")


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch in which a job held GPUs on one node and configuration.

    `phase` is "run" (progress at the profile's speed) or "restart" (the restart overhead:
    GPUs held and powered, no progress). A gang over n nodes logs n segments for each stretch,
    one per node, its GPUs there each; the epochs are counted once, on its first node's
    segment (0 on the others), so a job's segments still add up to its epochs.
    """

    job_id: str
    node: str
    gpu_type: str
    gpus: int
    start: float
    end: float
    epochs: float
    phase: str = "run"
    power_limit_w: float | None = None  # None: the GPUs' default limit
    saved_w: float = 0.0  # watts the job's GPUs draw below the default limit's draw
