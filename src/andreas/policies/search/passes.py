"""The greedy pass as every policy calls it: the compiled kernel's functions (kernel.py) on a
planning context's arrays, and their results as `Placement`s.

The baselines place their waiting jobs with one pass; the greedy's deterministic pass is one
pass and its post-processing; the Randomized Greedy runs all its passes in the kernel's loop.
There is no second, hand-written Python version: `impl="plain"` runs the same functions
interpreted (`.py_func`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from . import kernel  # noqa: F401
from .orderings import pressure_ranks
from .placement import Placement
from .planning import PlanningContext

IMPLS = ("fast", "plain")


def compiled(name: str, impl: str = "fast"):
    """The kernel function `name`, compiled ("fast") or as its interpreted Python ("plain")."""
    fn = getattr(kernel, name)
    return fn if impl == "fast" else fn.py_func


def compiled_passes(impl: str = "fast", threads: int = 1):
    """The Randomized Greedy's loop of passes (kernel.run_iterations): with more than one
    thread, its parallel compilation on up to `threads` of numba's threads (the same results:
    the passes are independent)."""
    if impl != "fast" or threads <= 1:
        return compiled("run_iterations", impl)
    most = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    numba.set_num_threads(min(threads, most))
    return kernel.run_iterations_parallel


@dataclass
class PassResult:
    """One pass's placement, as arrays over the context's jobs: node (-1: waiting), index of
    the candidate in the job's row, whether the job moved (pays the restart overhead), and the
    free GPUs per node left after it."""

    node: np.ndarray
    cand: np.ndarray
    moved: np.ndarray
    free: np.ndarray

    @property
    def placement(self) -> Placement:
        return Placement(self.node, self.cand, self.moved)


def greedy_pass(ctx: PlanningContext, order: list[int], *, free: list[int] | None = None,
                u_config: np.ndarray | None = None, u_node: np.ndarray | None = None,
                alpha: float = 0.0, beta: float = 0.0, config_energy: str = "alone",
                impl: str = "fast") -> PassResult:
    """Place the jobs of `order` in turn (kernel.greedy_pass) on `free` GPUs per node (all
    GPUs by default); with draws `u_config`/`u_node` (one per job), the randomised pass.
    `config_energy`: "alone" (the paper's: the preferred candidate that fits), "marginal" or
    "filled" (GreedyParams.config_energy)."""
    k = ctx.packed
    J = len(ctx.job_ids)
    node = np.full(J, -1, np.int64)
    cand = np.full(J, -1, np.int64)
    moved = np.zeros(J, np.bool_)
    left = np.array(ctx.node_cap if free is None else free, np.int64)
    use_rand = u_config is not None
    draws = np.zeros(J)
    compiled("greedy_pass", impl)(
        np.array(order, np.int64), use_rand, draws if u_config is None else u_config,
        draws if u_node is None else u_node, left, node, cand, moved, k.ct, k.cg, k.ctime,
        k.cmov, k.mtime, k.nc, k.home, k.home_g, k.node_type, k.node_cap, k.power,
        float(ctx.kernel_overhead), alpha, beta, k.meets, config_energy != "alone",
        config_energy == "filled", k.type_nodes, k.type_start, k.cw)
    return PassResult(node, cand, moved, left)


def post_process(ctx: PlanningContext, result: PassResult, score: str = "proxy",
                 impl: str = "fast", bound: bool = True) -> float:
    """Hand idle GPUs of used nodes to the jobs that gain most while the plan's `score`
    ("proxy" or "lookahead") drops (kernel.post_process); updates `result`, returns the
    score. `bound=False`: every trial scored whole (the same result, slower)."""
    k = ctx.packed
    return float(compiled("post_process", impl)(
        result.node, result.cand, result.moved, result.free, k.ct, k.cg, k.ctime, k.cmov,
        k.mtime, k.cen, k.nc, k.home, score == "lookahead", k.wait_penalty, k.due, k.weight,
        pressure_ranks(ctx), k.node_type, k.power, k.type_capacity, float(ctx.now),
        float(ctx.eur_per_joule), k.cw, bound))


def added_energy(ctx: PlanningContext, node: int, free: int, gpus: int, time_s: float,
                 joining: int = 0) -> float:
    """Joules `gpus` more busy GPUs add to `node` with `free` GPUs free over `time_s`, priced
    as if `joining` more jobs joined it (kernel.added_energy)."""
    k = ctx.packed
    return float(kernel.added_energy(k.power, k.node_type[node], k.node_cap[node], free, gpus,
                                     time_s, joining))
