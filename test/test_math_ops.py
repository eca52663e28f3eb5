"""Held-out style math kernels (``test/kernels/math_ops.py``: every math op, f32/f16/bf16/f64,
flush-to-zero and rounding variants, plain and aligned arrays, sm_80 and sm_90), exported
with cuTile: our PTX and NVIDIA's, run in the emulator on the same inputs (random values
with +-0, +-inf, NaN, subnormals and huge arguments first), give bit-identical results on at
least 99.9% of the elements of every op and are never more than 1 ulp apart; and our PTX
has no more than NVIDIA's instructions + 10% over the modules (geometric mean); the
flush-to-zero and rounding variants are NVIDIA's very instructions (``ex2.approx.ftz.f32``,
``div.approx.ftz.f32``, ``div.full.f32``, ``sqrt.rp.ftz.f32``, ``max.ftz.f32``...).
"""
from __future__ import annotations

import collections
import math
import re
import statistics
import subprocess

import numpy as np
import pytest
from test_libdevice import DTYPES, inputs, ulps

from tileiras import diffcheck, interp
from tileiras.emulate.cubin import ptx_from_cubin
from tileiras.reader import read_bytecode

ct = pytest.importorskip("cuda.tile")
from differential import export  # noqa: E402
from kernels import math_ops  # noqa: E402

pytestmark = pytest.mark.slow
N = 1024
#: Bits are compared on the plain exports: the aligned ones differ in their accesses, not their
#: math (bench/math_cost.py measures both; the static-cost test below reads both).
COMBOS = [(c, a) for c in math_ops.CASES if c.name.endswith("_plain") for a in math_ops.ARCHS]


def element_type(case) -> str:
    return next(t for t in DTYPES if f"_{t}_" in case.name)


def arguments(case, op: str, seed: int) -> list:
    """x (the special values first), y (the same values shifted, or powi's exponents), out."""
    t = element_type(case)
    rng = np.random.default_rng(seed)
    x = inputs(t, rng, N)
    y = rng.integers(-9, 10, N).astype(np.int32) if op == "powi" else np.roll(inputs(t, rng, N), 7)
    return [x, y, np.zeros(N, DTYPES[t])]


def nvidia_ptx(real_tileiras: str, data: bytes, arch: str, tmp_path) -> str:
    src, out = tmp_path / "k.tileir", tmp_path / "k.cubin"
    src.write_bytes(data)
    subprocess.run([real_tileiras, f"--gpu-name={arch}", "--lineinfo", str(src), "-o", str(out)], check=True,
                   capture_output=True, timeout=300)
    return ptx_from_cubin(out.read_bytes())


def result(ptx: str, entry: str, args: list, who: str) -> np.ndarray:
    outcome = diffcheck.run_ptx(ptx, entry, (N // math_ops.TILE, 1, 1), interp.cutile_args(*args), who)
    return outcome.arrays[-1]


@pytest.mark.parametrize("case, arch", COMBOS, ids=[f"{c.name}-{a}" for c, a in COMBOS])
def test_same_bits_as_nvidia(case, arch, real_tileiras, tmp_path):
    data = export(case, arch=arch)
    module = read_bytecode(data)
    mine_ptx = diffcheck.compile_ptx(module, arch)
    theirs_ptx = nvidia_ptx(real_tileiras, data, arch, tmp_path)
    wrong = []
    for i, (fn, op) in enumerate(zip(module.functions, math_ops.op_names(case))):
        args = arguments(case, op, seed=i)
        mine = result(mine_ptx, fn.name, args, "compiled")
        theirs = result(theirs_ptx, fn.name, args, "NVIDIA's")
        distance = ulps(mine, theirs)
        if (distance == 0).mean() < 0.999 or distance.max() > 1:
            k = int(distance.argmax())
            wrong.append(f"{op}: {(distance != 0).sum()} of {N} differ, worst x={args[0][k]!r} "
                         f"y={args[1][k]!r}: ours {mine[k]!r}, NVIDIA's {theirs[k]!r}")
        finite = np.isfinite(mine.astype(np.float64))
        assert finite.sum() > N // 4 and len(np.unique(mine[finite])) > 16, f"{op}: no real values"
    assert not wrong, "\n".join(wrong)


def test_static_cost_within_ten_percent(real_tileiras, tmp_path):
    """Static PTX instructions, ours / NVIDIA's, geometric mean over the sm_90 modules."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "bench"))
    from math_cost import instructions_per_entry

    ratios = []
    for case in math_ops.CASES:
        data = export(case, arch="sm_90")
        mine = sum(instructions_per_entry(diffcheck.compile_ptx(read_bytecode(data), "sm_90")).values())
        theirs = sum(instructions_per_entry(nvidia_ptx(real_tileiras, data, "sm_90", tmp_path)).values())
        ratios.append(mine / theirs)
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios))
    assert geomean <= 1.1, f"ours / NVIDIA's instructions: geomean {geomean:.3f}, max {max(ratios):.3f}"
    assert min(ratios) > 0.5  # counted the same way on both sides


def float_opcodes(ptx: str) -> list[collections.Counter]:
    """Per entry, the floating-point opcodes (``ex2.approx.ftz.f32``: the op's lowering; the
    addressing around it is integer) and how often each occurs."""
    entries = re.split(r"\.entry\s", ptx.split("\n.section", 1)[0])[1:]
    found = []
    for body in entries:
        ops = collections.Counter()
        for line in body.splitlines():
            for stmt in line.split("//", 1)[0].split(";"):
                words = stmt.strip().strip("{}").split()
                if words and words[0].startswith("@"):
                    words = words[1:]
                if words and re.search(r"\.(f32|f64|f16|bf16)$", words[0]):
                    ops[words[0]] += 1
        found.append(ops)
    return found


@pytest.mark.parametrize("arch", math_ops.ARCHS)
def test_flagged_ops_are_nvidias_instructions(arch, real_tileiras, tmp_path):
    """Each flush-to-zero / rounding variant lowers to the same floating-point instructions as
    NVIDIA's (the same opcodes, as many times)."""
    case = next(c for c in math_ops.CASES if c.name == "math_flagged_f32_plain")
    data = export(case, arch=arch)
    mine = float_opcodes(diffcheck.compile_ptx(read_bytecode(data), arch))
    theirs = float_opcodes(nvidia_ptx(real_tileiras, data, arch, tmp_path))
    ops = math_ops.op_names(case)
    assert len(mine) == len(theirs) == len(ops)
    assert mine[ops.index("exp2_ftz")] == {"ex2.approx.ftz.f32": 1}
    assert mine[ops.index("div_approx_ftz")] == {"div.approx.ftz.f32": 1}
    different = {op: (dict(m), dict(t)) for op, m, t in zip(ops, mine, theirs) if m != t}
    assert not different, different
