"""Pass ``hoist-views``: views made inside a loop from values made outside it move before
the loop.

cuTile up to bytecode 13.1 makes a K loop's partition views inside the loop
(``make_partition_view`` of a tensor view made before it, every trip); 13.4 makes them
before.  A view is pure and its operands do not change from trip to trip, so making it once
before the loop is the same program, and the loop then has the shape the pipelining passes
look for (two tile loads feeding a multiply): without this, 13.1 GEMMs were not pipelined
(sm_90: one synchronous TMA load and wait per trip where NVIDIA's tool keeps a ring).
"""
from __future__ import annotations

from ..ir.core import Function, Operation
from ..tile import ops_control as CF
from ..tile import ops_memory as MEM

def hoist_views(fn: Function) -> int:
    """Move every view op of a loop body whose operands are made outside the loop to just
    before the loop, innermost loops first, so a view hoisted out of an inner loop may leave
    the outer one too.  Returns how many moved."""
    moved = 0
    for loop in reversed([op for op in fn.walk() if isinstance(op, (CF.ForOp, CF.LoopOp))]):
        inside = {id(op) for op in loop.walk()}
        body = loop.regions[0].blocks[0]
        args = {id(a) for region in loop.regions for block in region.blocks for a in block.args}
        for op in [op for op in body.ops if isinstance(op, (MEM.MakePartitionViewOp, MEM.MakeTensorViewOp))]:
            if all(id(v.owner) not in inside and id(v) not in args for v in op.operands):
                _move_before(op, loop)
                inside.discard(id(op))
                moved += 1
    return moved


def _move_before(op: Operation, anchor: Operation) -> None:
    op.parent.ops.remove(op)
    block = anchor.parent
    block.ops.insert(block.ops.index(anchor), op)
    op.parent = block
