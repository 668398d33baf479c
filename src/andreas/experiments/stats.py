"""Means with 95 % confidence intervals (Student t), the only statistics the reports use."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float  # 95 % CI bounds; equal to the mean for a single value
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_ci(values: Iterable[float], level: float = 0.95) -> Estimate:
    xs = [float(x) for x in values if x is not None and not math.isnan(float(x))]
    n = len(xs)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = sum(xs) / n
    if n == 1:
        return Estimate(mean, mean, mean, 1)
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t_quantile(0.5 + level / 2, n - 1) * math.sqrt(var / n)
    return Estimate(mean, mean - half, mean + half, n)


@lru_cache(maxsize=256)
def t_quantile(q: float, dof: int) -> float:
    """Student t quantile (scipy, imported on first use: it is slow to import)."""
    from scipy import stats

    return float(stats.t.ppf(q, dof))
