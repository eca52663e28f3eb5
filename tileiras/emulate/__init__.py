"""A PTX emulator: parse PTX text and execute a kernel over a grid of CTAs on numpy.

``launch(ptx, kernel, grid, args)`` runs ``kernel`` with numpy arrays as global memory and
returns an ``EmulationResult`` (printf output, trap/assert information, instruction counts).
Threads are vectorised: each step executes one instruction for every thread of a batch of
CTAs that is at it (see ``machine`` for the divergence scheme).
"""
from .launch import EmulationError, EmulationResult, PrintfRecord, TrapInfo, launch, load_program
from .parser import Module, PtxParseError, parse_ptx
from .registry import UnsupportedInstruction

__all__ = ["launch", "load_program", "EmulationResult", "EmulationError", "PrintfRecord",
           "TrapInfo", "parse_ptx", "Module", "PtxParseError", "UnsupportedInstruction"]
