"""NVIDIA's management library (NVML), read through `nvidia-ml-py` when it is there.

The service and the profiler use it for the GPUs' own energy counters; without a driver, a GPU
or the package, `available` is False and callers fall back to the node power table.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable

log = logging.getLogger("andreas.nvml")


class NvmlMeter:
    """Reads the cumulative energy counter (mJ) of each GPU."""

    def __init__(self) -> None:
        self.available = False
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.available = pynvml.nvmlDeviceGetCount() > 0
        except Exception:  # no driver, no GPU, no package: fall back to the model
            self.available = False

    def read_mj(self, indices: Iterable[int]) -> dict[str, float] | None:
        """Energy counters of the GPUs `indices` since the driver loaded, in millijoules."""
        if not self.available:
            return None
        try:
            out = {}
            for i in indices:
                handle = self._nvml.nvmlDeviceGetHandleByIndex(int(i))
                out[str(i)] = float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
            return out
        except Exception as exc:
            log.warning("NVML energy read failed: %s", exc)
            return None

    def names(self) -> list[str]:
        """Each GPU's product name, by NVML index (empty without NVML)."""
        if not self.available:
            return []
        out = []
        for i in range(self._nvml.nvmlDeviceGetCount()):
            name = self._nvml.nvmlDeviceGetName(self._nvml.nvmlDeviceGetHandleByIndex(i))
            out.append(name.decode() if isinstance(name, bytes) else str(name))
        return out


def gpu_type_name(product: str) -> str:
    """A GPU type name for files from NVML's product name: 'NVIDIA H200' -> 'h200',
    'Tesla V100-SXM2-32GB' -> 'v100-sxm2-32gb'."""
    words = re.sub(r"^((nvidia|tesla|geforce)\s+)+", "", product.strip(), flags=re.I)
    slug = re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")
    return slug or "gpu"
