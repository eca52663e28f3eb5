"""The counted loop every emitter that walks a static range builds: one LLVM loop with the
values it carries as phis (straight-line code when it would run once)."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from .nvvm import I32, KernelEmitter


def counted_loop(em: KernelEmitter, name: str, stop: int, stride: int, init: list[ir.Value],
                 step: Callable[[ir.Value, list[ir.Value]], list[ir.Value]], start: int = 0) -> list[ir.Value]:
    """``step(i, values)`` for i = start, start + stride, ... below ``stop``, threading
    ``values`` from ``init`` through an LLVM loop (straight-line code for a single step);
    the values after the last step."""
    b = em.b
    if stop - start <= stride:
        return step(ir.Constant(I32, start), init)
    pre = b.block
    loop = em.llfn.append_basic_block(name)
    done = em.llfn.append_basic_block(f"{name}.done")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I32)
    i.add_incoming(ir.Constant(I32, start), pre)
    phis = []
    for v in init:
        phi = b.phi(v.type)
        phi.add_incoming(v, pre)
        phis.append(phi)
    new = step(i, phis)
    nxt = b.add(i, ir.Constant(I32, stride))
    tail = b.block
    i.add_incoming(nxt, tail)
    for phi, v in zip(phis, new):
        phi.add_incoming(v, tail)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, stop)), loop, done)
    b.position_at_end(done)
    return new
