"""What the body of a K loop a ring may pipeline holds: its working ops (``loop_body``),
the loads of a multiply's operands (through B's transpose or a unit reshape), a
gathered A, the ops beside them that cannot disturb a ring (``extra_reason``), and a
second multiply of the same A (``second_multiply``: a LoRA layer's x @ A beside x @ W).
Pure questions about the IR: ``software_pipeline`` and the ring planners decide with them."""
from __future__ import annotations

from typing import Optional, Union

from ..ir import types as T
from ..ir.attrs import DenseElementsAttr
from ..ir.core import Operation, Value
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import NoMemoryEffect, has_trait, is_contraction, is_plain_load


def loop_body(loop: CF.ForOp) -> list[Operation]:
    """The loop body's ops that do work: not the ``continue``, nor ``join_tokens`` (the
    tokens only order memory accesses; the loop's loads read what no op of the loop
    writes, so copying them iterations early reads the same)."""
    return [op for op in loop.regions[0].blocks[0].ops if not isinstance(op, (CF.ContinueOp, MEM.JoinTokensOp))]


def operand_loads(mma: Operation, body: list[Operation], permute: Optional[CO.PermuteOp], reshapes_ok: bool
                   ) -> Union[str, tuple[Operation, Operation]]:
    """The loads in ``body`` whose tiles are the multiply's A and B (through B's transpose
    or a unit reshape), or why they are not two of its loads."""
    found = []
    for k in (0, 1):
        via = permute if k and permute is not None else unit_reshape(mma, body, k) if reshapes_ok else None
        v = via.source if via is not None else mma.operands[k]
        ld = None if v.is_block_argument else v.owner
        if not isinstance(ld, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)) or ld not in body:
            return "the multiply's operands are not tiles the loop loads"
        found.append(ld)
    return (found[0], found[1]) if found[0] is not found[1] else "the multiply's operands are one loaded tile"


def extra_reason(tas, op: Operation, laid_out: bool = True) -> Optional[str]:
    """Why ``op``, in a pipelined K loop's body beside the loads and the multiply, could
    disturb the ring, or None: it must be an op without memory effects (it stays where it
    is, so one that may trap, ``divi``, or only states facts, ``assume``, as cuTile's
    gathers of scale rows do, is as good as a pure one) or a weak load from global memory,
    hold no region, no multiply, and (``laid_out``) need no shared memory (no scratch: the
    ring is the loop's scratch) nor a CTA barrier (a TMA load's: a warp-specialized ring's
    producer never reaches it)."""
    if op.regions or is_contraction(op):
        return f"the loop body also does {op.name}, which holds a region or multiplies"
    weak = op.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK) == MemoryOrderingSemantics.WEAK
    if not (has_trait(op, NoMemoryEffect) or (is_plain_load(op) and weak)):
        return f"the loop body also does {op.name}, which is neither pure nor a weak load"
    if laid_out and tas.scratch.get(op, 0):
        return f"the loop body also does {op.name}, which uses shared memory the ring occupies"
    if laid_out and op in tas.tma:
        return f"the loop body also does {op.name} through TMA, which waits at CTA barriers"
    return None


def gathered_a(mma: Operation, body: list[Operation]) -> Optional[Operation]:
    """A's load in the loop body when it is a gather through a tile of pointers, or None."""
    op = None if mma.lhs.is_block_argument else mma.lhs.owner
    return op if isinstance(op, MEM.LoadPtrTkoOp) and op in body else None


def unit_reshape(mma: Operation, body: list[Operation], k: int) -> Optional[CO.ReshapeOp]:
    """The ``reshape`` in the loop body that makes the multiply's operand ``k`` (A or B)
    from a view load's tile by dropping leading unit dims (``1 x K x N`` -> ``K x N``, a
    batched GEMM's or an expert's slice of a 3-D tensor), or None."""
    operand = mma.operands[k]
    op = None if operand.is_block_argument else operand.owner
    if not isinstance(op, CO.ReshapeOp) or op not in body:
        return None
    shape = op.source.type.shape
    src = None if op.source.is_block_argument else op.source.owner
    if (not isinstance(src, MEM.LoadViewTkoOp) or len(shape) < 3 or tuple(shape[-2:]) != tuple(op.result.type.shape)
            or any(d != 1 for d in shape[:-2])):
        return None
    return op


def consumer_of(mma: Operation, k: int, permute: Optional[CO.PermuteOp] = None) -> Operation:
    """The op that reads operand ``k``'s loaded tile: B's transpose, the reshape that drops
    its unit dims (``unit_reshape``), or the multiply."""
    if permute is not None and k == 1:
        return permute
    operand = mma.operands[k]
    op = None if operand.is_block_argument else operand.owner
    return op if isinstance(op, CO.ReshapeOp) else mma


def transposing(mma: Operation, body: list[Operation]) -> Optional[CO.PermuteOp]:
    """The ``permute [1, 0]`` in the loop body that makes the multiply's B, or None."""
    op = mma.rhs.owner
    if isinstance(op, CO.PermuteOp) and op in body and list(op.permutation) == [1, 0]:
        return op
    return None


def view_copy_reason(ld: Operation, columns_ok: bool = False) -> Optional[str]:
    """Why ``cp.async`` cannot copy the view load ``ld``'s tile row by row (a partition
    view, zero-padded or unpadded, rows contiguous in memory; with ``columns_ok`` columns
    may be instead, ``columns_contiguous``), or None."""
    vt = ld.view.type
    if not isinstance(vt, T.PartitionViewType):
        return "a load is not from a partition view"
    if vt.padding_value not in (None, T.PaddingValue.ZERO):
        return "a load pads with other than zeros (cp.async fills only zeros)"
    if columns_ok and columns_contiguous(ld):
        return None
    if vt.tensor_view.strides[-1] != 1 or vt.dim_map != tuple(range(len(vt.dim_map))):
        return "a loaded tile's rows are not contiguous in memory"
    return None


def columns_contiguous(ld: Operation) -> bool:
    """Does the 2-D view load ``ld`` read a row-major tensor through its dims swapped
    (``dim_map [1, 0]``), so its tile lies column by column in memory?  cuTile exports a
    transposed operand so (an fp8 GEMM's B, K-major as ``wgmma`` wants 8-bit B)."""
    if not isinstance(ld, MEM.LoadViewTkoOp):
        return False
    vt = ld.view.type
    return (isinstance(vt, T.PartitionViewType) and vt.dim_map == (1, 0)
            and vt.tensor_view.strides[-1] == 1)


def defined_outside(v: Value, loop: CF.ForOp) -> bool:
    """Is ``v`` defined outside ``loop`` (not by an op in it nor an argument of its body)?"""
    owner = v.owner
    inner = {id(op) for op in loop.walk()}
    if isinstance(owner, Operation):
        return id(owner) not in inner
    return not any(owner is blk for op in loop.walk() for r in op.regions for blk in r.blocks)


def zeros_before(value: Value, loop: CF.ForOp) -> bool:
    """Is ``value`` a constant of +0.0 everywhere, made outside ``loop``?  (A ``tcgen05``
    multiply from it starts without reading its accumulator: nothing is stored to tensor
    memory first.)"""
    op = value.owner
    return (isinstance(op, CO.ConstantOp) and defined_outside(value, loop)
            and isinstance(op.value, DenseElementsAttr) and isinstance(op.value.data, bytes)
            and not any(op.value.data))


def second_of(loop: CF.ForOp) -> Optional[Operation]:
    """The second multiply of the loop body's A (``second_multiply``), or None."""
    pair = second_multiply(loop_body(loop))
    return pair[1] if pair else None


def second_multiply(body: list[Operation]) -> Optional[tuple[Operation, Operation]]:
    """(first, second) of the body's two multiplies where both multiply one tile the body
    loads by tiles it loads (different ones) and neither reads the other's result (a LoRA
    layer's x @ W and x @ A in one K loop); else None."""
    mmas = [op for op in body if isinstance(op, (AR.MmaFOp, AR.MmaIOp))]
    if len(mmas) != 2 or any(op.result.type.rank != 2 for op in mmas) or mmas[0].lhs is not mmas[1].lhs:
        return None
    loads = [None if v.is_block_argument else v.owner for v in (mmas[0].lhs, mmas[0].rhs, mmas[1].rhs)]
    if not all(isinstance(ld, MEM.LoadViewTkoOp) and ld in body for ld in loads) or loads[1] is loads[2]:
        return None
    if any(mmas[0].result in op.operands for op in mmas[1:]) or mmas[1].result in mmas[0].operands:
        return None
    return mmas[0], mmas[1]
