"""ANDREAS: energy- and deadline-aware scheduling of deep-learning jobs on GPU clusters.

The library's main entry points::

    from andreas import load_scenario, make_policy, simulate
    result = simulate(load_scenario("my-scenario"), make_policy("andreas", seed=1))
    print(result.summary["total_cost"])
"""

from importlib import import_module

_LAZY = {"load_scenario": ".io", "write_scenario": ".io", "make_policy": ".policies",
         "policy_names": ".policies", "simulate": ".sim.engine",
         "SimulationResult": ".sim.engine"}


def __getattr__(name: str):
    """Import on first use, so `from andreas import job` in a training script stays light
    (no NumPy, no policies) and starts fast."""
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'andreas' has no attribute {name!r}")


__all__ = ["load_scenario", "write_scenario", "make_policy", "policy_names", "simulate",
           "SimulationResult"]
__version__ = "0.1.0"
