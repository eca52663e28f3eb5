"""A GEMM whose A rows are gathered through a tile of pointers (a mixture-of-experts layer's
token-sorted rows) and whose B is a 3-D tensor's tile (the block's expert's weights) is
pipelined like a plain one: ``cp.async`` rings on sm_80, sm_100 and sm_120, the ``wgmma``
ring on sm_90 (``lower/gathered_copy``, ``software_pipeline.unit_reshape``).

Each copy computes its iteration's pointers and mask again from the induction variable,
starting from tiles made once before the loop (the row ids reloaded in the copy layout, as
NVIDIA's tileiras reloads them).  Before, the loop was refused ("the loop body does more
than load two tiles") and every trip loaded A and B with predicated ``ld.global``, stored
them to shared memory and waited on barriers.  bf16 128x128x64, aligned, against NVIDIA's
tileiras on the same inputs (``bench/coalescing.py``): sectors 1.05x -> 1.01x NVIDIA's on
sm_80, 1.07x -> 1.01x on sm_120; ``ptxas -v``: no spills (NVIDIA's spill 1,036 bytes on
sm_80 and 3,880 on sm_120)."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.models import moe_gemm  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.lower.gathered_copy import AddressSlice  # noqa: E402
from tileiras.lower.software_pipeline import PipelinePlan  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_memory as MEM  # noqa: E402

BF16 = ct.bfloat16
PAD = ct.PaddingMode.ZERO
CASE = KernelCase("moe_gemm_64", moe_gemm, [[arr(BF16, 2), arr(ct.int32), arr(ct.int32), arr(BF16, 3),
                                              arr(BF16, 2), 64, 64, 32]])


@ct.kernel
def gather_padded_with_ones(x, sorted_ids, w, out, BM: ct.Constant[int], BN: ct.Constant[int],
                            BK: ct.Constant[int]):
    """A gather padded with ones: cp.async fills only zeros."""
    i, j = ct.bid(0), ct.bid(1)
    rows = ct.load(sorted_ids, index=(i,), shape=(BM,))
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BM, BK))):
        cols = k * BK + ct.arange(BK, dtype=ct.int32)
        a = ct.gather(x, (ct.reshape(rows, (BM, 1)), ct.reshape(cols, (1, BK))), padding_value=1)
        b = ct.load(w, index=(k, j), shape=(BK, BN), padding_mode=PAD)
        acc = ct.mma(a, b, acc)
    ct.store(out, index=(i, j), tile=ct.astype(acc, out.dtype))


def _module(case: KernelCase, arch: str, aligned: bool = True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(case, arch=arch, aligned=aligned))


def _tileas(module, arch: str):
    c = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    (name, tas), = c.tas.items()
    return c, name, tas


def _plan(tas) -> PipelinePlan:
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert isinstance(plan, PipelinePlan)
    return plan


def _inputs(module, extent: int, seed: int = 5):
    """Arguments with row ids mostly inside x (some past its end, some negative: masked
    rows) and expert ids inside w, so that most of the output is real products."""
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(seed)
    args = diffcheck.synthesize_args(fn, rng, extent)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    x, ids, experts, w = arrays[0], arrays[1], arrays[2], arrays[3]
    assert ids.dtype == experts.dtype == np.int32 and w.ndim == 3
    ids[:] = rng.integers(-4, x.shape[0] + 8, ids.shape)
    experts[:] = rng.integers(0, w.shape[0], experts.shape)
    return fn, args


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_loop_is_pipelined_with_the_gather_copied(arch: str):
    c, name, tas = _tileas(_module(CASE, arch), arch)
    plan = _plan(tas)
    a, b = plan.loads
    assert isinstance(a, MEM.LoadPtrTkoOp) and isinstance(b, MEM.LoadViewTkoOp)
    assert b.results[0].type.shape == (1, 32, 64) and plan.copy_bytes == (16, 16)
    assert (plan.staging is not None) == (arch == "sm_90")
    slice_ = plan.a_addresses
    assert isinstance(slice_, AddressSlice)
    # each copy recomputes only arithmetic; the row ids are reloaded once, before the loop
    assert not any(isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)) for op in slice_.inner_ops)
    assert [op for op in slice_.hoisted_ops if isinstance(op, MEM.LoadViewTkoOp)] != []
    body = set(plan.loop.regions[0].blocks[0].ops)
    assert all(op in body for op in slice_.inner_ops) and not any(op in body for op in slice_.hoisted_ops)
    # the decision reads back from --emit=tileas
    text = format_tileas(tas)
    assert "#tileas.address_slice<" in text
    back = parse_tileas(text, c.aa[name])
    assert back.pipelines == tas.pipelines and format_tileas(back) == text


def _loop_body(ptx: str) -> str:
    """The steady state: from the ring's wait to the loop's back branch."""
    start = ptx.index("cp.async.wait_group")
    label = re.findall(r"(\$L__BB\d+_\d+):\n", ptx[:start])[-1]
    end = ptx.index(f"bra.uni \t{label};", start) if f"bra.uni \t{label};" in ptx[start:] else \
        re.search(rf"bra\s+{re.escape(label)};", ptx[start:]).end() + start
    return ptx[start:end]


@pytest.mark.parametrize("arch", ["sm_80", "sm_120"])
def test_the_steady_state_copies_and_loads_nothing_itself(arch: str):
    ptx, _ = diffcheck.compile_with_host(_module(CASE, arch), arch)
    body = _loop_body(ptx)
    assert "ld.global" not in body and "st.shared" not in body
    # 64x32 of A and 32x64 of B, 16 bytes a copy, 128 threads: 2 copies each a trip
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", body)) == 4
    assert "ldmatrix" in body and "mma.sync" in body


@pytest.mark.parametrize("arch,aligned", [("sm_80", True), ("sm_90", True), ("sm_80", False), ("sm_120", True)])
def test_the_interpreter_agrees(arch: str, aligned: bool):
    module = _module(CASE, arch, aligned)
    fn, args = _inputs(module, 208 if aligned else 200)
    grid = (3, 2, 1)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    n = [a for a in args if isinstance(a, np.ndarray) and a.ndim == 3][0].shape[2]     # w's N
    out = np.asarray(expected.arrays[-1], dtype=np.float32)[:3 * 64, :min(n, 2 * 64)]
    assert np.count_nonzero(out) > 0.9 * out.size      # real products, not padding
    ptx, host = diffcheck.compile_with_host(module, arch)
    got = diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)
    assert diffcheck.compare(expected, got) is None


def test_a_gather_padded_with_other_than_zeros_is_not_copied():
    case = KernelCase("gather_padded_with_ones", gather_padded_with_ones,
                      [[arr(BF16, 2), arr(ct.int32), arr(BF16, 2), arr(BF16, 2), 64, 64, 32]])
    module = _module(case, "sm_80")
    _, _, tas = _tileas(module, "sm_80")
    (reason,) = tas.pipelines.values()
    assert reason == "a gather pads with other than zeros (cp.async fills only zeros)"
    fn, args = _inputs_padded(module)
    expected = diffcheck.run_interpreter(module, fn.name, (2, 2, 1), args)
    ptx, host = diffcheck.compile_with_host(module, "sm_80")
    assert diffcheck.compare(expected, diffcheck.run_ptx(ptx, fn.name, (2, 2, 1), args, host_object=host)) is None


def _inputs_padded(module):
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(2)
    args = diffcheck.synthesize_args(fn, rng, 144)
    x, ids = [a for a in args if isinstance(a, np.ndarray)][:2]
    ids[:] = rng.integers(-4, x.shape[0] + 8, ids.shape)
    return fn, args
