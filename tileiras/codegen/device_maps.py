"""Tensor maps the kernel builds itself (``lower.tma.TensorMapSpec.on_device``).

A grouped GEMM makes each group's views from its row of a table of arrays: no host
callback can fill their maps at launch.  NVIDIA's tileiras builds such maps on the device
(its sm_90 grouped GEMM, read from its PTX), and so do we, the same way:

* the driver gives the kernel a workspace in global memory: the host object asks for it
  (``abi.KernelInfo.workspace_bytes``) and its callback stores the address in the hidden
  ``.u64`` parameter after the maps (``host._workspace_ir``);
* map ``k`` of the warp that issues the boxes lies at ``%perctamemoryoffset + 128 k`` where
  the driver gives each CTA a memory area, else at ``workspace + (%smid + k %nsmid) * 8192 +
  %warpid * 128`` (``slot_address``): no two warps resident at once share a slot;
* one lane writes the map's 128 bytes, in the layout ``codegen.tensormap`` gives NVIDIA's
  encoder, to shared memory; the warp copies them into the slot with
  ``tensormap.cp_fenceproxy`` (a release to the tensor-map proxy, ``.sync.aligned``), and
  the lane that issues the boxes acquires them (``fence.proxy.tensormap::generic.acquire``)
  before its first ``cp.async.bulk.tensor`` reads the slot (``build_maps``).

``map_address`` names any map by its generic address: a hidden parameter's, or the slot a
built one lies in.
"""
from __future__ import annotations

from typing import Optional, Sequence

from llvmlite import ir

from ..lower.tma import MapField, TensorMapSpec
from . import intrinsics as X
from . import tensormap as TM
from .abi import TENSOR_MAP_BYTES, WORKSPACE_SM_BYTES, param_name

I32, I64 = ir.IntType(32), ir.IntType(64)
#: the address bits a map holds (4-56: 16-byte aligned, below 2**57)
ADDRESS_MASK = ((1 << 57) - 1) & ~0xF


def map_address(em, index: int, spec: Optional[TensorMapSpec] = None, b: Optional[ir.IRBuilder] = None
                ) -> ir.Value:
    """Generic address of a tensor map: where ``build_maps`` built ``spec`` when the kernel
    builds it (``spec.on_device``), else hidden map parameter ``index`` (``cvta.param``,
    with builder ``b``, ``em.b`` by default)."""
    if spec is not None and spec.on_device:
        return em.built_maps[spec]
    return X.tensor_map_address(b or em.b, param_name(em.fn.name, len(em.fn.entry_block.args) + index))


def build_maps(em, maps: Sequence[tuple[TensorMapSpec, ir.Value]], warp: ir.Value, writer: ir.Value) -> None:
    """The warp where ``warp`` (i1, warp-uniform) holds builds each map (spec, shared address
    of its 128 assembly bytes) in its slot, lane ``writer`` assembling them, and acquires
    them for the boxes; ``em.built_maps`` then gives their generic addresses
    (``map_address``).  Every thread computes the slots' addresses (its own warp's: only
    the building warp's are used)."""
    b = em.b
    slots = [slot_address(em, em.tas.device_maps.index(spec)) for spec, _ in maps]
    generic = [generic_address(em, slot) for slot in slots]
    with b.if_then(warp):
        for (spec, staging), slot in zip(maps, slots):
            build_map(em, spec, slot, staging, writer)
        for address in generic:
            acquire_map(em, address)
    for (spec, _), address in zip(maps, generic):
        em.built_maps[spec] = address


def workspace_param(em) -> str:
    """The hidden workspace pointer: the parameter after the hidden maps."""
    return param_name(em.fn.name, len(em.fn.entry_block.args) + len(em.tas.tensor_maps))


def slot_address(em, k: int) -> ir.Value:
    """Global address (i64) of this warp's slot for the kernel's device-built map ``k``."""
    b = em.b
    own = X.asm(b, I64, "mov.u64 $0, %perctamemoryoffset;", "=l", [], side_effect=True)
    workspace = X.asm(b, I64, f"ld.param.u64 $0, [{workspace_param(em)}];", "=l", [])
    sm, warp = X.sreg_here(b, "smid"), X.sreg_here(b, "warpid")
    if k:
        sm = b.add(sm, b.mul(X.sreg_here(b, "nsmid"), ir.Constant(I32, k)))
    shared = b.add(b.mul(b.zext(sm, I64), ir.Constant(I64, WORKSPACE_SM_BYTES)),
                   b.mul(b.zext(warp, I64), ir.Constant(I64, TENSOR_MAP_BYTES)))
    in_workspace = b.add(workspace, shared)
    in_cta = b.add(own, ir.Constant(I64, TENSOR_MAP_BYTES * k)) if k else own
    return b.select(b.icmp_unsigned("!=", own, ir.Constant(I64, 0)), in_cta, in_workspace)


def _field(em, field: MapField) -> ir.Value:
    """One field of the map as an i64: a constant, an entry argument or a value the kernel
    computed (pointers as their address, narrower integers zero-extended)."""
    b = em.b
    if field.op is not None:
        v = em.values[field.op.results[field.result]].scalar
    elif field.param is not None:
        v = em.values[em.fn.entry_block.args[field.param]].scalar
    else:
        return ir.Constant(I64, field.value)
    if isinstance(v.type, ir.PointerType):
        return b.ptrtoint(v, I64)
    return b.zext(v, I64) if v.type.width < 64 else v


def _words(em, spec: TensorMapSpec) -> list[ir.Value]:
    """The map's 32 little-endian words, as ``tensormap.encode`` lays them out."""
    b = em.b
    eb = spec.element_bytes
    address = b.and_(_field(em, spec.base), ir.Constant(I64, ADDRESS_MASK))
    dims = [_field(em, f) for f in spec.dims]
    strides = [b.mul(_field(em, f), ir.Constant(I64, eb)) for f in spec.strides]
    span = b.mul(dims[0], ir.Constant(I64, eb))
    for dim, stride in zip(dims[1:], strides):
        span = b.add(span, b.mul(b.sub(dim, ir.Constant(I64, 1)), stride))
    flags = (TM.FIXED_BITS | (len(dims) - 1) << TM.RANK_SHIFT | spec.element_type << TM.TYPE_SHIFT
             | spec.swizzle << TM.SWIZZLE_SHIFT)
    large = b.icmp_unsigned(">=", span, ir.Constant(I64, TM.LARGE_SPAN))
    static = bytearray(TM.MAP_BYTES)
    for i, box in enumerate(spec.box):
        static[TM.BOX_AT + i] = box - 1
    words: list[ir.Value] = [ir.Constant(I32, int.from_bytes(static[4 * i:4 * i + 4], "little"))
                             for i in range(TM.MAP_BYTES // 4)]
    words[0] = b.trunc(address, I32)
    words[1] = b.trunc(b.lshr(address, ir.Constant(I64, 32)), I32)
    words[2] = b.select(large, ir.Constant(I32, flags | TM.LARGE_BIT), ir.Constant(I32, flags))
    for i, stride in enumerate(strides):
        words[TM.STRIDES_AT // 4 + i] = b.trunc(b.lshr(stride, ir.Constant(I64, 4)), I32)
    for i, dim in enumerate(dims):
        words[TM.DIMS_AT // 4 + i] = b.trunc(b.sub(dim, ir.Constant(I64, 1)), I32)
    return words


def build_map(em, spec: TensorMapSpec, slot: ir.Value, staging: ir.Value, writer: ir.Value) -> None:
    """(A whole warp, converged) map ``spec`` written to ``slot`` (generic global address):
    lane ``writer`` (i1) assembles its bytes in shared memory at ``staging`` (32-bit
    address, 128-aligned), the warp copies them to the slot for the tensor-map proxy."""
    b = em.b
    words = _words(em, spec)
    with b.if_then(writer):
        for q in range(0, len(words), 4):
            X.asm(b, ir.VoidType(), f"st.shared.v4.b32 [$0+{4 * q}], {{$1, $2, $3, $4}};",
                  "r,r,r,r,r,~{memory}", [staging, *words[q:q + 4]], side_effect=True)
    X.asm(b, ir.VoidType(), "bar.warp.sync -1;", "~{memory}", [], side_effect=True)
    X.asm(b, ir.VoidType(), "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu"
          f".sync.aligned [$0], [$1], {TM.MAP_BYTES};", "l,r,~{memory}", [slot, staging], side_effect=True)


def generic_address(em, slot: ir.Value) -> ir.Value:
    """The generic address of the global ``slot`` (what TMA instructions take)."""
    return X.asm(em.b, I64, "cvta.global.u64 $0, $1;", "=l,l", [slot])


def acquire_map(em, generic: ir.Value) -> None:
    """This thread will read the map at ``generic`` through the tensor-map proxy: acquire
    what ``build_map``'s release published."""
    X.asm(em.b, ir.VoidType(), f"fence.proxy.tensormap::generic.acquire.gpu [$0], {TM.MAP_BYTES};",
          "l,~{memory}", [generic], side_effect=True)
