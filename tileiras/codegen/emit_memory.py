"""Views, loads and stores through views and pointer tiles (atomics: ``emit_atomics``).

Each thread computes the tensor coordinates of the elements it holds (through
the layout), masks those outside the tensor, and issues one predicated access
per element (or per run of elements ``vectorize`` proved aligned).  Copies of an
element held by several lanes of a warp (broadcast lane bits of the layout) are stored by
every holder, as NVIDIA's PTX does: they are one request, and a lane test would cost
registers; copies in other warps are not stored (``_and``: a warp-uniform predicate).  Repeated registers within a thread are stored once.
"""
from __future__ import annotations

import struct
from contextlib import nullcontext
from typing import Optional, Sequence, Union

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation
from ..lower.software_pipeline import pipelined_op
from ..lower.stream_pipeline import stream_plan
from ..lower.vectorize import access_dim, register_run
from ..record import record
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics, MemoryScope
from . import intrinsics as X
from . import subbyte as SB
from .nvvm import I32, I64, KernelEmitter, emits, runtime_mask
from .values import TensorViewVal, TiledViewVal, TileVal, llvm_type

Dim = Union[int, ir.Value]


def _i64(em: KernelEmitter, v: Dim) -> ir.Value:
    if isinstance(v, int):
        return ir.Constant(I64, v)
    return em.widen(v)


def _extent(em: KernelEmitter, x: ir.Value) -> ir.Value:
    """A dynamic shape or stride, as i64 when known non-negative (``KernelEmitter.widen``)."""
    return em.widen(x) if em.is_non_negative(x) else x


@emits(MEM.MakeTensorViewOp)
def _make_tensor_view(em: KernelEmitter, op: Operation) -> None:
    t = op.result.type
    # extents known non-negative are zero-extended here, once: ``ld.param.b32`` straight
    # into a 64-bit register, as in NVIDIA's PTX
    dyn_shape = iter(_extent(em, em.values[v].scalar) for v in op.dynamicShape)
    dyn_strides = iter(_extent(em, em.values[v].scalar) for v in op.dynamicStrides)
    shape = [next(dyn_shape) if d == T.DYNAMIC else d for d in t.shape]
    strides = [next(dyn_strides) if s == T.DYNAMIC else s for s in t.strides]
    base = em.values[op.base].scalar
    em.put(op.result, TensorViewVal(base, t.element, shape, strides))


@emits(MEM.MakePartitionViewOp, MEM.MakeStridedViewOp, MEM.MakeGatherScatterViewOp)
def _make_tiled_view(em: KernelEmitter, op: Operation) -> None:
    t = op.result.type
    tv = em.values[op.tensor_view]
    assert isinstance(tv, TensorViewVal)
    dim_map = getattr(t, "dim_map", tuple(range(len(t.tile_shape))))
    em.put(op.result, TiledViewVal(tv, t, t.tile_shape, dim_map,
                                   traversal=getattr(t, "traversal_strides", None),
                                   sparse_dim=getattr(t, "sparse_dim", None), padding=t.padding_value))


@emits(MEM.GetTensorShapeOp)
def _tensor_shape(em: KernelEmitter, op: Operation) -> None:
    v = em.values[op.src]
    tv = v.tensor if isinstance(v, TiledViewVal) else v
    for r, d in zip(op.results, tv.shape):
        to = llvm_type(r.type)
        val = ir.Constant(to, d) if isinstance(d, int) else _resize(em, d, to)
        em.put(r, TileVal(em.result_layout(r), [val]))


@emits(MEM.GetIndexSpaceShapeOp)
def _index_space(em: KernelEmitter, op: Operation) -> None:
    view = em.values[op.src]
    assert isinstance(view, TiledViewVal)
    for k, r in enumerate(op.results):
        em.put(r, TileVal(em.result_layout(r), [_resize(em, _tile_count(em, view, k), llvm_type(r.type))]))


def _tile_count(em: KernelEmitter, view: TiledViewVal, k: int) -> ir.Value:
    """How many tiles (i64) the view has along tile dim ``k``: ceil(extent / step)."""
    b = em.b
    extent = _i64(em, view.tensor.shape[view.dim_map[k]])
    step = view.traversal[k] if view.traversal else view.tile_shape[k]
    return b.udiv(b.add(extent, ir.Constant(I64, step - 1)), ir.Constant(I64, step))


def _resize(em: KernelEmitter, v: ir.Value, to: ir.Type) -> ir.Value:
    if v.type.width == to.width:
        return v
    return em.b.trunc(v, to) if v.type.width > to.width else em.b.sext(v, to)


# -- addressing ------------------------------------------------------------------------------
def scalar_indices(em: KernelEmitter, index: Sequence) -> list[Optional[ir.Value]]:
    """The LLVM values of a view access's rank-0 index operands (None for tiles of indices)."""
    return [em.values[v].scalar if em.values[v].layout.rank == 0 else None for v in index]


def _index_here(em: KernelEmitter, index: ir.Value) -> ir.Value:
    """A tile index extended to i64 by a ``cvt`` in the current block (``X.widen_here``),
    so that each access computes its own tile start from it (``cvt.u64.u32`` then
    ``shl.b64``), as NVIDIA's PTX does, rather than LLVM sharing one 64-bit start (or a
    phi of them) across the kernel, or forming a ``mul.wide.u32`` whose 64-bit product
    ptxas keeps in two registers (const_specialize abs sm_80 10 -> 8, NVIDIA 8).  An i64
    index that is an extension of an i32 (``exti``) is extended again the same way."""
    if isinstance(index, ir.CastInstr) and index.opname in ("zext", "sext") and index.operands[0].type == I32:
        return X.widen_here(em.b, index.operands[0], signed=index.opname == "sext")
    if isinstance(index, ir.Constant) or index.type.width != 32:
        return _i64(em, index)
    return X.widen_here(em.b, index, signed=not em.is_non_negative(index))


def tile_starts(em: KernelEmitter, view: TiledViewVal, indices: Sequence[ir.Value]) -> list[Optional[ir.Value]]:
    """Per tile dim, the tensor coordinate (i64) where the accessed tile starts (None
    along a gather/scatter's sparse dim, whose other indices are element offsets)."""
    starts: list[Optional[ir.Value]] = []
    for k in range(len(view.tile_shape)):
        if view.sparse_dim == k:
            starts.append(None)
        elif view.sparse_dim is not None:
            starts.append(_i64(em, indices[k]))
        else:
            step = view.traversal[k] if view.traversal else view.tile_shape[k]
            index = _index_here(em, indices[k]) if em.here else _i64(em, indices[k])
            starts.append(em.b.mul(index, ir.Constant(I64, step)))
    return starts


def _is_zero(v) -> bool:
    return isinstance(v, ir.Constant) and v.constant == 0


def tile_in_range(em: KernelEmitter, view: TiledViewVal, indices: Sequence[ir.Value]) -> Optional[ir.Value]:
    """Does the accessed tile start inside the tensor along every dim?  None for gathers.

    Loads branch around their whole access on it, as NVIDIA's PTX does (each element is
    still checked), and compute their addresses inside the branch from a fresh read of
    %tid.x and a fresh extension of the tile index (``KernelEmitter.coordinates_here``,
    ``_index_here``); stores compute theirs next to the stores the same way, without the
    branch.  The branch bounds how far ptxas hoists the next access's address arithmetic
    and loads, and the local address arithmetic keeps no index live from one access to
    the next (``guard_whole_store`` branches around some stores too): measured on the 69
    sm_90 corpus kernels, 9 more meet NVIDIA's registers + 10% (tuple_params 13 -> 10,
    NVIDIA 10; memory_ordering 14 -> 11; softmax_rows f32 40 -> 32).  Branching around
    stores too was worse where the stored value is long arithmetic (LLVM sinks it into
    the branch: int_arith i64 32 -> 38, ew_transcendental f64 50 -> 86; measured again on
    the whole corpus with the fresh index extensions: 67 kernels over NVIDIA + 10% instead
    of 50); without the fresh %tid.x reads loads were worse (tuple_params 12,
    flash_attention 214 -> 228).

    The test is NVIDIA's ``index < ceil(extent / tile)``, not ``index * tile < extent``:
    the tile count comes from parameters alone (ptxas computes it in uniform registers)
    and the 64-bit tile start is then needed only inside the accesses, where it is
    computed again; a start shared by the test and the accesses stays live in two
    registers across the kernel (scalar_axpby f64 sm_90 14 -> 12, NVIDIA 12)."""
    if view.sparse_dim is not None or all(_is_zero(i) for i in indices):
        return None     # a tile at the origin starts inside unless the tensor is empty, which
        # every element's own check covers; no branch lets order.py interleave the loads
    ok: Optional[ir.Value] = None
    for k, index in enumerate(indices):
        inside = em.b.icmp_unsigned("<", _i64(em, index), _tile_count(em, view, k))
        ok = inside if ok is None else em.b.and_(ok, inside)
    return ok


class Access:
    """Per-register addresses and in-bounds predicates of a view access.

    An address is the tensor's base plus (tile start + the element's coordinates in the
    tile) times the strides.  With ``from_tile_origin`` it is the tile origin's address
    (base + tile start times strides, one per access) plus the coordinates in the tile
    times the strides: that second part depends only on the thread, the layout and the
    strides, so LLVM computes it once for all accesses of a view (atomic_tile_reduce's five
    atomic reductions into tiles of one view: 48 -> 32 registers on sm_80, NVIDIA 40)."""

    def __init__(self, em: KernelEmitter, view: TiledViewVal, layout, indices: Sequence[ir.Value],
                 gather: Optional[list[ir.Value]] = None, from_tile_origin: bool = False):
        self.em, self.view, self.layout = em, view, layout
        b = em.b
        tv = view.tensor
        esize = max(1, view.tensor.element.bitwidth // 8) if isinstance(view.tensor.element, T.ScalarType) else 8
        self.addresses: list[ir.Value] = []
        self.offsets: list[int] = []       # constant byte offset added to each address
        self.masks: list[ir.Value] = []
        rank = len(view.tile_shape)
        starts = tile_starts(em, view, indices)
        runtime_only = em.coords(layout, 0) if layout.size("reg") else []
        origin = _tile_origin(em, view, starts, esize) if from_tile_origin else None
        bases: dict[tuple, ir.Value] = {}
        for reg in range(layout.size("reg")):
            c = em.coords(layout, reg)
            const = layout.apply(reg=reg)
            ok: Optional[ir.Value] = None
            folded = 0          # bytes known at compile time: an immediate of the instruction
            key: list = []      # what the rest of the address depends on
            coords: list = []
            for k in range(rank):
                d = view.dim_map[k]
                if view.sparse_dim == k:
                    t = _i64(em, gather[reg])
                    key.append(("gather", reg))
                    coords.append(t)
                else:
                    within = b.zext(c[k], I64)
                    t = b.add(starts[k], within)
                    stride = tv.strides[d]
                    if isinstance(stride, int) and const[k] & runtime_mask(layout, k) == 0:
                        folded += const[k] * stride * esize
                        within = b.zext(runtime_only[k], I64)
                        first = b.add(starts[k], within)
                        if const[k] and rank == 1 and not _constant(starts[k], {}):
                            t = _element_index(b, first, const[k])
                        coords.append(within if origin is not None else first)
                    else:
                        key.append((k, const[k]))
                        coords.append(within if origin is not None else t)
                inb = b.icmp_unsigned("<", t, _i64(em, tv.shape[d]))
                ok = inb if ok is None else b.and_(ok, inb)
            if tuple(key) not in bases:
                offset: ir.Value = ir.Constant(I64, 0)
                for k, t in enumerate(coords):
                    offset = b.add(offset, b.mul(t, _i64(em, tv.strides[view.dim_map[k]])))
                start = tv.base if origin is None else origin
                bases[tuple(key)] = b.gep(start, [b.mul(offset, ir.Constant(I64, esize))],
                                          source_etype=ir.IntType(8))
            self.addresses.append(bases[tuple(key)])
            self.offsets.append(folded)
            self.masks.append(ok if ok is not None else ir.Constant(ir.IntType(1), 1))


def _element_index(b: ir.IRBuilder, first: ir.Value, const: int) -> ir.Value:
    """The index of a register ``const`` elements after the thread's ``first`` one (64
    bits: tile start + thread coordinate), as NVIDIA's PTX adds it (``add.s64 %rd, %rd,
    128``) rather than forming each register's coordinate in 32 bits and adding the tile
    start to that: ptxas then keeps the tile start live beside the first index (pdl_chain
    f32 sm_100 12 -> 10 registers, NVIDIA 12).  Not for a constant tile start, where
    LLVM tests the 32-bit coordinate itself (insert_tiles sm_120 32 -> 38), nor for a
    tile of several dims, whose row indices are multiplied by a stride (padding_modes
    64x32 sm_120 48 -> 52, NVIDIA 47)."""
    return b.add(first, ir.Constant(I64, const))


def _tile_origin(em: KernelEmitter, view: TiledViewVal, starts: list[Optional[ir.Value]], esize: int) -> ir.Value:
    """Address of the accessed tile's first element (a gather's sparse dim counts from 0)."""
    b = em.b
    offset: ir.Value = ir.Constant(I64, 0)
    for k, start in enumerate(starts):
        if start is not None:
            offset = b.add(offset, b.mul(start, _i64(em, view.tensor.strides[view.dim_map[k]])))
    return b.gep(view.tensor.base, [b.mul(offset, ir.Constant(I64, esize))], source_etype=ir.IntType(8))


def _qualifiers(op: Operation, space: str = "global", store: bool = False) -> str:
    sem = op.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK)
    if sem == MemoryOrderingSemantics.WEAK:
        return space
    scope = {MemoryScope.TL_BLK: "cta", MemoryScope.DEVICE: "gpu", MemoryScope.SYS: "sys"}[
        op.attributes.get("memory_scope", MemoryScope.DEVICE)]
    name = {MemoryOrderingSemantics.RELAXED: "relaxed", MemoryOrderingSemantics.ACQUIRE: "acquire",
            MemoryOrderingSemantics.RELEASE: "release", MemoryOrderingSemantics.ACQ_REL: "acq_rel"}[sem]
    if name == "acq_rel":
        name = "release" if store else "acquire"
    return f"{name}.{scope}.{space}"


def padding_constant(t: ir.Type, padding: Optional[T.PaddingValue]) -> ir.Constant:
    if isinstance(t, (ir.FloatType, ir.DoubleType, ir.HalfType)) or str(t) == "bfloat":
        value = {None: 0.0, T.PaddingValue.ZERO: 0.0, T.PaddingValue.NEG_ZERO: -0.0,
                 T.PaddingValue.NAN: float("nan"), T.PaddingValue.POS_INF: float("inf"),
                 T.PaddingValue.NEG_INF: float("-inf")}[padding]
        return ir.Constant(t, value)
    if isinstance(t, ir.PointerType):
        return ir.Constant(t, None)
    return ir.Constant(t, 0)


def _leaves_outside_unwritten(em: KernelEmitter, view: TiledViewVal, ty: ir.Type) -> bool:
    """May the load leave the elements outside the tensor unwritten?

    Without a padding value they are unspecified (spec: views), and NVIDIA's PTX leaves
    their registers unwritten; dropping the ``mov`` of a default before each predicated
    ``ld`` saves ptxas a register in small kernels (multi_entry i64 sm_80 9 -> 8, NVIDIA
    8).  Not for elements narrower than 32 bits (ptxas packs two 16-bit loads into one
    register only when both are defined: multi_entry f16 sm_100 10 -> 12) nor inside a
    loop, where the register left unwritten keeps the previous iteration's value alive
    (padding_modes 40 -> 43, load_order_f 32 -> 36)."""
    return view.padding is None and element_bits(ty) >= 32 and not em.in_loop


def barrier_if_ordered(em: KernelEmitter, op: Operation) -> None:
    """Token-ordered after a write: other threads' writes must be visible."""
    if em.tas.aa.needs_barrier(op):
        X.barrier(em.b)


def _load_bits(em: KernelEmitter, ty: ir.Type, address: ir.Value, mask: ir.Value, fallback: Optional[ir.Value],
               qualifiers: str, offset: int = 0) -> ir.Value:
    """Predicated scalar load at ``address + offset`` bytes, ``fallback`` where ``mask``
    is false (unspecified bits when None); floats travel as same-width integers through
    the asm."""
    b = em.b
    if isinstance(ty, ir.PointerType):
        fb = None if fallback is None else [b.ptrtoint(fallback, I64)]
        return b.inttoptr(X.predicated_load(b, I64, 1, address, mask, fb, qualifiers, offset)[0], ty)
    if isinstance(ty, ir.IntType) and ty.width == 1:
        fb = None if fallback is None else [b.zext(fallback, ir.IntType(8))]
        raw = X.predicated_load(b, ir.IntType(8), 1, address, mask, fb, qualifiers, offset)[0]
        return b.icmp_unsigned("!=", raw, ir.Constant(ir.IntType(8), 0))
    it = ir.IntType(element_bits(ty))
    fb = None if fallback is None else [b.bitcast(fallback, it) if not isinstance(ty, ir.IntType) else fallback]
    raw = X.predicated_load(b, it, 1, address, mask, fb, qualifiers, offset)[0]
    return b.bitcast(raw, ty) if not isinstance(ty, ir.IntType) else raw


def _store_bits(em: KernelEmitter, value: ir.Value, address: ir.Value, mask: Optional[ir.Value], qualifiers: str,
                offset: int = 0) -> None:
    b = em.b
    ty = value.type
    if isinstance(ty, ir.PointerType):
        value = b.ptrtoint(value, I64)
    elif isinstance(ty, ir.IntType) and ty.width == 1:
        value = b.zext(value, ir.IntType(8))
    elif not isinstance(ty, ir.IntType):
        value = b.bitcast(value, ir.IntType(element_bits(ty)))
    X.predicated_store(b, [value], address, mask, qualifiers, offset)


def _words(ty: ir.Type, count: int) -> tuple[ir.IntType, int]:
    """The integer words ``count`` consecutive elements of ``ty`` move in, and how many:
    32-bit words (64-bit for 64-bit elements), at most four (16 bytes), as NVIDIA's PTX
    moves f16 and 8-bit data (``ld.global.v4.b32``)."""
    bits = element_bits(ty)
    word = max(32, bits) if bits * count >= 32 else bits * count
    return ir.IntType(word), bits * count // word


def _load_vector(em: KernelEmitter, ty: ir.Type, count: int, address: ir.Value, mask: ir.Value,
                 fallback: Optional[ir.Value], qualifiers: str, offset: int = 0) -> list[ir.Value]:
    """``count`` consecutive elements in one predicated ``ld.v{2,4}`` (``vectorize``: the
    facts proved the run aligned and wholly in or out of bounds, so one mask covers it)."""
    b = em.b
    word, n = _words(ty, count)
    per = count // n
    bits = element_bits(ty)
    fb = None
    if fallback is not None:
        one = (fallback.constant & ((1 << bits) - 1) if isinstance(ty, ir.IntType)
               else float_bits(fallback.constant, ty))
        value = 0
        for j in range(per):
            value |= one << (j * bits)
        fb = [ir.Constant(word, value)] * n
    words = X.predicated_load(b, word, n, address, mask, fb, qualifiers, offset)
    if per == 1:
        return [w if isinstance(ty, ir.IntType) else b.bitcast(w, ty) for w in words]
    # through an LLVM vector: NVPTX splits a word into halves with one ``mov.b32 {a, b}``
    lanes = ir.VectorType(ty, per)
    return [b.extract_element(b.bitcast(w, lanes), ir.Constant(I32, j)) for w in words for j in range(per)]


def _store_vector(em: KernelEmitter, values: list[ir.Value], address: ir.Value, mask: Optional[ir.Value],
                  qualifiers: str, offset: int = 0) -> None:
    """``values`` (consecutive elements) packed into words and stored by one ``st.v{2,4}``."""
    b = em.b
    ty = values[0].type
    word, n = _words(ty, len(values))
    per = len(values) // n
    words = []
    for i in range(n):
        if per == 1:
            v = values[i]
            words.append(v if isinstance(ty, ir.IntType) else b.bitcast(v, word))
            continue
        packed: ir.Value = ir.Constant(ir.VectorType(ty, per), None)
        for j in range(per):
            packed = b.insert_element(packed, values[i * per + j], ir.Constant(I32, j))
        words.append(b.bitcast(packed, word))
    X.predicated_store(b, words, address, mask, qualifiers, offset)


def store_groups(regs: list[int], vector: int) -> list[list[int]]:
    """The stored registers in aligned runs of ``vector`` (each run wholly stored), the
    rest one by one."""
    present = set(regs)
    groups: list[list[int]] = []
    covered: set[int] = set()
    for r in regs:
        if r in covered:
            continue
        if vector > 1 and r % vector == 0 and all(r + j in present for j in range(vector)):
            groups.append(list(range(r, r + vector)))
            covered.update(groups[-1])
        else:
            groups.append([r])
    return groups


def element_bits(t: ir.Type) -> int:
    if isinstance(t, ir.IntType):
        return t.width
    if isinstance(t, ir.HalfType) or str(t) == "bfloat":
        return 16
    if isinstance(t, ir.FloatType):
        return 32
    if isinstance(t, (ir.DoubleType, ir.PointerType)):
        return 64
    raise CompileError(f"no memory width for {t}")


def gather_indices(em: KernelEmitter, op: Operation, view: TiledViewVal, layout, index_ops: Sequence) -> Optional[list[ir.Value]]:
    """For gather/scatter views: the sparse-dim index of every register's element."""
    if view.sparse_dim is None:
        return None
    k = view.sparse_dim
    pos = list(op.operands).index(index_ops[k])
    idx = em.tile(op, pos)
    from .emit_shape import lookup_by_coord  # noqa: PLC0415
    return lookup_by_coord(em, idx, op.operands[pos].type, layout, [k])


def _planned_vector(em: KernelEmitter, op: Operation, layout) -> int:
    """The load's planned width (``tas.vectors``), for the layout it was planned in: a load
    computed again in another layout (``TileAS.recomputed``, to spare a conversion) may
    hold no run there, and then goes element by element."""
    vector = em.tas.vectors.get(op, 1)
    if vector > 1 and register_run(layout, access_dim(op)) < vector:
        return 1
    return vector


@emits(MEM.LoadViewTkoOp)
def _load_view(em: KernelEmitter, op: Operation) -> None:
    view = em.values[op.view]
    assert isinstance(view, TiledViewVal)
    if pipelined_op(em.tas, op) is not None:       # copied by its loop's cp.async stages
        em.put(op.results[0], None)
        em.put(op.results[1], None)
        return
    if stream_plan(em.tas, op) is not None:     # its loop's steady state read it (``emit_stream``)
        return
    if op in em.tas.tma:
        from .emit_tma import emit_tma_load

        emit_tma_load(em, op, scalar_indices(em, op.index))
        return
    barrier_if_ordered(em, op)
    layout = em.result_layout(op.results[0])
    indices = scalar_indices(em, op.index)
    gather = gather_indices(em, op, view, layout, op.index)
    q = _qualifiers(op)
    if SB.is_subbyte(view.tensor.element):
        nib = SB.nibble_access(em, view, layout, indices, gather)
        em.put(op.results[0], TileVal(layout, SB.load_nibbles(em, nib, SB.padding_bits(view.padding), q)))
        em.put(op.results[1], None)
        return
    ty = llvm_type(op.results[0].type)
    pad = padding_constant(ty, view.padding)

    fallback = None if _leaves_outside_unwritten(em, view, ty) else pad

    vector = _planned_vector(em, op, layout)
    if vector > 1:  # 32-bit words or wider: ptxas's reason to define narrow elements is gone
        fallback = None if view.padding is None and not em.in_loop else pad

    # a tile only staged for CUDA-core multiplies: the first copy's warps load it alone
    owner = em.warp_owner(layout) if op in em.tas.warp_owned else None

    def load() -> list[ir.Value]:
        acc = Access(em, view, layout, indices, gather)
        masks = [_and(em, m, owner) for m in acc.masks]
        if vector > 1:
            return [x for r in range(0, len(acc.addresses), vector)
                    for x in _load_vector(em, ty, vector, acc.addresses[r], masks[r], fallback, q, acc.offsets[r])]
        return [_load_bits(em, ty, a, m, fallback, q, o) for a, m, o in zip(acc.addresses, masks, acc.offsets)]

    guard = tile_in_range(em, view, indices)
    if guard is None:
        regs = load()
    else:
        before = em.b.block
        with em.b.if_then(guard), em.coordinates_here(layout.size("reg")):
            loaded = load()
            inside = em.b.block
        regs = []
        for v in loaded:
            phi = em.b.phi(v.type)
            em.load_merges.add(id(phi))
            phi.add_incoming(v, inside)
            phi.add_incoming(pad, before)
            regs.append(phi)
    em.put(op.results[0], TileVal(layout, regs))
    em.put(op.results[1], None)


@emits(MEM.StoreViewTkoOp)
def _store_view(em: KernelEmitter, op: Operation) -> None:
    view = em.values[op.view]
    assert isinstance(view, TiledViewVal)
    if op in em.tas.tma:            # its barrier ahead of the staging orders it (``emit_tma_store``)
        from .emit_tma import emit_tma_store

        emit_tma_store(em, op, scalar_indices(em, op.index), em.tile(op, 0))
        return
    barrier_if_ordered(em, op)
    tile = em.tile(op, 0)
    layout = tile.layout
    indices = scalar_indices(em, op.index)
    gather = gather_indices(em, op, view, layout, op.index)
    owner = em.owner_predicate(layout)
    q = _qualifiers(op, store=True)
    if SB.is_subbyte(view.tensor.element):
        nib = SB.nibble_access(em, view, layout, indices, gather)
        SB.store_nibbles(em, nib, tile.regs, em.unique_regs(layout), owner, q)
        em.put(op.results[0], None)
        return
    regs = em.unique_regs(layout)
    values = [tile.regs[r] for r in regs]
    apart = branch_per_element(em, values)
    guard = tile_in_range(em, view, indices) if guard_whole_store(em, values) else None
    owner = em.warp_owner(layout)
    with em.b.if_then(guard) if guard is not None else nullcontext(), em.coordinates_here(len(regs), tested=guard is not None):
        # the address arithmetic next to the stores (see tile_in_range)
        acc = Access(em, view, layout, indices, gather)
        for group in store_groups(regs, em.tas.vectors.get(op, 1)):
            reg = group[0]
            store = _store_bits if len(group) == 1 else _store_vector
            value = tile.regs[reg] if len(group) == 1 else [tile.regs[r] for r in group]
            mask = _and(em, acc.masks[reg], owner)
            if apart:
                with em.b.if_then(mask):
                    store(em, value, acc.addresses[reg], None, q, acc.offsets[reg])
            else:
                store(em, value, acc.addresses[reg], mask, q, acc.offsets[reg])
    em.put(op.results[0], None)


@record(frozen=True)
class Chain:
    """What computes a store's values: the ids of every instruction met walking back from
    them to where the walk stops (the merges of guarded loads, the prologue, memory
    accesses), the instructions of the current block computed on the way, and whether the
    walk stayed in the block (else a value comes from another block: control flow)."""
    met: frozenset
    computed: tuple
    straight: bool


def value_chain(em: KernelEmitter, values: Sequence[ir.Value]) -> Chain:
    """The ``Chain`` of ``values``, walked back from the current block."""
    here, entry = em.b.block, em.llfn.blocks[0]
    met: set[int] = set()
    computed: list[ir.Instruction] = []
    straight = True
    work = list(values)
    while work:
        v = work.pop()
        if not isinstance(v, ir.Instruction) or id(v) in met:
            continue
        met.add(id(v))
        if id(v) in em.load_merges or v.parent is entry or X.is_memory_asm(v):
            continue
        if v.parent is not here:
            straight = False
            continue
        computed.append(v)
        work.extend(v.operands)
    return Chain(frozenset(met), tuple(computed), straight)


#: guard_whole_store's limits: registers stored, instructions computing each of them (any
#: chain, and one without ptxas slow paths)
WHOLE_STORE_GUARD_REGS = 4
WHOLE_STORE_GUARD_CHAIN = 4
WHOLE_STORE_GUARD_PLAIN_CHAIN = 64


def guard_whole_store(em: KernelEmitter, values: list[ir.Value]) -> bool:
    """Branch around the whole store on its tile test (``tile_in_range``), as NVIDIA's PTX
    branches around every store?  Without the branch ptxas moves the address arithmetic
    and predicates of consecutive stores into one block and keeps them live together: a
    tile loaded once and stored converted to five views (cvt_float_formats sm_100: 26
    registers, 18 with the branch, NVIDIA 20; sm_120 30 -> 19, NVIDIA 27), cat_extract
    sm_80 30 -> 19 (NVIDIA 22).

    Only for a few registers (``WHOLE_STORE_GUARD_REGS``; a matrix multiply's epilogue
    stores many: gemm_fp8 e4m3 sm_100 64 -> 72, mma_scaled_mx 72 -> 85), each computed by a
    short chain of the current block (``WHOLE_STORE_GUARD_CHAIN`` instructions), or by a
    longer one (``WHOLE_STORE_GUARD_PLAIN_CHAIN``) without ptxas slow paths (division,
    square root, 64-bit division: ``X.has_slow_path``).  LLVM sinks what the store needs
    into the branch: long arithmetic with slow paths got worse there (int_arith i64 28 ->
    40 registers, ew_transcendental f64 46 -> 54), and so did the 90-instruction chains of
    scans (scans_builtin f32 8x64 32 -> 46), while plain chains did better (int_bitwise u8
    t512 sm_120 28 -> 22, NVIDIA 25; grid3d 29 -> 22; scans_builtin i32 16x16 34 -> 28, NVIDIA
    30; bitcast_bits sm_90 10 -> 9, NVIDIA 9).  Measured on the corpus (492 kernels): 17 ->
    5 kernels over NVIDIA's registers + 10% (with nvvm.demand_order), none newly over."""
    if not 0 < len(values) <= WHOLE_STORE_GUARD_REGS:
        return False
    lengths = [len(value_chain(em, [v]).computed) for v in values]
    if max(lengths) <= WHOLE_STORE_GUARD_CHAIN:
        return True
    return max(lengths) <= WHOLE_STORE_GUARD_PLAIN_CHAIN and not any(
        X.has_slow_path(v) for v in value_chain(em, values).computed)


def _constant(v: ir.Value, known: dict[int, bool]) -> bool:
    """Is ``v`` known at compile time: a constant, or arithmetic or a comparison of such?"""
    if isinstance(v, ir.Constant):
        return True
    if not isinstance(v, ir.Instruction) or isinstance(v, (ir.CallInstr, ir.LoadInstr, ir.PhiInstr)):
        return False
    if id(v) not in known:
        known[id(v)] = all(_constant(u, known) for u in v.operands)
    return known[id(v)]


def branch_per_element(em: KernelEmitter, values: list[ir.Value]) -> bool:
    """Store each of ``values`` in its own branch (``if (in bounds) st``) rather than with a
    predicate?  ptxas schedules the independent chains that compute a thread's registers
    together when they share a basic block, and keeps several of them live at once; in a
    branch each chain gets a block of its own (LLVM sinks it there), as in NVIDIA's PTX.

    Only for chains that are straight-line code of the current block back to the loads (a
    chain with control flow cannot be sunk whole) and use no instruction that ptxas expands
    into a branchy slow path (IEEE division and square root, 64-bit integer division), whose
    blocks already keep the chains apart.  Measured on the corpus (476 kernels): int_arith
    i32 28 -> 19 registers on sm_90 (NVIDIA 22), int_bitwise u32 20 -> 14, transpose2d 28 ->
    22; branching always was worse for division-heavy kernels (ew_rounding f32 30 -> 38,
    int_arith i64 32 -> 36).  A single register branches too (cvt_float_rounding sm_100 13
    -> 11, NVIDIA 11; bitcast_bits sm_100 10 -> 9, NVIDIA 9), but not one read from shared
    memory (a layout conversion's result: pack_unpack_bytes f16 sm_90 13 -> 16, NVIDIA 14)."""
    if not values:
        return False
    chain = value_chain(em, values)
    if not chain.straight or any(X.has_slow_path(v) for v in chain.computed):
        return False
    if len(values) == 1 and any(isinstance(v, ir.LoadInstr) for v in chain.computed):
        return False
    here = em.b.block
    # sunk into the branches, the chains' inputs would stay live across collective work
    # done since (a scan's shuffles and barriers: scans_builtin i32 sm_80 26 -> 32)
    position = {id(inst): k for k, inst in enumerate(here.instructions)}
    first = min((position[k] for k in chain.met if k in position), default=len(here.instructions))
    return not any(X.is_collective(inst) and id(inst) not in chain.met for inst in here.instructions[first:])


def _reject_subbyte_pointers(op: Operation, ptrs: T.Type) -> None:
    """NVIDIA's tileiras reads no tile of ``ptr<f4E2M1FN>`` of rank > 0 (checked with 13.5)."""
    pointee = T.element_type(ptrs)
    if isinstance(pointee, T.PointerType) and SB.is_subbyte(pointee.pointee):
        raise CompileError(f"'{op.name}': tiles of {pointee} must have rank 0; use an f4 tile view for "
                           "memory accesses")


@emits(MEM.LoadPtrTkoOp)
def _load_ptr(em: KernelEmitter, op: Operation) -> None:
    _reject_subbyte_pointers(op, op.operands[0].type)
    if pipelined_op(em.tas, op) is not None:       # a gathered A its loop's cp.async stages copy
        em.put(op.results[0], None)
        em.put(op.results[1], None)
        return
    barrier_if_ordered(em, op)
    ptrs = em.tile(op, 0)
    n = len(op.operands)
    segs = op.segments
    mask = em.tile(op, 1) if segs[1] else None
    pad_pos = 1 + segs[1]
    pad = em.tile(op, pad_pos) if segs[2] else None
    ty = llvm_type(op.results[0].type)
    q = _qualifiers(op)
    regs = []
    vector = _planned_vector(em, op, ptrs.layout)
    true = ir.Constant(ir.IntType(1), 1)
    for r in range(0, len(ptrs.regs), vector):
        m = mask.regs[r] if mask else true
        if vector == 1:
            fb = pad.regs[r] if pad else padding_constant(ty, None)
            regs.append(_load_bits(em, ty, ptrs.regs[r], m, fb, q))
            continue
        # a run of consecutive addresses (``vectorize.pointer_vector``): one mask, and one
        # padding value unless the padding tile's registers differ (then selects)
        pads = [pad.regs[r + j] for j in range(vector)] if pad else [padding_constant(ty, None)] * vector
        same = all(isinstance(x, ir.Constant) and x.constant == pads[0].constant for x in pads)
        got = _load_vector(em, ty, vector, ptrs.regs[r], m, pads[0] if same else None, q)
        regs += got if same or m is true else [em.b.select(m, x, f) for x, f in zip(got, pads)]
    del n
    em.put(op.results[0], TileVal(ptrs.layout, regs))
    em.put(op.results[1], None)


@emits(MEM.StorePtrTkoOp)
def _store_ptr(em: KernelEmitter, op: Operation) -> None:
    _reject_subbyte_pointers(op, op.operands[0].type)
    barrier_if_ordered(em, op)
    ptrs = em.tile(op, 0)
    vals = em.tile(op, 1)
    mask = em.tile(op, 2) if op.segments[2] else None
    q = _qualifiers(op, store=True)
    owner = em.warp_owner(ptrs.layout)
    for group in store_groups(em.unique_regs(ptrs.layout), _planned_vector(em, op, ptrs.layout)):
        reg = group[0]
        m = _and(em, mask.regs[reg] if mask else ir.Constant(ir.IntType(1), 1), owner)
        if len(group) == 1:
            _store_bits(em, vals.regs[reg], ptrs.regs[reg], m, q)
        else:
            _store_vector(em, [vals.regs[r] for r in group], ptrs.regs[reg], m, q)
    em.put(op.results[0], None)


def _and(em: KernelEmitter, mask: ir.Value, owner: Optional[ir.Value]) -> ir.Value:
    """A store's mask in the warps that store (``owner``: ``KernelEmitter.warp_owner``): a
    tile whose copies span warps (a scalar, a row narrower than the CTA) is stored by the
    first copy's warps only, as each other warp's copy would be a request of its own for the
    same sectors (raw_memory's scalar store: 4 requests a CTA, NVIDIA's 1); so is a load
    that ``TileAS.warp_owned`` records.  Within a warp
    the copies are one request, so every lane of those warps stores.  A predicate, not a
    branch: the values stored stay computed next to their stores (``order``)."""
    if owner is None:
        return mask
    if isinstance(mask, ir.Constant) and mask.constant:
        return owner
    return em.b.and_(mask, owner)


# -- globals -----------------------------------------------------------------------------------
@emits(CO.GetGlobalOp)
def _get_global(em: KernelEmitter, op: Operation) -> None:
    name = op.attributes["name"]
    g = em.module.globals.get(name)
    if g is None:
        raise CompileError(f"unknown global '@{name}'")
    em.put(op.result, TileVal(em.result_layout(op.result), [g]))


def define_globals(llmod: ir.Module, globals_: Sequence) -> None:
    """Module-level ``global``s as initialized device globals (bytes, as in the bytecode).

    As NVIDIA's tileiras: a public global is a ``.visible`` symbol (the host can look it
    up by name), emitted even when no kernel uses it; a private one is internal and goes
    when unused.  The alignment is the global's ``alignment`` or else its element size."""
    for g in globals_:
        arr = ir.ArrayType(ir.IntType(8), len(g.data))
        var = ir.GlobalVariable(llmod, arr, name=g.name, addrspace=1)
        var.initializer = ir.Constant(arr, bytearray(g.data))
        var.align = g.alignment or max(1, T.element_type(g.type).bitwidth // 8)
        var.global_constant = bool(g.constant)
        var.linkage = "internal" if g.is_private else ""
        var.type = ir.PointerType(addrspace=1)


def float_bits(value: float, t: ir.Type) -> int:
    """The bits of a float of LLVM type ``t`` (bfloat: the top half of the f32's, exact for
    the padding values that use it)."""
    if str(t) == "bfloat":
        return int.from_bytes(struct.pack("<f", value), "little") >> 16
    fmt = {"half": "<e", "float": "<f", "double": "<d"}[str(t)]
    return int.from_bytes(struct.pack(fmt, value), "little")
