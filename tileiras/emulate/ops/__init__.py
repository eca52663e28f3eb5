"""Instruction semantics, one module per family; importing registers every handler."""
from . import control, convert, cpasync, data, floating, integer, matrix, mbarrier, memory, mma, tcgen05, warp  # noqa: F401
