"""`milp`: at each rescheduling point, the exact optimum of a linear per-decision cost.

For every unfinished job choose a configuration and a node, or waiting, within node capacities,
minimising the per-decision cost (`decision_cost`):

- a job run on candidate c of node n, where the node ends up with b busy GPUs, pays the energy of
  its whole remaining run at its share of the node's draw, g·P_n[b]/b (the node power table is
  modelled exactly through binary variables y[n, b], one per busy-GPU level), plus its tardiness
  ω·max(0, now + t − due) if it finished as planned;
- a waiting job pays what it will still owe: the energy of its cheapest run alone on a node (none
  at a negative price), plus 1 % and 1e-6 EUR so that running now wins ties, plus the paper's
  proxy penalty 100·ω·max(0, now + t_max − due).

HiGHS solves it with a time limit, warm-started from the Randomized Greedy's plan; on time-out
the best plan found is used and the gap is recorded in `stats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import AndreasError
from ..policies.base import Plan, Snapshot
from ..policies.greedy import GreedyParams, RandomizedGreedy
from ..policies.options import OptionSpec
from ..policies.registry import register
from ..policies.search.placement import Placement
from ..policies.search.planning import PlanningContext

WAIT_ENERGY_MARGIN = 1.01
# and a micro-euro: running wins when running adds nothing (a node at idle draw)
WAIT_TIE_EUR = 1e-6


def waiting_cost(ctx: PlanningContext, j: int) -> float:
    # a job with no candidate (non-preemptible jobs hold the GPUs it needs) can only wait
    k = ctx.packed
    cheapest = float(k.cen[j, :k.nc[j]].min()) if k.nc[j] else 0.0
    # At a negative price a job earns by running: waiting must not be credited with a run it
    # has not made (it would beat running now on a shared node, and leave the cluster idle).
    return WAIT_ENERGY_MARGIN * max(cheapest, 0.0) + WAIT_TIE_EUR + ctx.wait_penalty[j]


def run_cost(ctx: PlanningContext, j: int, gpus: int, time_s: float, busy: int,
             node: int) -> float:
    """Energy of job j's run of `time_s` on `gpus` GPUs at its share of its node's draw with
    `busy` GPUs busy, plus tardiness.
    With a price series the energy is priced over the run itself, as `waiting_cost` prices
    the cheapest run (the horizon's mean price made a run inside a negative-price hour look
    dearer than waiting, and left the cluster idle)."""
    watts = ctx.power[ctx.node_type[node]][busy - 1]
    price = (ctx.eur_per_joule if ctx.cluster.tariff is None
             else ctx.cluster.eur_per_joule(ctx.now, ctx.now + time_s))
    energy = gpus * watts / busy * time_s * price
    late = ctx.now + time_s - ctx.due[j]
    return energy + (ctx.weight[j] * late if late > 0 else 0.0)


def decision_cost(ctx: PlanningContext, placed: Placement) -> float:
    """The MILP's objective for any plan, so plans of other policies can be compared to it."""
    busy = placed.busy(ctx).tolist()
    gpus, times = placed.gpus(ctx).tolist(), placed.times(ctx).tolist()
    total = 0.0
    for j, n in enumerate(placed.node.tolist()):
        total += (waiting_cost(ctx, j) if n < 0
                  else run_cost(ctx, j, gpus[j], times[j], busy[n], n))
    return total


@dataclass
class DecisionMilp:
    """The variables of one decision's MILP and how to read a plan back from a solution."""

    model: Any  # the HiGHS model (highs.Milp, imported lazily)
    x: dict[tuple[int, int, int], int]  # (job, candidate index, node) -> column
    wait: list[int]
    y: dict[tuple[int, int], int]  # (node, busy level) -> column
    z: dict[tuple[int, int, int, int], int]  # (job, candidate, node, level) -> column


def build_milp(ctx: PlanningContext) -> DecisionMilp:
    from .highs import Milp  # HiGHS and scipy load only when a MILP is built

    m = Milp()
    x, y, z = {}, {}, {}
    wait = []
    for n, cap in enumerate(ctx.node_cap):
        for b in range(1, cap + 1):
            y[(n, b)] = m.var(0.0)
    k = ctx.packed
    jobs = len(ctx.job_ids)
    for j in range(jobs):
        for c in range(int(k.nc[j])):
            gpus = int(k.cg[j, c])
            for n in ctx.nodes_of_type[int(k.ct[j, c])]:
                if ctx.node_cap[n] < gpus:
                    continue
                # a move to another node may pay a restart (the table's moved time)
                time_s = float(k.mtime[j, c] if k.cmov[j, c] and n != k.home[j]
                               else k.ctime[j, c])
                x[(j, c, n)] = m.var(0.0)
                for b in range(gpus, ctx.node_cap[n] + 1):
                    z[(j, c, n, b)] = m.var(run_cost(ctx, j, gpus, time_s, b, n))
        wait.append(m.var(waiting_cost(ctx, j)))
    for j in range(jobs):  # each job runs somewhere or waits
        cols = [col for (jj, _, _), col in x.items() if jj == j] + [wait[j]]
        m.row(1.0, 1.0, cols, [1.0] * len(cols))
    by_node: dict[int, list[tuple[int, float]]] = {}
    for (j, c, n), col in x.items():
        by_node.setdefault(n, []).append((col, float(k.cg[j, c])))
    for n, cap in enumerate(ctx.node_cap):
        levels = [(y[(n, b)], float(b)) for b in range(1, cap + 1)]
        items = by_node.get(n, [])
        # busy GPUs on n equal the one active level; at most one level is active
        m.row(0.0, 0.0, [c for c, _ in items] + [c for c, _ in levels],
              [g for _, g in items] + [-b for _, b in levels])
        m.row(-1e30, 1.0, [c for c, _ in levels], [1.0] * len(levels))
    for (j, c, n, b), col in z.items():  # z >= x + y - 1: the job pays at the node's level
        m.row(-1.0, 1e30, [col, x[(j, c, n)], y[(n, b)]], [1.0, -1.0, -1.0])
    return DecisionMilp(m, x, wait, y, z)


def solution_from_plan(d: DecisionMilp, ctx: PlanningContext,
                       placed: Placement) -> list[float]:
    """The MILP's variables for a plan (its warm start)."""
    values = [0.0] * len(d.model.cost)
    busy = placed.busy(ctx).tolist()
    for n, b in enumerate(busy):
        if b:
            values[d.y[(n, b)]] = 1.0
    for j, (n, c) in enumerate(zip(placed.node.tolist(), placed.cand.tolist())):
        if n < 0:
            values[d.wait[j]] = 1.0
            continue
        values[d.x[(j, c, n)]] = 1.0
        values[d.z[(j, c, n, busy[n])]] = 1.0
    return values


def plan_from_solution(d: DecisionMilp, ctx: PlanningContext, values) -> Placement:
    """The plan a solution's x variables make."""
    return Placement.waiting(len(ctx.job_ids)).moved_to(
        ctx, {j: (n, c) for (j, c, n), col in d.x.items() if values[col] > 0.5})


@dataclass
class MilpPolicy:
    name: str = "milp"
    time_limit: float = 5.0
    seed: int = 1
    stats: dict = field(default_factory=lambda: {"decisions": 0, "time_outs": 0,
                                                 "max_gap": 0.0})

    def __post_init__(self) -> None:
        if not self.time_limit > 0:
            raise AndreasError(f"milp_time_limit must be > 0 seconds, got {self.time_limit}")

    def optimise(self, ctx: PlanningContext) -> tuple[Placement, float, float]:
        """(plan, its decision cost, relative gap) for one decision."""
        start = RandomizedGreedy("andreas", GreedyParams(seed=self.seed)).elite(ctx)[0] \
            .placement
        from .highs import solve

        d = build_milp(ctx)
        result = solve(d.model, time_limit=self.time_limit,
                       start=solution_from_plan(d, ctx, start))
        placed = start if result.values is None else plan_from_solution(d, ctx, result.values)
        cost = decision_cost(ctx, placed)
        start_cost = decision_cost(ctx, start)
        if start_cost < cost:  # never return worse than the warm start
            placed, cost = start, start_cost
        self.stats["decisions"] += 1
        if not result.optimal:
            self.stats["time_outs"] += 1
            self.stats["max_gap"] = max(self.stats["max_gap"], result.gap)
        return placed, cost, result.gap

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.jobs:
            return {}
        ctx = PlanningContext(snapshot)
        return self.optimise(ctx)[0].to_plan(ctx)


MILP_OPTIONS = {"milp_time_limit": OptionSpec("milp_time_limit", "float", 5.0,
                                               "HiGHS time limit per decision (s)")}


@register("milp", randomized=True, options=MILP_OPTIONS,
          summary="exact optimum of the per-decision cost (HiGHS MILP, node power table exact)")
def milp(**params: Any) -> MilpPolicy:
    return MilpPolicy(time_limit=float(params.get("milp_time_limit", 5.0)),
                      seed=int(params.get("seed", 1)))
