"""The kernel's last TMA store stages its tile in the scratch region (``tma.last_store``,
``TmaPlan.over_scratch``), as a GEMM's epilogue reuses its drained ring, where its buffer
would not fit after the scratch.

Every scratch user runs before it, so its buffer may start at offset 0 instead of after
the scratch: a CTA barrier before the tile is staged orders it after the last reads of the
region (a barrier more, so only where it keeps the store on TMA).  Before, sm_120 GEMM
epilogues whose ring filled shared memory lost their TMA store (a batched f16 GEMM
128x128x64 missed the 101,376-byte limit by 16 bytes, an fp8 one by 32 KB) and stored
with ``st.global``: 1.25x and 1.31x NVIDIA's sectors, 1.00x now (``bench/coalescing.py``).
The barrier matters where the scratch user before it does not end with one: with a store
whose own operand went through the region (a transposed tile), the emulator's race
detector reported the staging writes against the conversion's reads when the barrier was
left out; such stores (scratch of their own, which the verifier sees live with the
staging) keep their own buffer."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import batched_matmul  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.lower.tma import last_store  # noqa: E402
from tileiras.lower.tma_ring import RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.target import smem_limit  # noqa: E402
from tileiras.tile import ops_memory as MEM  # noqa: E402

F16 = ct.float16


def _compiled(case: KernelCase, arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = read_bytecode(export(case, arch=arch, aligned=True))
    c = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    ((name, tas),) = c.tas.items()
    text = format_tileas(tas)
    back = parse_tileas(text, c.aa[name])
    assert back.tma == tas.tma and format_tileas(back) == text
    return module, tas


def _store(tas):
    (store,) = [op for op in tas.tma if isinstance(op, MEM.StoreViewTkoOp)]
    return tas.tma[store]


def _agrees(module, arch: str, grid, *arrays) -> None:
    fn = next(f for f in module.functions if f.is_entry)
    args = interp.cutile_args(*arrays)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    ptx, host = diffcheck.compile_with_host(module, arch)
    assert diffcheck.compare(expected, diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)) is None


@pytest.mark.parametrize("arch,stages", [("sm_90", 4), ("sm_100", 6)])
def test_where_it_fits_after_the_ring_the_store_keeps_its_buffer_there(arch: str, stages: int):
    """(no barrier added where shared memory holds both)"""
    case = KernelCase("batched_128", batched_matmul, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), 128, 128, 64]])
    _, tas = _compiled(case, arch)
    (ring,) = [p for p in tas.pipelines.values() if isinstance(p, RingPlan)]
    plan = _store(tas)
    assert not plan.over_scratch and plan.buffer >= tas.scratch_bytes >= ring.stages * ring.stage_bytes
    assert ring.stages == stages


def test_an_sm120_gemm_epilogue_keeps_its_tma_store_over_the_drained_ring():
    case = KernelCase("batched_128", batched_matmul, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), 128, 128, 64]])
    module, tas = _compiled(case, "sm_120")
    (ring,) = [p for p in tas.pipelines.values() if isinstance(p, RingPlan)]
    plan = _store(tas)
    assert plan.over_scratch and plan.buffer == 0 and plan.nbytes == 128 * 128 * 2
    assert ring.stages == 3 and tas.smem_bytes <= smem_limit("sm_120")
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (1, 128, 192)).astype(np.float16)
    b = rng.uniform(-1, 1, (1, 192, 128)).astype(np.float16)
    _agrees(module, "sm_120", (1, 1, 1), a, b, np.zeros((1, 128, 128), np.float16))


def test_only_a_last_top_level_store_with_no_scratch_user_from_it_on_qualifies():
    case = KernelCase("batched_128", batched_matmul, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), 128, 128, 64]])
    _, tas = _compiled(case, "sm_90")
    (ring,) = [p for p in tas.pipelines.values() if isinstance(p, RingPlan)]
    (store,) = [op for op in tas.tma if isinstance(op, MEM.StoreViewTkoOp)]
    ops = [*ring.loads, store]
    assert last_store(tas, ops) is store
    assert last_store(tas, list(ring.loads)) is None        # the last candidate is a load in the loop
    for user in (store, tas.aa.function.entry_block.ops[-1]):   # its own scratch, or the return's
        tas.scratch[user] = 16
        assert last_store(tas, ops) is None
        del tas.scratch[user]
