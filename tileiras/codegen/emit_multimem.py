"""multimem ops: load-reduce, store and reduce of a multicast object through a partition view.

A multicast pointer addresses the same buffer on every GPU of an NVLink multicast group;
PTX's ``multimem.ld_reduce`` reads all copies and returns their reduction,
``multimem.st`` writes every copy, ``multimem.red`` reduces into every copy.  As NVIDIA's
tileiras 13.5 (measured on sm_100 for every op, element type, reduction, ordering and
scope):

* each instruction is ``.relaxed.sys``, whatever the op's ordering and scope; an acquire
  load is followed by one ``fence.acquire.<scope>`` after all its instructions; a release
  store or reduction puts ``fence.release.<scope>`` before every instruction, run by the
  threads that issue it when the tile starts inside the tensor, whether or not its element
  is in bounds (NVIDIA's branches: tile, fence, element, instruction).  NVIDIA leaves out
  a fence when no other memory access came since the last one: its f16/bf16 pairs staged
  through shared memory and read with one ``ldmatrix`` get a single fence for all their
  instructions (not reproduced: we stage no pairs; ``tileas.multimem_extra_warps`` has
  when NVIDIA stages them, which sizes the CTA);
* one scalar instruction per element for 32/64-bit types (integers: ``.u``/``.s``/``.b``
  by reduction; floats: ``add`` only, min/max are for 16-bit floats);
* f16/bf16 only in pairs, ``.v2`` (PTX has no scalar 16-bit multimem access); a load-add
  accumulates in f32 (``.acc::f32``).  ``tileas.multimem_layout`` gives those tiles two
  consecutive elements of the unit-stride dim per register pair, lanes and warps over
  consecutive pairs (as NVIDIA's: a warp's instruction covers 128 contiguous bytes); a
  pair is in bounds when its first element is (as NVIDIA's).  A tile with no such pairs
  gets no code at all (a load's tile is undefined: ``tileaa.unpairable``), as NVIDIA's.

Stores and reductions are issued once per element (copies held by several threads are
skipped); loads by every thread holding the element.
"""
from __future__ import annotations

from llvmlite import ir

from ..errors import CompileError
from ..ir.core import Operation
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics, MemoryScope, MultimemReductionKind
from . import intrinsics as X
from .emit_memory import Access, barrier_if_ordered, padding_constant, scalar_indices, tile_in_range
from .nvvm import KernelEmitter, emits
from .values import TiledViewVal, TileVal, llvm_type

R = MultimemReductionKind
_SCOPES = {MemoryScope.TL_BLK: "cta", MemoryScope.DEVICE: "gpu", MemoryScope.SYS: "sys"}
_QUALIFIERS = "relaxed.sys.global"


def _is_half(ty: ir.Type) -> bool:
    return isinstance(ty, ir.HalfType) or str(ty) == "bfloat"


def _type_suffix(ty: ir.Type, kind: R | None = None) -> str:
    """PTX type of one element: the reduction picks signedness (min/max signed, umin/umax
    and add unsigned) or bits (and/or/xor) for integers."""
    if isinstance(ty, ir.IntType):
        letter = {R.MIN: "s", R.MAX: "s", R.AND: "b", R.OR: "b", R.XOR: "b"}.get(kind, "u")
        return f"{letter}{ty.width}"
    if _is_half(ty):
        return "f16" if isinstance(ty, ir.HalfType) else "bf16"
    return "f32" if isinstance(ty, ir.FloatType) else "f64"


def _reduction(kind: R) -> str:
    return {R.UMIN: "min", R.UMAX: "max"}.get(kind, kind.keyword)


def _scope(op: Operation) -> str:
    return _SCOPES[op.attributes.get("memory_scope", MemoryScope.SYS)]


def _access(em: KernelEmitter, op: Operation, layout) -> Access:
    return Access(em, _view(em, op), layout, _indices(em, op))


def _view(em: KernelEmitter, op: Operation) -> TiledViewVal:
    view = em.values[op.view]
    assert isinstance(view, TiledViewVal)
    return view


def _indices(em: KernelEmitter, op: Operation) -> list[ir.Value]:
    return scalar_indices(em, op.index)


def _groups(em: KernelEmitter, op: Operation, layout, ty: ir.Type) -> list[list[int]]:
    """The registers of one instruction each: single registers, or pairs of 16-bit floats
    whose second element follows the first in memory."""
    if not _is_half(ty):
        return [[r] for r in range(layout.size("reg"))]
    view = em.values[op.view]
    unit = [k for k, d in enumerate(view.dim_map) if view.tensor.strides[d] == 1]
    step = tuple(1 if k == unit[0] else 0 for k in range(layout.rank)) if unit else None
    if layout.size("reg") < 2 or layout.bases("reg")[0] != step:  # tileaa.unpairable emits nothing
        raise CompileError(f"'{op.definition.full_name}' with element type '{op.view.type.tensor_view.element}' "
                           "requires at least 2 contiguous element(s) per thread (PTX multimem minimum "
                           "granularity), but no valid layout could be assigned. Consider using a wider tile.")
    return [[r, r + 1] for r in range(0, layout.size("reg"), 2)]


def _width(t: ir.Type) -> int:
    return 16 if _is_half(t) else 32 if isinstance(t, ir.FloatType) else 64


def _as_bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """Floats cross the asm boundary as same-width integers."""
    return v if isinstance(v.type, ir.IntType) else b.bitcast(v, ir.IntType(_width(v.type)))


@emits(MEM.MultimemLoadReduceViewTkoOp)
def _multimem_load_reduce(em: KernelEmitter, op: Operation) -> None:
    barrier_if_ordered(em, op)
    b = em.b
    layout = em.result_layout(op.results[0])
    ty = llvm_type(op.results[0].type)
    groups = _groups(em, op, layout, ty)
    acc = _access(em, op, layout)
    kind = op.reduction
    accumulate = ".acc::f32" if _is_half(ty) and kind is R.ADD else ""
    qualifiers = f"{_QUALIFIERS}.{_reduction(kind)}{accumulate}"
    it = ir.IntType(_width(ty)) if not isinstance(ty, ir.IntType) else ty
    pad = _as_bits(b, padding_constant(ty, op.view.type.padding_value))
    regs: list[ir.Value] = [None] * layout.size("reg")  # type: ignore[list-item]
    for g in groups:
        first = g[0]
        raw = X.predicated_load(b, it, len(g), acc.addresses[first], acc.masks[first], [pad] * len(g),
                                qualifiers, acc.offsets[first], opcode="multimem.ld_reduce",
                                suffix=_type_suffix(ty, kind))
        for r, v in zip(g, raw):
            regs[r] = v if it is ty else b.bitcast(v, ty)
    if op.memory_ordering_semantics is MemoryOrderingSemantics.ACQUIRE:
        X.fence(b, "acquire", _scope(op))
    em.put(op.results[0], TileVal(layout, regs))
    em.put(op.results[1], None)


def _multimem_write(em: KernelEmitter, op: Operation, opcode: str, qualifiers: str, kind: R | None) -> None:
    """``multimem.st``/``multimem.red`` of the tile operand, once per element."""
    barrier_if_ordered(em, op)
    b = em.b
    tile = em.tile(op, 1)
    layout = tile.layout
    ty = llvm_type(op.tile.type)
    groups = _groups(em, op, layout, ty)
    acc = _access(em, op, layout)
    owner = em.owner_predicate(layout)
    unique = set(em.unique_regs(layout))
    release = op.memory_ordering_semantics is MemoryOrderingSemantics.RELEASE
    if release:
        fenced = [p for p in (tile_in_range(em, _view(em, op), _indices(em, op)), owner) if p is not None]
        fence_pred = b.and_(*fenced) if len(fenced) == 2 else fenced[0] if fenced else None
    for g in groups:
        first = g[0]
        if first not in unique:
            continue
        if release:
            X.fence(b, "release", _scope(op), fence_pred)
        mask = acc.masks[first] if owner is None else b.and_(acc.masks[first], owner)
        X.predicated_store(b, [_as_bits(b, tile.regs[r]) for r in g], acc.addresses[first], mask, qualifiers,
                           acc.offsets[first], opcode=opcode, suffix=_type_suffix(ty, kind))
    em.put(op.results[0], None)


@emits(MEM.MultimemStoreViewTkoOp)
def _multimem_store(em: KernelEmitter, op: Operation) -> None:
    _multimem_write(em, op, "multimem.st", _QUALIFIERS, None)


@emits(MEM.MultimemReduceViewTkoOp)
def _multimem_reduce(em: KernelEmitter, op: Operation) -> None:
    _multimem_write(em, op, "multimem.red", f"{_QUALIFIERS}.{_reduction(op.reduction)}", op.reduction)
