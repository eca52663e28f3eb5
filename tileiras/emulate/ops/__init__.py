"""Instruction semantics, one module per family; importing registers every handler."""
from . import (bulk, control, convert, cpasync, data, floating, integer, matrix, mbarrier, memory, mma,  # noqa: F401
               tcgen05, tensormap, warp)
