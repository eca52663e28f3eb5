"""A value recomputed for two uses (``TileAS.recomputed``: a broadcast row's load, made
again in the layout each use wants) is emitted once where the first recomputation
dominates the second and their inputs are the same values (``KernelEmitter.recompute``,
``nvvm.dominates``).

Before, each use emitted its own copy: w4a16's 1 x 128 scale row was loaded twice a K
step, once for the low nibbles and once for the high ones (128x128x64 tiles on sm_80: 64
scalar loads a thread a trip, 32 now), and TileGym's rotary embedding loaded its cos and
sin rows twice (12 global loads -> 8)."""
from __future__ import annotations

import re
import warnings

import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.models import CASES  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.codegen import nvvm  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

ROPE = next(c for c in CASES if c.name == "rope")


def _ptx() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = read_bytecode(export(ROPE, arch="sm_80"))
    return diffcheck.compile_ptx(module, "sm_80")


def test_rope_loads_its_cos_and_sin_rows_once(monkeypatch):
    reused = _ptx()
    monkeypatch.setattr(nvvm, "dominates", lambda start, a, b: False)     # no reuse
    again = _ptx()
    loads = [len(re.findall(r"\bld\.global", ptx)) for ptx in (reused, again)]
    assert loads == [8, 12]


def test_the_reused_recomputation_agrees_with_the_interpreter():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = read_bytecode(export(ROPE, arch="sm_80"))
    assert [r.problem for r in diffcheck.check_module(module, "sm_80", grid=(2, 1, 1), extent=64)] == [None]


def test_dominance_follows_the_branches_built_so_far():
    """A diamond: the entry dominates the join, neither arm does; a block nothing branches
    to yet dominates nothing (its branch may come later)."""
    from llvmlite import ir

    from tileiras.codegen.nvvm import dominates

    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [ir.IntType(1)]), "f")
    entry, then, other, join, loose = (fn.append_basic_block(n) for n in ("entry", "then", "else", "join", "loose"))
    b = ir.IRBuilder(entry)
    b.cbranch(fn.args[0], then, other)
    for arm in (then, other):
        b.position_at_end(arm)
        b.branch(join)
    assert dominates(entry, entry, join) and dominates(entry, join, join)
    assert not dominates(entry, then, join) and not dominates(entry, other, join)
    assert not dominates(entry, entry, loose)
