"""Row statistics of a matrix multiply's result (flash attention's running max and sum,
``M x 1`` tiles carried by the KV loop) live in the accumulator's row slice
(``TileAS.accumulator_rows``): the row reductions produce them there, the broadcasts back
over the accumulator read them there, and the loop carries them there, so the online
softmax converts nothing through shared memory."""
from __future__ import annotations

import re

import pytest

from kernels.attention import flash_attention
from tileiras import diffcheck
from tileiras.tile import ops_arith as AR
from tileiras.tile import ops_control as CF
from tileiras.tile import ops_core as CO
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module


def tileas(text: str, arch: str):
    module = parse_module(text, "k.mlir")
    return run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas[module.functions[0].name]


def loop_of(tas) -> CF.ForOp:
    return next(op for op in tas.aa.function.entry_block.ops if isinstance(op, CF.ForOp))


def body(loop: CF.ForOp) -> list:
    return list(loop.regions[0].blocks[0].ops)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_loop_carries_its_row_statistics_in_the_accumulator_rows(arch, causal):
    tas = tileas(flash_attention(causal=causal), arch)
    loop = loop_of(tas)
    rows = [r for r in loop.results if r.type.shape == (64, 1)]
    assert len(rows) == 2                                   # running max and running sum
    reduces = [op for op in body(loop) if isinstance(op, CO.ReduceOp)]
    assert len(reduces) == 2
    slice_ = tas.layouts[reduces[0].results[0]].reshape((64, 1))
    assert all(tas.layouts[r] == slice_ for r in rows)
    # every thread of a row's quad holds the row's value: no warp splits a row
    assert not any(b[1] for b in slice_.bases("warp")) and not any(b[1] for b in slice_.bases("lane"))
    in_loop = set(body(loop))
    converted = [(op, i) for (op, i) in tas.converts if op in in_loop and op.operands[i].type.shape == (64, 1)]
    assert converted == []
    # shared memory in the loop is the multiplies' operand staging only
    assert not any(op in in_loop and tas.scratch[op] and not isinstance(op, AR.MmaFOp) for op in tas.scratch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_softmax_has_no_barrier_of_its_own(arch):
    """The kernel's barriers are the K/V ring's (sm_80 and sm_90, there a TMA ring:
    test_attention_tma.py) and the epilogue's, none for the softmax: its statistics are
    never read back from shared memory (scalar ``ld.shared`` was how they came back, 8 of
    them on sm_90, with 17 barriers on the corpus kernel)."""
    ptx = diffcheck.compile_ptx(parse_module(flash_attention(), "k.mlir"), arch)
    assert not re.search(r"ld\.shared\.[bf]32\s", ptx)
    # sm_90: none in the loop, none for Q; sm_80: two of them the output's exchange to
    # 16-byte stores (test_attention_pipeline.py)
    assert len(re.findall(r"bar\.sync", ptx)) == {"sm_80": 8, "sm_90": 4}[arch]


@pytest.mark.parametrize("arch", ["sm_90"])
@pytest.mark.parametrize("kwargs, grid, extent", [({}, (2, 1, 1), 192), ({"causal": True}, (3, 1, 1), 192)])
def test_sm90_attention_agrees_with_the_interpreter(arch, kwargs, grid, extent):
    module = parse_module(flash_attention(**kwargs), "k.mlir")
    assert [r.problem for r in diffcheck.check_module(module, arch, grid=grid, extent=extent)] == [None]
