"""The GPU catalogue: canonical GPU names, per-GPU power with sources, and measured profiles.

`data/catalogue/gpus.yaml` gives, for K80, P100, V100, T4, A100, H100 and H200, the busy and idle
draw per GPU and a host share per node (each value's source is in that file).
`data/catalogue/profiles.csv` holds Gavel's measured isolated throughputs (Narayanan et al., OSDI
2020; MIT licence) for 26 models on K80, P100 and V100 at 1, 2, 4 and 8 GPUs, as seconds per
1000 steps: one "epoch" of a catalogue profile is 1000 training steps.

`data/catalogue/power_limits.csv` holds Zeus's measurements (You et al., NSDI 2023; Apache-2.0)
as profiles with GPU power limits (docs/power-limits.md).

Names are case-insensitive and aliases resolve to one canonical name, so a cluster.yaml may say
`v100` or `Tesla-V100` and get the catalogue's power.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

STEPS_PER_EPOCH = 1000


@dataclass(frozen=True)
class GpuSpec:
    name: str
    tdp_w: float
    busy_w: float
    idle_w: float
    host_w: float
    gpus_per_node: int

    def node_power_w(self, gpus: int) -> tuple[float, ...]:
        """Node draw with 1..gpus busy: host + busy GPUs at busy power + the rest idle."""
        return tuple(self.host_w + b * self.busy_w + (gpus - b) * self.idle_w
                     for b in range(1, gpus + 1))


def _dir() -> Path:
    return Path(str(resources.files("andreas") / "data" / "catalogue"))


@lru_cache(maxsize=1)
def gpu_catalogue() -> dict[str, GpuSpec]:
    doc = yaml.safe_load((_dir() / "gpus.yaml").read_text(encoding="utf-8"))
    return {name: GpuSpec(name, float(e["tdp_w"]), float(e["busy_w"]), float(e["idle_w"]),
                          float(e["host_w"]), int(e["gpus_per_node"]))
            for name, e in doc["gpus"].items()}


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    doc = yaml.safe_load((_dir() / "gpus.yaml").read_text(encoding="utf-8"))
    table = {}
    for name, e in doc["gpus"].items():
        table[name.upper()] = name
        for alias in e.get("aliases", []):
            table[str(alias).upper()] = name
    return table


def canonical_gpu(name: str) -> str | None:
    """The catalogue's name for `name` (any case, or an alias), or None if not catalogued."""
    return _aliases().get(str(name).strip().upper())


def catalogue_profiles_path() -> Path:
    return _dir() / "profiles.csv"


def gang_scaling_path() -> Path:
    """How training scales over nodes, from Sia's measurements (LICENSE-NOTE.md)."""
    return _dir() / "gang_scaling.csv"


def catalogue_power_limits_path() -> Path:
    """Zeus's measurements as profiles with power limits: one GPU of P100 or V100, one profile
    per Zeus workload, seconds per real epoch and average GPU draw at 100-250 W."""
    return _dir() / "power_limits.csv"
