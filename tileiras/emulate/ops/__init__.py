"""Instruction semantics, one module per family; importing registers every handler."""
from . import bulk, control, convert, data, floating, integer, matrix, mbarrier, memory, mma, tcgen05, warp  # noqa: F401
