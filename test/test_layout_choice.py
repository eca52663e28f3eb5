"""The layout an elementwise op computes in (``layout_rules._cheapest_layout``): of its
operands' layouts, the one the others reach with the fewest bytes through shared memory.

A row broadcast to a tile is computed again in the tile's layout (its source moved, a few
bytes, or nothing) rather than the tile moved to the broadcast's: before, the first
operand's layout won, and a SwiGLU whose two halves arrive in different layouts (or a
layer norm backward's ``w * dy``, the weight row first) exchanged whole tiles through
shared memory."""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels import models as K  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402


def _case(name: str):
    return next(c for c in K.CASES if c.name == name)


def _bytecode(name: str, arch: str) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(_case(name), arch=arch, aligned=False)


def _exchanges(name: str, arch: str) -> list:
    """(operand's type, layouts) of each conversion through shared memory TileAS records."""
    (tas,) = run_stages(read_bytecode(_bytecode(name, arch)), CompileOptions(gpu_name=arch), "tileas",
                        only_needed=True).tas.values()
    return [(op.operands[i].type, layout) for (op, i), layout in tas.converts.items() if (op, i) not in tas.recomputed]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_only_the_weight_row_moves(arch: str):
    """Layer norm backward (8 x 64, unaligned): one exchange, the 64-element weight row
    (was four: the row and three whole tiles, 888 shared-memory wavefronts against
    NVIDIA's 80)."""
    moved = _exchanges("layer_norm_bwd", arch)
    assert [t.shape for t, _ in moved] == [(1, 64)]


def test_swiglu_moves_nothing_through_shared_memory():
    assert _exchanges("swiglu", "sm_80") == []
    ptx = compile_module(read_bytecode(_bytecode("swiglu", "sm_80")), CompileOptions(gpu_name="sm_80"), "ptx")
    assert "bar.sync" not in ptx and ".shared" not in ptx


@pytest.mark.parametrize("name", ["layer_norm_bwd", "swiglu"])
def test_agree_with_the_interpreter(name: str):
    reports = diffcheck.check_module(read_bytecode(_bytecode(name, "sm_80")), "sm_80")
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]
