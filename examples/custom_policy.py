"""Write your own policy in a few lines and compare it with the built-in ones.

A policy is any object with a `name` and a `decide(snapshot) -> plan` method: the snapshot is the
time, the cluster, the profiles and every unfinished job (with its remaining epochs and where it
runs now); the plan maps a job id to an `Assignment(node, gpus)`. Jobs left out of the plan wait.
The simulator checks every plan (capacity, allowed configurations), so a bug in a policy shows
up as a clear error, not as wrong costs.

Run:  python examples/custom_policy.py
"""

from __future__ import annotations

from andreas import make_policy, simulate
from andreas.experiments.compare import compare
from andreas.policies.base import Assignment, Plan, Snapshot
from andreas.policies.registry import register
from andreas.sim.generate import generate_paper_style, load_template


class ShortestFirstOnFastest:
    """Non-preemptive shortest-remaining-work first, each job on its fastest configuration that
    fits, on the first node with room (no best fit, no energy awareness)."""

    name = "srpt-fastest"

    def decide(self, snapshot: Snapshot) -> Plan:
        free = snapshot.free_gpus()
        plan: dict[str, Assignment] = {v.job_id: v.assignment for v in snapshot.jobs
                                       if v.assignment is not None}  # never preempt
        waiting = [v for v in snapshot.jobs if v.assignment is None]

        def fastest(v):
            configs = snapshot.profiles.configs(v.job.profile)
            return min(configs.values()) * v.remaining_epochs

        for v in sorted(waiting, key=fastest):
            configs = snapshot.profiles.configs(v.job.profile)
            for (gpu_type, gpus), _ in sorted(configs.items(), key=lambda kv: kv[1]):
                node = next((n.name for n in snapshot.cluster.nodes
                             if n.gpu_type == gpu_type and free[n.name] >= gpus), None)
                if node is not None:
                    plan[v.job_id] = Assignment(node, gpus)
                    free[node] -= gpus
                    break
        return plan


# One registry entry makes it available to `compare`, `sweep` and the command line (when this
# module is imported).
register("srpt-fastest", randomized=False, summary="shortest job first on its fastest config")(
    lambda **_: ShortestFirstOnFastest())


def main() -> None:
    template = load_template("paper")
    scenario = generate_paper_style(template, n_nodes=5, seed=1, lam=5000)
    one = simulate(scenario, make_policy("srpt-fastest"))
    print(f"srpt-fastest alone: {one.summary['total_cost']:.2f} EUR")
    scenarios = [generate_paper_style(template, 5, k, 5000) for k in (1, 2, 3)]
    table = compare(scenarios, ["fifo", "srpt-fastest", "andreas"], seeds=[1]).table()
    for row in table:
        print(f"{row['policy']:13s} {row['total_cost_mean']:10.2f} EUR "
              f"({row['reduction_vs_fifo_pct']:+.1f} % vs fifo)")


if __name__ == "__main__":
    main()
