"""Our own cuTile kernels, exported to Tile IR bytecode by test/conftest.py.

Each module lists ``CASES``; together they cover the op families of Tile IR
(arithmetic, math, conversions, reductions, scans, mma, control flow, memory,
atomics, debug ops, shape ops, 4-bit floats, persistent GEMMs and norms, transformer building
blocks, training and serving kernels, several entries per module, tuple parameters).
"""
from __future__ import annotations

from . import (control, elementwise, linalg, memory, misc, models, norms, persistent, reductions, shapes,
               subbyte, workloads)
from ._case import KernelCase

ALL_CASES: tuple[KernelCase, ...] = tuple(
    case for module in (elementwise, reductions, linalg, persistent, norms, models, workloads, control, memory,
                          shapes, misc, subbyte)
    for case in module.CASES)

_names = [c.name for c in ALL_CASES]
assert len(_names) == len(set(_names)), "kernel case names must be unique"
