"""Gangs: jobs that train on several nodes at once, all ranks together or none, for every
policy by construction.

A job whose profile gives configurations over several nodes (`Profiles.gangs`, keyed (GPU
type, GPUs per node, nodes)) is a *gang job*. As with pinned jobs (pinning.py), the policy a
driver asks is not taught about gangs: `decide` here plans the gang jobs itself, then asks
the policy about the other jobs on the GPUs the gangs leave, and merges the two. So every
policy, ours, a baseline, the MILP or a user's, places gangs whole, and `check_plan` refuses
any plan that does not.

The rule, in the spirit of the greedy pass:
- a running gang job keeps running where it runs (this planner does not pause, resize or move
  a gang; a plan from elsewhere may, and the drivers carry it out);
- waiting gang jobs, earliest due date first, start now on GPUs no running job holds, in the
  configuration whose estimated cost (energy on all its nodes, plus tardiness if it ends
  after its due date) is least; nodes are chosen tightest-fit, so whole free nodes stay whole,
  inside one node group where one has enough (a gang across groups may run slower:
  `Profiles.spread_slowdown`, counted in the estimate);
- the first gang job that cannot start reserves nodes (the EASY-backfill reservation of
  batch schedulers): on the nodes its cheapest configuration would use, what runs keeps
  running where it runs and nothing new starts, so they drain and the gang starts when they
  are free; without a reservation, a stream of one-node jobs could hold a gang back for
  ever (and a policy that pauses jobs could swap one for another there).
  Later gangs may start on other nodes (backfill). A waiting gang says what it waits for.

What this gives up (docs/gangs.md): gangs are not weighed against the other jobs by the
policy's own search, are never held for a cheaper hour, and a reservation leaves GPUs idle
while its nodes drain.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..cost import job_saved_w, run_energy_cost, tardiness_cost
from ..model import Cluster, GangConfig
from .base import Assignment, JobView, Plan, Snapshot, with_capacities
from .decision import Decision, Reason


def gang_jobs(snapshot: Snapshot) -> list[JobView]:
    """The jobs of `snapshot` whose profile gives gang configurations."""
    gangs = snapshot.profiles.gangs
    if not gangs:
        return []
    return [v for v in snapshot.jobs if v.job.profile in gangs]


def decide(decide_rest: Callable[[Snapshot], Plan], snapshot: Snapshot) -> Plan:
    """The plan for `snapshot`: its gang jobs planned here (module docstring), the rest by
    `decide_rest` on a snapshot without them and without the GPUs they hold or reserve."""
    mine = gang_jobs(snapshot)
    if not mine:
        return decide_rest(snapshot)
    free = snapshot.free_gpus()
    plan: dict[str, Assignment] = {}
    reasons: dict[str, Reason] = {}
    for v in mine:
        if v.assignment is not None:
            plan[v.job_id] = v.assignment
    reserved: frozenset[str] = frozenset()
    waiting = sorted((v for v in mine if v.assignment is None),
                     key=lambda v: (v.job.due_date, v.job.submit_time, v.job_id))
    for v in waiting:
        target = best_start(snapshot, v, free, reserved)
        if target is not None:
            plan[v.job_id] = target
            for node in target.nodes:
                free[node] -= target.gpus
            continue
        cheapest = cheapest_possible(snapshot, v)
        reasons[v.job_id] = Reason("waiting_for_nodes", detail=waiting_for(cheapest))
        if not reserved:
            reserved = reservation(snapshot, cheapest, free)
    for v in snapshot.jobs:  # what runs on the reserved nodes keeps running, as it runs
        a = v.assignment
        if a is not None and v.job_id not in plan and a.node in reserved:
            plan[v.job_id] = a
    rest = remaining(snapshot, plan, reserved)
    inner = Decision.of(decide_rest(rest) if rest.jobs and rest.cluster.nodes else {})
    return inner.replaced({**inner, **plan}, reasons=reasons)


def _estimate(snapshot: Snapshot, view: JobView, config: GangConfig,
              target: Assignment) -> tuple[float, float]:
    """(estimated cost, run time) of starting `view` now on `target`: the energy on all its
    nodes (each as if alone there) plus its tardiness."""
    gpu_type, gpus, nodes = config
    run_s = snapshot.start_run_s(view, gpu_type, target)
    saved = job_saved_w(snapshot.cluster, snapshot.profiles, view.job.profile, gpu_type, gpus,
                        nodes=nodes)
    energy = nodes * run_energy_cost(snapshot.cluster, gpu_type, gpus, run_s, snapshot.time,
                                     saved)
    job = view.job
    return energy + tardiness_cost(job.tardiness_weight, snapshot.time + run_s,
                                   job.due_date), run_s


def _assignment(names: list[str], gpus: int) -> Assignment:
    return Assignment(names[0], gpus, None, tuple(names[1:]))


def _least(snapshot: Snapshot, view: JobView,
           nodes_for: Callable[[GangConfig], list[str]]) -> tuple[GangConfig, Assignment] | None:
    """The configuration of `view`, and where, of least estimated cost (then shortest run)
    when it starts now, among those for which `nodes_for(config)` names enough nodes (the
    first ones are taken); None if none has enough."""
    best: tuple[float, float, GangConfig, Assignment] | None = None
    for config in snapshot.profiles.gang_configs(view.job.profile):
        names = nodes_for(config)
        if len(names) < config[2]:
            continue
        target = _assignment(names[:config[2]], config[1])
        cost, run_s = _estimate(snapshot, view, config, target)
        if best is None or (cost, run_s) < best[:2]:
            best = (cost, run_s, config, target)
    return None if best is None else best[2:]


def best_start(snapshot: Snapshot, view: JobView, free: dict[str, int],
               reserved: frozenset[str]) -> Assignment | None:
    """Where `view` starts now at the least estimated cost on `free` GPUs outside `reserved`
    nodes, tightest fit first; None if no configuration of it fits."""
    def fitting(config: GangConfig) -> list[str]:
        gpu_type, gpus, count = config
        return in_one_group(snapshot.cluster, [name for _, name in sorted(
            (free[n.name] - gpus, n.name) for n in snapshot.cluster.nodes
            if n.gpu_type == gpu_type and n.name not in reserved and free[n.name] >= gpus)],
            count)
    found = _least(snapshot, view, fitting)
    return None if found is None else found[1]


def cheapest_possible(snapshot: Snapshot, view: JobView) -> GangConfig | None:
    """The configuration of `view` with the least estimated cost if it started now, among
    those the cluster can ever hold (enough nodes of the type with enough GPUs)."""
    found = _least(snapshot, view, lambda config: in_one_group(snapshot.cluster, [
        n.name for n in snapshot.cluster.nodes if n.gpu_type == config[0] and n.gpus >= config[1]],
        config[2]))
    return None if found is None else found[0]


def in_one_group(cluster: Cluster, names: list[str], count: int) -> list[str]:
    """`names` (best first) with its first `count` moved inside one node group where a group
    has that many of them (the group whose `count` best come first): a gang inside one group
    pays no `spread_slowdown`. Unchanged on a cluster without groups, or where no group has
    enough (the gang then spans groups, and its estimate counts the slowdown)."""
    if len(names) < count or not cluster.spans_groups(tuple(names[:count])):
        return names
    members: dict[str | None, list[int]] = {}
    for i, name in enumerate(names):
        members.setdefault(cluster.group(name), []).append(i)
    whole = [m[:count] for m in members.values() if len(m) >= count]
    if not whole:
        return names
    chosen = min(whole, key=sum)
    return [names[i] for i in chosen] + [n for i, n in enumerate(names) if i not in chosen]


def waiting_for(config: GangConfig | None) -> str:
    """What a gang that cannot start waits for, given its cheapest possible configuration, in
    words ("2 free nodes of V100 with 8 GPUs each")."""
    if config is None:
        return "nodes this cluster does not have"
    gpu_type, gpus, nodes = config
    what = "free node" if nodes == 1 else "free nodes"
    return f"{nodes} {what} of {gpu_type} with {gpus} GPU{'s' if gpus > 1 else ''} each"


def reservation(snapshot: Snapshot, config: GangConfig | None,
                free: dict[str, int]) -> frozenset[str]:
    """The nodes kept for the first gang that cannot start, given its cheapest possible
    configuration: the nodes of that type closest to having its GPUs free."""
    if config is None:
        return frozenset()
    gpu_type, gpus, nodes = config
    closest = sorted((-free[n.name], n.name) for n in snapshot.cluster.nodes
                     if n.gpu_type == gpu_type and n.gpus >= gpus)
    return frozenset(name for _, name in closest[:nodes])


def remaining(snapshot: Snapshot, plan: dict[str, Assignment],
              reserved: frozenset[str]) -> Snapshot:
    """`snapshot` without the jobs `plan` places (the gangs, and what runs on reserved nodes),
    without the GPUs they hold and without the reserved nodes. A node left with no GPU is left
    out."""
    held = {n.name: 0 for n in snapshot.cluster.nodes}
    for a in plan.values():
        for node in a.nodes:
            held[node] += a.gpus
    others = tuple(v for v in snapshot.jobs
                   if v.job.profile not in snapshot.profiles.gangs and v.job_id not in plan)
    capacities = tuple(0 if n.name in reserved else n.gpus - held[n.name]
                       for n in snapshot.cluster.nodes)
    return replace(snapshot, cluster=with_capacities(snapshot.cluster, capacities),
                   jobs=others)
