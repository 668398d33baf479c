"""ANDREAS: energy- and deadline-aware scheduling of deep-learning jobs on GPU clusters.

The library's main entry points::

    from andreas import load_scenario, make_policy, simulate
    result = simulate(load_scenario("my-scenario"), make_policy("andreas", seed=1))
    print(result.summary["total_cost"])
"""

from .io import load_scenario, write_scenario
from .policies import make_policy, policy_names
from .sim.engine import SimulationResult, simulate

__all__ = ["load_scenario", "write_scenario", "make_policy", "policy_names", "simulate",
           "SimulationResult"]
__version__ = "0.1.0"
