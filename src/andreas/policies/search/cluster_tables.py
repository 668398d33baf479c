"""What planning needs from a cluster and its profiles alone, worked out once per cluster.

A decision's planning context (planning.py) reads the nodes as indexable lists, the power
table, every profile's configurations that the cluster can host, and the kernel's arrays of
them. None of this changes between decisions unless the cluster or the profiles do, and both
are frozen model objects: the tables are kept per object (by identity) for the few most
recently used, so a replay of thousands of decisions on one cluster builds them once, and a
driver that builds a new cluster (the simulator's free GPUs, a service reloading its
configuration) simply gets new tables.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ...cost import own_power_saved_w
from ...model import Cluster, Profiles
from ..base import Assignment

KEEP = 8
"""Clusters whose tables are kept (least recently used dropped first)."""


def readonly(array: np.ndarray) -> np.ndarray:
    """`array`, marked read-only: shared by every decision on the cluster, none may write it."""
    array.flags.writeable = False
    return array


class ProfileRows:
    """Each profile's configurations that a cluster can host (a GPU type it has, on at most
    the GPUs of its largest node of that type), in the profile's own order, and the same as
    [profiles, configurations] arrays: row `index[name]` of `p_type`, `p_gpus`, `p_spe` (s per
    epoch) and `p_watts` (node draw above idle with that many busy GPUs, the job's own draw
    where its profile gives one), `p_n[row]` of them real, and `p_restart` (the profile's own
    start-up there, NaN where it gives none: the cluster's overhead). Rows are added as
    decisions meet new profiles (a service's table may be large)."""

    def __init__(self, tables: "ClusterTables", profiles: Profiles) -> None:
        self.tables, self.profiles = tables, profiles
        self.index: dict[str, int] = {}
        self.hostable: list[list[tuple[str, int, int, float]]] = []
        self._arrays: tuple[np.ndarray, ...] | None = None

    def lookup(self, names: list[str]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """The row of each profile in `names` (adding those not met yet), and `arrays()`
        holding them all (together, under a lock: two threads may plan on one cluster)."""
        with _LOCK:
            index = self.index
            for name in names:
                if name not in index:
                    self._add(name)
            return np.array([index[name] for name in names], np.int64), self._arrays_now()

    def _add(self, name: str) -> None:
        t = self.tables
        self.index[name] = len(self.hostable)
        self.hostable.append([
            (tname, t.type_index[tname], g, spe)
            for (tname, g), spe in self.profiles.configs(name).items()
            if tname in t.type_index and g <= t.largest[t.type_index[tname]]])
        self._arrays = None

    def _arrays_now(self) -> tuple[np.ndarray, ...]:
        """(p_type, p_gpus, p_spe, p_watts, p_n, p_restart) over every row added so far, with
        at least one column (padding where a profile has fewer configurations)."""
        if self._arrays is None:
            P = len(self.hostable)
            C = max(1, max((len(h) for h in self.hostable), default=0))
            p_type = np.zeros((P, C), np.int64)
            p_gpus = np.zeros((P, C), np.int64)
            p_spe = np.zeros((P, C))
            p_watts = np.zeros((P, C))
            p_n = np.zeros(P, np.int64)
            p_restart = np.full((P, C), np.nan)
            power = self.tables.power
            names = list(self.index)  # in row order
            kinds = self.tables.cluster.gpu_types
            for i, configs in enumerate(self.hostable):
                own = self.profiles.power.get(names[i], {})
                startup = self.profiles.startup.get(names[i], {})
                for c, (tname, t, g, spe) in enumerate(configs):
                    p_type[i, c], p_gpus[i, c], p_spe[i, c] = t, g, spe
                    p_watts[i, c] = power[t][g - 1]
                    if (tname, g) in own:  # the profile's own draw instead of the table's
                        p_watts[i, c] -= own_power_saved_w(kinds[tname], g, own[(tname, g)])
                    if (tname, g) in startup:
                        p_restart[i, c] = startup[(tname, g)]
                p_n[i] = len(configs)
            self._arrays = tuple(map(readonly, (p_type, p_gpus, p_spe, p_watts, p_n,
                                                p_restart)))
        return self._arrays


class ClusterTables:
    """One cluster as the planning context and the kernel index it: GPU types and nodes by
    position, node draw above idle per type and busy GPUs, node groups per type, and the
    kernel's arrays of the same (read-only, shared by every decision on the cluster), and
    each node's whole draw by busy GPUs (`k_node_draw`, for the compiled forecasts)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.type_names = list(cluster.gpu_types)
        self.type_index = {name: i for i, name in enumerate(self.type_names)}
        # Node draw above idle by busy GPUs: the idle draw is paid whatever the plan.
        self.power = [tuple(cluster.gpu_types[t].extra_w(b) for b in
                            range(1, len(cluster.gpu_types[t].node_power_w) + 1))
                      for t in self.type_names]
        self.node_names = [n.name for n in cluster.nodes]
        self.node_index = cluster.node_positions
        self.node_type = [self.type_index[n.gpu_type] for n in cluster.nodes]
        self.node_cap = [n.gpus for n in cluster.nodes]
        self.nodes_of_type: list[list[int]] = [[] for _ in self.type_names]
        for i, t in enumerate(self.node_type):
            self.nodes_of_type[t].append(i)
        self.largest = [max((self.node_cap[n] for n in ns), default=0)
                        for ns in self.nodes_of_type]
        self.type_capacity = [sum(self.node_cap[n] for n in ns) for ns in self.nodes_of_type]
        self._rows: ProfileRows | None = None
        self._assignments: dict[tuple[int, int], Assignment] = {}
        # the kernel's arrays (planning.Packed)
        node_type = np.array(self.node_type, np.int64)
        G = max((len(p) for p in self.power), default=1)
        power = np.zeros((len(self.power), G))
        for t, p in enumerate(self.power):
            power[t, : len(p)] = p
        type_nodes = np.argsort(node_type, kind="stable").astype(np.int64)
        type_start = np.searchsorted(node_type[type_nodes], np.arange(len(self.power) + 1))
        self.k_node_type = readonly(node_type)
        self.k_node_cap = readonly(np.array(self.node_cap, np.int64))
        self.k_power = readonly(power)
        self.k_type_capacity = readonly(np.array(self.type_capacity, np.int64))
        self.k_type_nodes = readonly(type_nodes)
        self.k_type_start = readonly(type_start.astype(np.int64))
        # a node's whole draw (idle included) by busy GPUs, as the simulator charges it
        draws = np.zeros((len(self.type_names), 1 + max(self.node_cap, default=0)))
        for t, name in enumerate(self.type_names):
            kind = cluster.gpu_types[name]
            for b in range(min(draws.shape[1], len(kind.node_power_w) + 1)):
                draws[t, b] = kind.power_w(b)
        self.k_node_draw = readonly(draws)

    def profile_rows(self, profiles: Profiles) -> ProfileRows:
        """The rows of `profiles` on this cluster (kept for the last profiles object asked)."""
        rows = self._rows
        if rows is None or rows.profiles is not profiles:
            rows = self._rows = ProfileRows(self, profiles)
        return rows

    def assignment(self, node: int, gpus: int) -> Assignment:
        """`gpus` GPUs of node `node` at the default power limit, one object per place: a plan
        of hundreds of jobs reuses them instead of building each."""
        key = (node, gpus)
        a = self._assignments.get(key)
        if a is None:
            a = self._assignments[key] = Assignment(self.node_names[node], gpus)
        return a


_KEPT: OrderedDict[int, ClusterTables] = OrderedDict()
_LOCK = threading.RLock()


def tables_for(cluster: Cluster) -> ClusterTables:
    """The tables of `cluster`, built on first use (the entry holds the cluster, so an id is
    never reused while its tables are kept)."""
    with _LOCK:
        tables = _KEPT.get(id(cluster))
        if tables is not None and tables.cluster is cluster:
            _KEPT.move_to_end(id(cluster))
            return tables
        tables = _KEPT[id(cluster)] = ClusterTables(cluster)
        while len(_KEPT) > KEEP:
            _KEPT.popitem(last=False)
        return tables
