"""CTA sizes fitted to NVIDIA's tileiras: how many warps a kernel's CTA has.

NVIDIA decides it in passes we do not have
(its warp specialization, its schedule pass, a cost model); the rules here are fitted to
the ``.reqntid`` its tileiras 13.5 writes, and say on which measurements:

* ``DEFAULT_WARPS``: 4 warps for a kernel without a hint (``.reqntid 128`` on every kernel
  of the aligned corpus that has no warp group beside its workers); a kernel whose tiles
  all hold one element takes a single warp;
* ``mma_extra_warps``: a warp group beside the workers for matrix multiplies NVIDIA runs
  warp-specialized (``TCGEN05_ARCHS`` and ``SIMT_WS_THRESHOLDS``; measured on every
  power-of-two shape from 16 to 256 and K from 4 to 512, test_abi_vs_real.py);
* ``multimem_extra_warps``: a second warp group for multimem ops NVIDIA stages through
  shared memory (measured on sm_100, test_multimem.py CTA_SIZES and LOAD_CTA_SIZES);
* ``wgmma_pair``, ``wide_loop_tiles``: where ours is faster than NVIDIA's sizes, not fitted
  to them: two consumer warp groups for sm_90 GEMMs whose 128-row tiles a persistent or
  grouped kernel multiplies, 8 warps for loops over tiles too wide for 4 (measured on an
  H200);
* ``scaled_products``: 8 warps where a K loop's product is held beside its accumulator
  (NVIDIA's two consumer warp groups on sm_90 and sm_120);
* ``wide_live_tiles``: 8 warps where tiles held across a reduction would take 128
  registers a thread on 4 (``live_across_reductions``), where ours spilled on 4 and
  NVIDIA's did not (it guards unaligned accesses by branches, which keeps ptxas from
  hoisting loads beside them).

The CTA size is not part of the launch contract (cuTile launches with a 1x1x1 block and the
driver reads ``REQNTID``: ``tileiras.gpu.device``), so a rule may leave NVIDIA's where that
runs faster.

``choose_num_warps`` combines them with the kernel's ``num_worker_warps`` hint.
"""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Operation, Value
from ..knobs import knobs
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.traits import is_contraction, is_plain_load
from .tileaa import TileAA, unpairable
from .tma import enclosing_loop, users_map
from .tiles import is_tile

#: Warps of a kernel without a hint whose biggest tile has more than one element (NVIDIA's
#: tileiras: 128 threads, before the warp groups below).
DEFAULT_WARPS = 4
#: Architectures with tcgen05 tensor cores: NVIDIA's tileiras runs their matrix multiplies
#: warp-specialized, with a warp group (4 warps) beside the workers (the CTA size is kernel ABI).
TCGEN05_ARCHS = (100, 103, 107, 110)
#: mmaf operand types tcgen05.mma takes (kind::f16, kind::tf32, kind::f8f6f4), with their bits.
TCGEN05_OPERAND_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f8E4M3FN": 8, "f8E5M2": 8}
#: SIMT matrix multiplies (f32 on FMA units, f64) NVIDIA's tileiras also warp-specializes
#: when big enough: M*N at least 16384, or M*N*K at least the first number, or K at least the
#: second with M*N at least the third, or K at least the fourth (fitted to its .reqntid on
#: every power-of-two shape from 16 to 256 and K from 4 to 512; f32 alike on sm_90, sm_100
#: and sm_120, never on sm_8x; f64 measured on sm_100 only, sm_90 and sm_120 differ).
SIMT_WS_THRESHOLDS = {"f32": (1 << 17, 64, 1024, 128), "f64": (1 << 18, 256, 512, 512)}


def mma_extra_warps(op: Operation, arch: int) -> int:
    """Warps NVIDIA's tileiras (13.5) adds to the CTA for this matrix multiply, as read from
    ``.reqntid`` (test_abi_vs_real.py has the cases):

    * mmaf on tcgen05 archs with tcgen05 operands: M >= 64, N >= 8 and K of at least 256 bits
      (16 f16, 8 tf32, 32 f8): 4 warps, 8 when M is 64 and N above 256;
    * mmaf_scaled on tcgen05 archs: M and N >= 32 (32x16 and 16x32 keep 128 threads);
    * f32 mmaf on sm_90+, f64 on tcgen05 archs: 4 warps by ``SIMT_WS_THRESHOLDS``.

    Other shapes keep the plain CTA size (integer ones always; NVIDIA decides tensor-core
    types too small for tcgen05, and f64 or those below sm_100, by a cost model not
    reproduced here)."""
    if not isinstance(op, (AR.MmaFOp, AR.MmaFScaledOp)):
        return 0
    m, n = op.results[0].type.shape[-2:]
    if isinstance(op, AR.MmaFScaledOp):
        return 4 if arch in TCGEN05_ARCHS and m >= 32 and n >= 32 else 0
    operand = T.element_type(op.lhs.type).name
    k = op.lhs.type.shape[-1]
    bits = TCGEN05_OPERAND_BITS.get(operand)
    if arch in TCGEN05_ARCHS and bits and m >= 64 and n >= 8 and k * bits >= 256:
        return 8 if m == 64 and n > 256 else 4
    limits = SIMT_WS_THRESHOLDS.get(operand)
    if limits is None or arch < 90 or (operand == "f64" and arch not in TCGEN05_ARCHS):
        return 0
    work, long_k, wide, longest_k = limits
    big = m * n >= 16384 or m * n * k >= work or (k >= long_k and m * n >= wide) or k >= longest_k
    return 4 if big else 0


#: Worker warps of an sm_90 kernel without a hint that multiplies 128-row tiles (or a
#: multiple) in a ``wgmma`` K loop run again per tile (inside a loop over tiles: a
#: persistent GEMM) or through views the kernel makes from addresses it loads (a grouped
#: GEMM's tensor maps are built on the device): two consumer warp groups, 64 rows each.
#: On an H200 (bench/results/README.md, 2026-11-28), each against NVIDIA's tileiras on the
#: same bytecode: TileGym's persistent GEMM (8192^3 f16) 1.16x NVIDIA's time with 4
#: warps, 1.00x with 8 (NVIDIA's own with 8: 1.24x its 4); the grouped GEMM (8 x 2048^3)
#: 1.24x -> 1.07x; the persistent grouped one 1.32x -> 0.99x.  A top-level K loop over
#: kernel arguments keeps 4 (two CTAs an SM already give two warp groups).
WGMMA_PAIR_WARPS = 8
#: operand types a 128-row ``wgmma`` K loop multiplies (f32 operands go to tf32 only where
#: the kernel asks for it)
WGMMA_OPERANDS = ("f16", "bf16", "f8E4M3FN", "f8E5M2")


def wgmma_pair(aa: TileAA, arch: int) -> bool:
    """Does the kernel run a ``WGMMA_PAIR_WARPS`` rule's K loop (sm_90)?"""
    if arch != 90:
        return False
    for op in aa.live_ops():
        if not isinstance(op, AR.MmaFOp) or T.element_type(op.lhs.type).name not in WGMMA_OPERANDS:
            continue
        m, n = op.results[0].type.shape[-2:]
        loop = enclosing_loop(op)
        if m % 128 or n % 8 or not isinstance(loop, CF.ForOp):
            continue
        body = loop.regions[0].blocks[0]
        if op.parent is not body or op.acc.owner is not body:      # the K loop's carried accumulator
            continue
        if enclosing_loop(loop) is not None or any(_made_by_kernel(aa, v) for v in (op.lhs, op.rhs)):
            return True
    return False


#: Architectures where a K loop's product that the loop does not carry (each K tile's
#: product scaled before it is added: an fp8 GEMM with block scales) of at least
#: ``WIDE_TILE_ELEMENTS`` takes ``WGMMA_PAIR_WARPS`` workers: the product beside the
#: accumulator took 255 registers a thread on 4 warps and spilled 400-430 bytes (TileGym's
#: W8A8 GEMM and DeepSeek's block-scaled one, 128x128x128 fp8: ``bench/code_quality.py``),
#: where NVIDIA's tileiras runs them on two consumer warp groups (384 threads with its
#: producer's, 168 registers).  sm_100 reads the product back from tensor memory (149).
SCALED_PRODUCT_ARCHS = (90, 120)


def scaled_products(aa: TileAA, arch: int) -> bool:
    """Does the kernel multiply, directly in a ``for`` loop's body, into a product of at
    least ``WIDE_TILE_ELEMENTS`` that the loop does not carry (on ``SCALED_PRODUCT_ARCHS``)?"""
    if arch not in SCALED_PRODUCT_ARCHS:
        return False
    for op in aa.live_ops():
        loop = enclosing_loop(op) if isinstance(op, AR.MmaFOp) else None
        if not isinstance(loop, CF.ForOp) or op.parent is not loop.regions[0].blocks[0]:
            continue
        if op.acc.owner is not op.parent and op.results[0].type.num_elements >= WIDE_TILE_ELEMENTS:
            return True
    return False


#: Elements of a tile from which a kernel without matrix multiplies that makes such tiles in
#: a loop takes ``WGMMA_PAIR_WARPS`` workers: 128 registers a thread on 4 warps for one f32
#: tile, before anything else the loop keeps.  TileGym's persistent RMS norm (4 x 8192 bf16
#: rows a trip, f32 math) on an H200: 2.63x NVIDIA's time on 4 warps (255 registers,
#: spills), 1.31x on 8 (168, none); NVIDIA's tileiras runs it on 384 threads on sm_90,
#: sm_100 and sm_120 (4 x 4096 too; 128 on sm_80), bench/results/README.md, 2026-11-28.
#: On 4 warps ours spilled 348-1040 bytes a thread in the 4 x 8192 norms of sm_80, sm_100
#: and sm_120 and took 255 registers in the 4 x 4096 layer norm (NVIDIA 168-193); on 8
#: none spills and the 4 x 4096 ones take 86-184 (test_norm_registers.py).
WIDE_TILE_ELEMENTS = 128 * 32 * 4


def wide_loop_tiles(aa: TileAA) -> bool:
    """Does a kernel without matrix multiplies make a tile of at least
    ``WIDE_TILE_ELEMENTS`` elements inside a loop (a persistent norm's row block)?  Any
    arch: the register file a thread may use is the same from sm_80 to sm_120.
    ``TILEIRAS_WIDE_LOOP_WARPS=0`` turns the rule off."""
    return _wide_rules_apply(aa) and any(enclosing_loop(op) is not None and is_tile(r)
                                         and r.type.num_elements >= WIDE_TILE_ELEMENTS
                                         for op in aa.live_ops() for r in op.results)


def _wide_rules_apply(aa: TileAA) -> bool:
    """May ``wide_loop_tiles`` and ``wide_live_tiles`` apply: the knob on, no matrix
    multiply in the kernel (its CTA size is the multiply's)?"""
    return knobs.wide_loop_warps and not any(is_contraction(op) for op in aa.live_ops())


#: 32-bit registers a thread of ``DEFAULT_WARPS`` warps holds in tiles live across a
#: reduction or scan from which a kernel without matrix multiplies takes
#: ``WGMMA_PAIR_WARPS`` workers: the whole of one f32 tile of ``WIDE_TILE_ELEMENTS``.
#: Values live across a reduction are held whole (every element of a row before its sum),
#: and ptxas, hoisting a tile's loads over one another, holds what they load beside them.
#: Measured against NVIDIA's tileiras (``ptxas -v``, 128 threads both, the kernels of
#: test_live_tiles.py with realistic shapes): a fused residual add and RMS norm of 4 x 4096
#: bf16 rows (the sum live across the row sums, 128 registers) spilled 132-604 bytes on
#: every arch (NVIDIA 162-239 registers, no spills; it guards each unaligned access by a
#: branch, which keeps ptxas from hoisting the loads); a softmax backward of 4 x 4096 f16
#: (y and dy, 256) spilled 128-200 bytes; a layer norm backward of 8 x 1024 (x-hat, w*dy
#: and dy, 192) 32-504.  On 8 warps none spills.
LIVE_ACROSS_WORDS = WIDE_TILE_ELEMENTS // (DEFAULT_WARPS * 32)


def live_across_reductions(aa: TileAA) -> float:
    """The most 32-bit registers a thread of ``DEFAULT_WARPS`` warps holds in tiles that must
    be whole at a reduction or scan: those defined before it (in its block, or around the op
    holding it) and used after it, and a scan's own result (each thread's partial sums wait
    for the sums of the threads before it)."""
    users = users_map(aa)
    most = 0.0
    for block in _blocks(aa.function):
        ops = [op for op in block.ops if op not in aa.dead]
        where = {op: k for k, op in enumerate(ops)}
        collective = {}             # position -> registers its scans' results hold
        for k, op in enumerate(ops):
            inner = [o for o in op.walk() if isinstance(o, (CO.ReduceOp, CO.ScanOp))]
            if inner:
                collective[k] = sum(_words(r) for o in inner if isinstance(o, CO.ScanOp) for r in o.results)
        if not collective:
            continue
        spans = []
        for k, op in enumerate(ops):
            for r in op.results:
                last = max((where.get(_in_block(u, block), -1) for u in users.get(r, ()) if u not in aa.dead),
                           default=-1)
                spans.append((k, last, _words(r)))
        for j, own in collective.items():
            most = max(most, own + sum(w for k, last, w in spans if k < j < last))
    return most


def _words(v: Value) -> float:
    """32-bit registers a thread of ``DEFAULT_WARPS`` warps holds of tile ``v`` (16-bit
    elements two a register, pointers two)."""
    if not is_tile(v) or v.type.rank == 0:
        return 0.0
    element = v.type.element
    bits = element.bitwidth if isinstance(element, T.ScalarType) else 64
    return v.type.num_elements * max(bits, 16) / 32 / (DEFAULT_WARPS * 32)


def _blocks(fn) -> list:
    """Every block of ``fn``, nested ones included."""
    out = [fn.entry_block]
    for op in fn.walk():
        out += [b for region in op.regions for b in region.blocks]
    return out


def _in_block(op: Operation, block) -> Optional[Operation]:
    """``op`` or the op around it whose parent is ``block`` (None: not inside ``block``)."""
    while op is not None and op.parent is not block:
        region = op.parent.parent if op.parent is not None else None
        op = region.parent if region is not None else None
    return op


def wide_live_tiles(aa: TileAA) -> bool:
    """Does a kernel without matrix multiplies hold at least ``LIVE_ACROSS_WORDS`` registers
    a thread across a reduction (on ``DEFAULT_WARPS`` warps)?  ``TILEIRAS_WIDE_LOOP_WARPS=0``
    turns this rule off too."""
    return _wide_rules_apply(aa) and live_across_reductions(aa) >= LIVE_ACROSS_WORDS


def _made_by_kernel(aa: TileAA, tile: Value) -> bool:
    """Is ``tile`` loaded (through relabels) from a view whose base address the kernel
    computes rather than takes as an argument?"""
    from .tma import map_field

    while not is_plain_load(tile.owner) and len(tile.owner.operands) == 1 and tile.owner.regions == []:
        tile = tile.owner.operands[0]
        if tile.is_block_argument:
            return False
    load = tile.owner
    if not isinstance(load, MEM.LoadViewTkoOp):
        return False
    tensor = load.view.owner.tensor_view.owner
    return isinstance(tensor, MEM.MakeTensorViewOp) and map_field(aa, tensor.base, 0) is None


def has_own_layout(op: Operation) -> bool:
    """Does ``op`` produce its tile in a layout of its own (not the multimem pair layout):
    plain loads and iota."""
    return is_plain_load(op) or isinstance(op, CO.IotaOp)


def multimem_extra_warps(op: Operation, aa: Optional[TileAA] = None) -> int:
    """Warps NVIDIA's tileiras (13.5) adds to the CTA for a multimem op (kernel ABI:
    ``.reqntid`` 256, not 128).  It stages the tile through shared memory: one warp group
    computes the tile and writes it there, a second group waits on an mbarrier, reads it and
    goes on.  Measured on sm_100 (test_multimem.py, CTA_SIZES and LOAD_CTA_SIZES):

    * a store or reduction of f16/bf16 pairs when the tile must change layout to become
      pairs (``needs_pairing``) and has more than one pair (a single pair takes a warp in
      each group: still 128 threads);
    * a load-reduce whose tile is used by anything but a ``store_view`` (arithmetic,
      a reduction: whatever the element type, f32 and f64 too), or, stored as it is, a
      16-bit one by ``load_reduce_stages``.

    We stage nothing: our layouts spread the tile over all eight warps, which issue the
    same ``multimem`` instructions (each thread half as many as a thread of NVIDIA's)."""
    if isinstance(op, MEM.MultimemLoadReduceViewTkoOp):
        return 4 if aa is not None and load_reduce_stages(op, aa) else 0
    if not isinstance(op, (MEM.MultimemStoreViewTkoOp, MEM.MultimemReduceViewTkoOp)):
        return 0
    tile = op.tile.type
    if tile.element.bitwidth != 16 or tile.num_elements <= 2:
        return 0
    return 4 if needs_pairing(op.tile) else 0


#: Consumers a load-reduce's tile goes to unchanged (a multimem store of it: 128 threads, measured).
#: Stage-local: a rule fitted to NVIDIA's CTA sizes, about these three ops and nothing they share.
STORED_AS_IT_IS = (MEM.StoreViewTkoOp, MEM.MultimemStoreViewTkoOp, MEM.MultimemReduceViewTkoOp)


def load_reduce_stages(op: Operation, aa: TileAA) -> bool:
    """Does NVIDIA's tileiras run this load-reduce in a warp group of its own?  Fitted to its
    ``.reqntid`` on sm_100 (test_multimem.py, LOAD_CTA_SIZES; the rule is not NVIDIA's own,
    which its schedule pass decides): always when the tile feeds anything but a
    store (``STORED_AS_IT_IS``); stored as it is, 32/64-bit tiles never, 16-bit ones under 64 elements
    (pairs fewer than a warp's lanes) and from 512 elements, but not from 64 to 256, nor
    256x2 (NVIDIA loops over its rows) nor 1024 elements of at least 8 along the last
    dim and 8 across the others (one measured shape, 4x32x8, breaks this last part).
    Unpairable 16-bit tiles (``tileaa.unpairable``) emit no code: 128 threads."""
    if unpairable(op):  # no code, whatever uses its (undefined) tile
        return False
    tile = op.results[0]
    if any(tile in u.operands and not isinstance(u, STORED_AS_IT_IS) for u in aa.live_ops()):
        return True
    shape = tuple(tile.type.shape)
    n = tile.type.num_elements
    if tile.type.element.bitwidth != 16 or 64 <= n <= 256 or shape == (256, 2):
        return False
    if n == 1024 and len(shape) >= 2 and 8 <= shape[-1] <= n // 8:
        return False
    return True


def needs_pairing(v: Value) -> bool:
    """Does tile ``v`` come from a producer with a layout of its own (loads, iota, values
    carried by a block), through any ops?  Constants, single elements and multimem
    loads take the pair layout as they are (NVIDIA keeps 128 threads for them)."""
    seen: set[Value] = set()
    work = [v]
    while work:
        u = work.pop()
        if u in seen or u.type.num_elements == 1 or isinstance(u.owner, MEM.MultimemLoadReduceViewTkoOp):
            continue
        seen.add(u)
        if u.is_block_argument or has_own_layout(u.owner) or u.owner.regions:
            return True
        work.extend(x for x in u.owner.operands if is_tile(x))
    return False


def choose_num_warps(aa: TileAA, hint: Optional[int], arch: int = 0) -> tuple[int, int]:
    """(warps the layouts use, extra warps in the CTA).  Layouts need a power of two;
    warps beyond it (a non-power-of-two hint, the MMA warp group) hold copies."""
    if hint:
        warps = hint
    elif wgmma_pair(aa, arch) or scaled_products(aa, arch) or wide_loop_tiles(aa) or wide_live_tiles(aa):
        warps = WGMMA_PAIR_WARPS
    else:
        biggest = max((r.type.num_elements for op in aa.live_ops() for r in op.results if is_tile(r)), default=1)
        warps = 1 if biggest <= 1 else DEFAULT_WARPS
    warps += max((max(mma_extra_warps(op, arch), multimem_extra_warps(op, aa)) for op in aa.live_ops()), default=0)
    layout_warps = 1 << (warps.bit_length() - 1)
    return layout_warps, warps - layout_warps
