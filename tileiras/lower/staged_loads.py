"""Loads whose copies in other warps nobody reads (``record_warp_owned_loads``).

A tile smaller than the CTA (a multiply's 64x2 block scales over 256 threads) is held in
copies: warps whose layout bases are zero hold the same elements as the first warps.
Each warp that loads its copy is a request of its own for the same sectors.  Where the
tile goes only to shared memory, staged for a CUDA-core multiply (``codegen/simt_mma``,
which stages from the warps holding the first copy), the other copies are never read: the
first copy's warps load it alone, as NVIDIA's tool loads such tiles with one warpgroup.
The decision is recorded in ``TileAS.warp_owned`` and printed by ``--emit=tileas``
(``{warp_owned = true}`` on the load); codegen masks those loads with the warp-uniform
predicate ``KernelEmitter.warp_owner``."""
from __future__ import annotations

from ..ir.core import Operation, Value
from ..layout.core import WARP
from ..tile import ops_memory as MEM
from ..tile.traits import is_contraction
from .software_pipeline import pipelined_op
from .stream_pipeline import stream_plan
from .subbyte import is_subbyte

#: The operands a CUDA-core multiply stages in shared memory: A, B and the block scales.
STAGED_OPERANDS = (0, 1, 3, 4)


def simt_multiply(tas, op: Operation) -> bool:
    """Does ``op`` multiply on CUDA cores (no tensor-core form, no K-loop ring)?"""
    return is_contraction(op) and tas.tensor_cores.get(op) is None and pipelined_op(tas, op) is None


def _only_staged(tas, v: Value) -> bool:
    """Is ``v`` read only as a staged operand of CUDA-core multiplies, with no layout change?"""
    users = tas.users(v)
    return bool(users) and all(
        simt_multiply(tas, u) and all(i in STAGED_OPERANDS and (u, i) not in tas.converts
                                      for i, x in enumerate(u.operands) if x is v)
        for u in users)


def record_warp_owned_loads(tas) -> None:
    """``TileAS.warp_owned``: the plain view loads (no TMA, ring, stream, forwarding or
    chunking) whose tile's layout repeats over warps and whose tile only CUDA-core
    multiplies stage."""
    forwarded = set(tas.forwarded) | {f.source for f in tas.forwarded.values()}
    tas.warp_owned = {}
    for op in tas.aa.live_ops():
        if not isinstance(op, MEM.LoadViewTkoOp) or op in tas.tma or op in forwarded or op in tas.chunked:
            continue
        tile = op.results[0]
        layout = tas.layouts.get(tile)
        if layout is None or not layout.broadcast_mask(WARP) or is_subbyte(tile.type):
            continue
        if pipelined_op(tas, op) is not None or stream_plan(tas, op) is not None:
            continue
        if _only_staged(tas, tile):
            tas.warp_owned[op] = True
