"""Decode attention over a paged KV cache (``kernels/workloads.paged_decode``, vLLM's
layout) is pipelined: its K and V tiles are read at a page id the loop body picks from the
block table's row by the trip number, and the ``cp.async`` attention ring's copies compute
that id again for the iteration they copy (``gathered_copy.index_slice``, recorded in
``TileAS.index_slices``; the pick is a shuffle, ``layout_rules.extract_by_shuffle``); on
sm_90 and later the TMA attention ring's producer warp picks it before its elected thread
issues the 3-D boxes.

Before, the loop was refused ("a K/V load's index is computed inside the loop") and each
trip loaded K and V with plain loads and waited for them; NVIDIA's tileiras pipelines it
(``cp.async`` on sm_80, TMA boxes on sm_90).  The differential tests' random block tables
hold few valid page ids, so these inputs are built by hand: every page id valid, distinct,
in an order the trip number must follow."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import paged_decode, paged_prefill  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.lower.attention_pipeline import AttentionPlan  # noqa: E402
from tileiras.lower.attention_tma import AttentionRingPlan  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

BF16, F16 = ct.bfloat16, ct.float16
PAGES, PAGE, D = 4, 32, 64
CASE = KernelCase("paged_decode_32", paged_decode, [[arr(BF16, 2), arr(BF16, 3), arr(BF16, 3), arr(ct.int32, 2),
                                                     arr(BF16, 2), PAGES, PAGE, D]])


def _module(arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(CASE, arch=arch, aligned=True))


@pytest.mark.parametrize("arch,kind", [("sm_80", AttentionPlan), ("sm_90", AttentionRingPlan),
                                       ("sm_120", AttentionRingPlan)])
def test_the_page_loop_is_pipelined(arch: str, kind: type):
    c = run_stages(_module(arch), CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    (name, tas), = c.tas.items()
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert isinstance(plan, kind) and plan.stages >= 2
    assert set(tas.index_slices) == {t.load for t in plan.tiles}
    text = format_tileas(tas)
    back = parse_tileas(text, c.aa[name])
    assert back.index_slices == tas.index_slices and format_tileas(back) == text


def _reference(q, k, v, table):
    out = np.zeros_like(q, dtype=np.float32)
    for b in range(table.shape[0]):
        keys = np.concatenate([k[p] for p in table[b]]).astype(np.float32)
        values = np.concatenate([v[p] for p in table[b]]).astype(np.float32)
        s = q[b * 16:(b + 1) * 16].astype(np.float32) @ keys.T / np.sqrt(D)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[b * 16:(b + 1) * 16] = (p / p.sum(axis=1, keepdims=True)) @ values
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_pages_are_read_in_the_block_tables_order(arch: str):
    module = _module(arch)
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(11)
    batch, pages = 3, 16
    q = rng.uniform(-1, 1, (batch * 16, D)).astype(ml_dtypes.bfloat16)
    k = rng.uniform(-1, 1, (pages, PAGE, D)).astype(ml_dtypes.bfloat16)
    v = rng.uniform(-1, 1, (pages, PAGE, D)).astype(ml_dtypes.bfloat16)
    table = rng.permutation(pages)[:batch * PAGES].reshape(batch, PAGES).astype(np.int32)
    o = np.zeros((batch * 16, D), ml_dtypes.bfloat16)
    args = interp.cutile_args(q, k, v, table, o)
    grid = (batch, 1, 1)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    assert np.allclose(np.asarray(expected.arrays[4], np.float32), _reference(q, k, v, table), atol=0.03)
    ptx, host = diffcheck.compile_with_host(module, arch)
    got = diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)
    assert diffcheck.compare(expected, got) is None


PREFILL = KernelCase("paged_prefill_64", paged_prefill, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), arr(ct.int32, 2),
                                                         arr(F16, 3), 64, PAGES, 64, 64]])


def test_sm100_prefill_keeps_tcgen05_with_a_computed_page_index():
    """Chunked prefill (64 query rows a block) on sm_100: both multiplies on ``tcgen05``
    in the TMA attention ring, its producer picking each trip's page id (as NVIDIA's tool
    builds it).  Before, the tcgen05 check ran before layouts exist and refused the page
    index it could not plan yet, so the ring fed ``mma.sync`` (1.92x NVIDIA's executed
    instructions on 64/8/64/128 tiles; 0.99x now, shared-memory wavefronts 43,552 ->
    4,160).  Two sequences of 4 pages of 64 keys, every page id valid and distinct."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = read_bytecode(export(PREFILL, arch="sm_100", aligned=True))
    c = run_stages(module, CompileOptions(gpu_name="sm_100"), "tileas", only_needed=True)
    ((name, tas),) = c.tas.items()
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert isinstance(plan, AttentionRingPlan) and plan.tcgen05
    assert all(tas.tensor_cores[m].tcgen05 for m in plan.mmas)
    assert set(tas.index_slices) == {t.load for t in plan.tiles}
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(17)
    seqs, pool = 2, 12
    q = rng.uniform(-1, 1, (seqs, 64, 64)).astype(np.float16)
    k = rng.uniform(-1, 1, (pool, 64, 64)).astype(np.float16)
    v = rng.uniform(-1, 1, (pool, 64, 64)).astype(np.float16)
    table = rng.permutation(pool)[:seqs * PAGES].reshape(seqs, PAGES).astype(np.int32)
    o = np.zeros_like(q)
    args = interp.cutile_args(q, k, v, table, o)
    grid = (seqs, 1, 1)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    for s in range(seqs):
        keys = np.concatenate([k[p] for p in table[s]]).astype(np.float32)
        values = np.concatenate([v[p] for p in table[s]]).astype(np.float32)
        scores = q[s].astype(np.float32) @ keys.T / np.sqrt(64)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        want = (p / p.sum(axis=1, keepdims=True)) @ values
        assert np.allclose(np.asarray(expected.arrays[4][s], np.float32), want, atol=0.02)
    ptx, host = diffcheck.compile_with_host(module, "sm_100")
    assert "tcgen05.mma" in ptx
    assert diffcheck.compare(expected, diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)) is None
