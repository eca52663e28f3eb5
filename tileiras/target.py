"""What the compiler knows of a target architecture before any code exists: how much shared
memory one CTA may use, and which of a kernel's optimization hints apply to it.

Passes in ``lower/`` decide with these (stage counts, staging sizes, TMA budgets) and
``codegen/`` checks its output against them; neither owns them.
"""
from __future__ import annotations

from typing import Optional

from .ir.attrs import DictAttr, IntegerAttr, OptimizationHintsAttr

#: the most shared memory one CTA may use (bytes), by compute capability; ptxas's limits
#: (CUDA programming guide, "Technical specifications per compute capability")
SMEM_LIMITS = {80: 166_912, 87: 166_912, 86: 101_376, 89: 101_376, 90: 232_448, 100: 232_448,
               101: 232_448, 103: 232_448, 110: 232_448, 120: 101_376, 121: 101_376}

HINT_NUM_CTA_IN_CGA = "num_cta_in_cga"
HINT_OCCUPANCY = "occupancy"
HINT_NUM_WORKER_WARPS = "num_worker_warps_per_cta"
HINT_NUM_STAGES = "num_stages"
DEFAULT_HINTS_KEY = "default"


def smem_limit(gpu_name: str) -> int:
    """The most shared memory (bytes) one CTA may use on ``gpu_name`` (``sm_XX[a|f]``)."""
    arch = int(gpu_name[3:].rstrip("af"))
    return SMEM_LIMITS.get(arch, SMEM_LIMITS[120] if arch >= 120 else 101_376)


def hints_for_arch(hints: Optional[OptimizationHintsAttr], gpu_name: str) -> dict[str, int]:
    """The integer hints that apply to ``gpu_name``: ``default``, then the target's own keys.

    Measured: ``<default = {occupancy = 4}, sm_90 = {num_worker_warps_per_cta = 8}>`` gives
    both on sm_90; keys given for another architecture are ignored.
    """
    merged: dict[str, int] = {}
    if hints is None:
        return merged
    for key in (DEFAULT_HINTS_KEY, gpu_name):
        for arch, d in hints.entries:
            if arch == key and isinstance(d, DictAttr):
                for name, value in d.entries:
                    if isinstance(value, IntegerAttr):
                        merged[name] = value.value
    return merged


def stages_hint(hints: Optional[OptimizationHintsAttr], arch: int) -> Optional[int]:
    """The ``num_stages`` hint for ``sm_<arch>``, or None: what every software pipeliner
    takes before its own modulo schedule."""
    return hints_for_arch(hints, f"sm_{arch}").get(HINT_NUM_STAGES) or None
