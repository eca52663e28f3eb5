"""mov (scalars, symbols, special registers, vector pack/unpack) and no-op instructions."""
from __future__ import annotations

import numpy as np

from ..operands import reader, type_of, writer
from ..parser import Vec
from ..ptxtypes import RAW_DTYPES, ptx_type
from ..registry import handles


@handles("mov")
def compile_mov(ctx, ins):
    ty = type_of(ins.parts)
    dst, src = ins.operands[0], ins.operands[1]
    if isinstance(src, Vec):           # mov.b64 %rd, {%r1, %r2}: pack, element 0 lowest
        k = len(src.items)
        ety = ptx_type(f"b{ty.bits // k}")
        readers = [reader(ctx, op, ety) for op in src.items]
        write = writer(ctx, dst, ty)
        eraw = RAW_DTYPES[ety.bits]

        def pack(m, idx):
            parts = [np.asarray(r(m, idx)) for r in readers]
            shape = np.broadcast_shapes(*[p.shape for p in parts])
            out = np.zeros(shape, np.uint64)
            for j, p in enumerate(parts):
                out |= np.broadcast_to(p.view(eraw) if p.dtype != eraw else p, shape).astype(np.uint64) << np.uint64(ety.bits * j)
            write(m, idx, out.astype(ty.dtype))
        return pack
    if isinstance(dst, Vec):           # mov.b64 {%r1, %r2}, %rd: unpack
        k = len(dst.items)
        ety = ptx_type(f"b{ty.bits // k}")
        read = reader(ctx, src, ty)
        writers = [writer(ctx, op, ety) for op in dst.items]
        emask = np.uint64((1 << ety.bits) - 1)

        def unpack(m, idx):
            v = np.asarray(read(m, idx)).astype(np.uint64)
            for j, w in enumerate(writers):
                w(m, idx, ((v >> np.uint64(ety.bits * j)) & emask).astype(ety.dtype))
        return unpack
    read = reader(ctx, src, ty)
    write = writer(ctx, dst, ty)
    return lambda m, idx: write(m, idx, read(m, idx))


def noop(ctx, ins):
    return lambda m, idx: None


# hints and register-allocation directives have no observable effect
for _name in ("prefetch", "prefetchu", "pmevent", "nanosleep", "griddepcontrol",
              "setmaxnreg", "discard", "applypriority", "createpolicy", "wgmma_fence_placeholder"):
    handles(_name)(noop)


def proxy_fence(m, idx) -> None:
    """``fence.proxy.async``: the race detector's record that these threads' generic
    shared writes are visible to the async proxy (``races``)."""
    races = m.shared_races()
    if races is not None:
        from .memory import thread_ids

        races.proxy_fence(thread_ids(m, idx))


@handles("fence", "membar")
def compile_fence(ctx, ins):
    """Sequentially consistent memory needs no fences; in the interleaved mode (weak.py) a
    fence at GPU or system scope releases and acquires (``membar.cta``, ``fence.*.cta`` and
    the proxy fences order nothing between CTAs)."""
    mods = set(ins.parts[1:])
    cross_cta = (mods & {"gl", "sys", "gpu"}) and not any(p.startswith("proxy") for p in mods)
    if ins.parts[0] == "membar":
        cross_cta = bool(mods & {"gl", "sys"})
    if {"proxy", "async"} <= mods:
        return proxy_fence
    if {"proxy", "tensormap::generic", "acquire"} <= mods:
        from .tensormap import acquire
        return acquire(ctx, ins)
    if not cross_cta:
        return noop(ctx, ins)

    def run(m, idx):
        if m.weak is not None:
            m.weak.publish()
            m.weak.refresh()
    return run
