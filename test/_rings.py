"""Helpers for the TMA ring tests (test_tma_ring.py, test_mma_tma_ring.py, the attention
rings' test_attention_tma.py and test_attention_sync_ring.py): a kernel's PTX run on one CTA
in the emulator, the ring's mbarrier waits planted away, an attention ring's loop and the
protocol its refills keep, the faults planted in an attention ring's emitter, and a LoRA
layer run against numpy, the interpreter and the emulator (test_ring_extras.py,
test_ring_second.py)."""
from __future__ import annotations

import re

import numpy as np

from tileiras import diffcheck, interp
from tileiras.emulate import launch
from tileiras.text.parser import parse_module


def emulate_ring(text: str, extent: int, arch: str, edit=None) -> str:
    """Run the kernel's PTX (``edit``ed, which must change it) in the emulator on one CTA
    with our ``.nv.host`` filling its tensor maps; the PTX."""
    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    ptx, host = diffcheck.compile_with_host(module, arch)
    if edit is not None:
        edited = edit(ptx)
        assert edited != ptx
        ptx = edited
    launch(ptx, fn.name, (1, 1, 1), diffcheck.synthesize_args(fn, np.random.default_rng(1), extent),
           host_object=host).check()
    return ptx


def without_wait(ptx: str, which: str, consumer: str) -> str:
    """The mbarrier waits ``which`` ("full": the consumers', before the first ``consumer``
    instruction that reads the stage; "empty": the producer's before a refill; LLVM may
    unroll the producer's loop) made to succeed at once."""
    waits = list(re.finditer(r"\{ \.reg \.pred %p; mbarrier\.try_wait\.parity[^}]*selp\.b32 (%r\d+), 1, 0, %p; \}",
                             ptx))

    def kind(wait) -> str:
        after = ptx[wait.end():]
        found = {k: after.find(text) for k, text in (("empty", "mbarrier.arrive.expect_tx"), ("full", consumer))}
        return min((k for k in found if found[k] >= 0), key=found.get)
    chosen = [w for w in waits if kind(w) == which]
    assert chosen
    for wait in reversed(chosen):
        ptx = ptx[:wait.start()] + f"mov.b32 {wait.group(1)}, 1;" + ptx[wait.end():]
    return ptx


def attention_loop(ptx: str, first: str, last: str, after: int = 0) -> str:
    """An attention ring's loop: from the first multiply's K wait (the last phase wait
    before the first ``first`` from ``after`` on, the multiply's opening instruction) to
    the drain's barrier (the first after the last ``last``)."""
    wait = ptx.rindex("mbarrier.try_wait.parity", 0, ptx.index(first, after))
    start = ptx.rindex("\n", 0, ptx.rindex("\n", 0, wait))
    return ptx[start:ptx.index("bar.sync", ptx.rindex(last))]


def assert_attention_refills(loop: str, boxes: int) -> None:
    """The loop refills a stage with K's and V's ``boxes`` 3-D boxes each, with no CTA
    barrier: each multiply waits on its tile's "full" mbarrier, every thread arrives on the
    stage's "empty" one, and the refill waits on that."""
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d", loop)) == 2 * boxes
    assert "bar.sync" not in loop and "barrier.sync" not in loop
    assert len(re.findall(r"mbarrier\.try_wait\.parity", loop)) == 2 + 1
    assert len(re.findall(r"mbarrier\.arrive\.shared::cta\.b64", loop)) == 1


#: the mbarrier waits an attention ring emits, in order: Q's boxes, K's phase, V's, the
#: refill's "empty" one; where Q @ K^T runs an iteration ahead on ``wgmma`` (``s_ahead``)
#: K(0)'s before the loop, then K(i + 1)'s in it
ATTENTION_WAITS = ("q", "k", "v", "empty")
S_AHEAD_WAITS = ("q", "k0", "k", "v", "empty")


def drop_attention_wait(monkeypatch, dropped, s_ahead: bool = False) -> None:
    """Plant: an attention ring's ``dropped`` mbarrier wait is not emitted (a name of
    ``ATTENTION_WAITS``, ``S_AHEAD_WAITS`` where ``s_ahead``, or the 1-based position)."""
    if isinstance(dropped, str):
        dropped = (S_AHEAD_WAITS if s_ahead else ATTENTION_WAITS).index(dropped) + 1
    from tileiras.codegen import emit_attention_tma

    real = emit_attention_tma.wait_phase
    waits = []

    def wait_phase(em, barrier, parity):
        waits.append(barrier)
        if len(waits) != dropped:
            real(em, barrier, parity)
    monkeypatch.setattr(emit_attention_tma, "wait_phase", wait_phase)


def release_only_below(monkeypatch, threads: int) -> None:
    """Plant: only the attention ring's threads below ``threads`` release a stage."""
    from llvmlite import ir

    from tileiras.codegen import emit_attention_tma
    from tileiras.codegen.nvvm import I32

    real = emit_attention_tma.release

    def release(em, empty):
        with em.b.if_then(em.b.icmp_unsigned("<", em.tid, ir.Constant(I32, threads))):
            real(em, empty)
    monkeypatch.setattr(emit_attention_tma, "release", release)


def lora_agrees(module, arch: str, k: int, seed: int, atol: float) -> str:
    """Run a LoRA layer (``kernels/workloads.lora_linear``, 64 x 64 tiles, rank 16) on 2 x 2
    output tiles of bf16 inputs with K of ``k``: the interpreter must give x @ W + (x @ A)
    @ B (the rank-16 product rounded to bf16) and our PTX in the emulator the
    interpreter's result; the PTX."""
    import ml_dtypes  # noqa: PLC0415  (only these tests need it)

    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(seed)
    x, w, la, lb = (rng.uniform(-1, 1, shape).astype(ml_dtypes.bfloat16)
                    for shape in ((128, k), (k, 128), (k, 16), (16, 128)))
    args = interp.cutile_args(x, w, la, lb, np.zeros((128, 128), ml_dtypes.bfloat16))
    expected = diffcheck.run_interpreter(module, fn.name, (2, 2, 1), args)
    f32 = [t.astype(np.float32) for t in (x, w, la, lb)]
    low = (f32[0] @ f32[2]).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.allclose(np.asarray(expected.arrays[4], np.float32), f32[0] @ f32[1] + low @ f32[3],
                       rtol=2e-2, atol=atol)
    ptx, host = diffcheck.compile_with_host(module, arch)
    got = diffcheck.run_ptx(ptx, fn.name, (2, 2, 1), args, host_object=host)
    assert diffcheck.compare(expected, got) is None
    return ptx


def w8a8_agrees(module, arch: str, shape: tuple[int, int, int], tile: int, grid: tuple[int, int, int],
                seed: int) -> str:
    """Run a W8A8 fp8 GEMM with block scales (``kernels/workloads.w8a8_block_fp8`` and its
    persistent form: A M x K, B N x K, one scale per row of A and ``tile`` of K, one per
    ``tile`` x ``tile`` block of B) on ``shape`` = (M, N, K): the interpreter must give the
    sum over K tiles of each product scaled, and our PTX in the emulator the interpreter's
    result; the PTX."""
    import ml_dtypes  # noqa: PLC0415  (only these tests need it)

    m, n, k = shape
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, (m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.uniform(-2, 2, (n, k)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.uniform(0.25, 2, (m, 16)).astype(np.float32)
    sb = rng.uniform(0.25, 2, (16, 16)).astype(np.float32)
    args = interp.cutile_args(a, b, sa, sb, np.zeros((m, n), ml_dtypes.bfloat16))
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    want = sum((a[:, tile * q:tile * q + tile].astype(np.float32) @ b[:, tile * q:tile * q + tile].astype(np.float32).T)
               * sa[:, q:q + 1] * np.repeat(sb[:n // tile, q], tile)[None, :] for q in range(k // tile))
    assert np.allclose(np.asarray(expected.arrays[4], np.float32), want, rtol=2e-2, atol=1.0)
    ptx, host = diffcheck.compile_with_host(module, arch)
    got = diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)
    assert diffcheck.compare(expected, got) is None
    return ptx
