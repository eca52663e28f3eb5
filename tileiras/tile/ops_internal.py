"""Compiler-internal ops: made by passes over the program as read, never read from or
written to bytecode (their opcodes are at ``INTERNAL_OPCODE_BASE`` and above)."""
from __future__ import annotations

from ..ir.core import Operation
from .constraints import SCALAR_I32, sig
from .registry import Attr, AttrKind, Result, tile_op
from .traits import Latency, OpClass, Pure


@tile_op("cluster_rank", traits=(Pure(), Latency(OpClass.FREE)))
class ClusterRankOp(Operation):
    """Which of the ``size`` CTAs of its cluster runs this code (``%cluster_ctaid.x``): the
    ``cluster-split`` pass divides a tile block's work among them by it."""

    result = Result()
    size = Attr(AttrKind.INT)
    syntax = "`size` `=` $size attr-dict `:` type($result)"
    signature = sig(result=SCALAR_I32)
