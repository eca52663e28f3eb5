"""Static cost of the held-out math kernels: our PTX against NVIDIA's, op by op.

    python bench/math_cost.py [--arch sm_80 sm_90] [--match REGEX] [--per-op]

The kernels are ``test/kernels/math_ops.py`` (every math op Tile IR has, f32/f16/bf16/f64,
flush-to-zero and rounding variants, plain and aligned arrays), exported with cuTile for
each architecture.  Both compilers build each module: NVIDIA's ``tileiras`` (its PTX from
the cubin's ``.nv_debug_ptx_txt``, registers from the cubin) and ours (PTX, registers from
``ptxas -v``).  A module's cost is its PTX instructions (every statement of its entries'
bodies: labels, directives and braces do not count); ``--per-op`` also lists each entry
(one op), flagged INSTR when ours has more than NVIDIA's + 10% and REGS when ours uses
more than NVIDIA's registers + 10%.  Targets: geometric mean of ours / NVIDIA's <= 1.1,
registers within NVIDIA's + 10%.  A benchmark, not a test (``test_math_ops.py`` checks
the results).
"""
from __future__ import annotations

import argparse
import io
import math
import re
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test"))

from tileiras.codegen.ptxas import invoke_ptxas, stats_from_cubin  # noqa: E402
from tileiras.emulate.cubin import ptx_from_cubin  # noqa: E402
from tileiras.tools import find_tileiras  # noqa: E402

TARGET_GEOMEAN, SLACK = 1.10, 1.10
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)")
_TRAILER = re.compile(r"^\.(?:section|nv_intermediate_source_section)\b", re.M)


def instructions_per_entry(ptx: str) -> dict[str, int]:
    """Each entry's PTX instruction count: the statements of its body (inline asm may put
    several on a line) other than labels, directives, braces and comments."""
    ptx = ptx[:m.start()] if (m := _TRAILER.search(ptx)) else ptx
    counts: dict[str, int] = {}
    entry: Optional[str] = None
    for raw in ptx.splitlines():
        if m := _ENTRY.search(raw):
            entry = m.group(1)
            counts[entry] = 0
            continue
        if entry is None:
            continue
        for part in raw.split("//", 1)[0].split(";"):
            stmt = part.strip().strip("{}").strip()
            if stmt and not stmt.startswith(".") and not stmt.endswith(":"):
                counts[entry] += 1
    return counts


def export(case, arch: str) -> bytes:
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_kernel(case.kernel, case.signatures(), buf, gpu_code=arch, output_format="tileir_bytecode")
    return buf.getvalue()


def nvidia(tool: str, data: bytes, arch: str) -> tuple[str, dict[str, int]]:
    """NVIDIA's PTX and registers per entry."""
    with tempfile.TemporaryDirectory(prefix="bench-math-") as tmp:
        src, out = Path(tmp) / "k.tileir", Path(tmp) / "k.cubin"
        src.write_bytes(data)
        subprocess.run([tool, str(src), "--gpu-name", arch, "--lineinfo", "-o", str(out)], check=True,
                       capture_output=True)
        cubin = out.read_bytes()
    return ptx_from_cubin(cubin), {k: s.registers for k, s in stats_from_cubin(cubin).items()}


def ours(data: bytes, arch: str) -> tuple[str, dict[str, int]]:
    from tileiras.diffcheck import compile_ptx
    from tileiras.reader import read_bytecode

    ptx = compile_ptx(read_bytecode(data), arch)
    return ptx, {k: s.registers for k, s in invoke_ptxas(ptx, arch, 3, verbose=True).stats.items()}


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main(argv: Optional[list[str]] = None) -> int:
    from kernels import math_ops

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", nargs="+", default=list(math_ops.ARCHS))
    ap.add_argument("--match", type=re.compile, default=None, help="only modules whose name matches")
    ap.add_argument("--per-op", action="store_true", help="list every entry (op) too")
    opts = ap.parse_args(argv)
    tool = find_tileiras()
    if tool is None:
        print("NVIDIA's tileiras not found (pip install nvidia-cuda-tileiras)", file=sys.stderr)
        return 1
    print(f"{'module / op':34} {'arch':>6} {'instr nv/ours':>14} {'ratio':>6} {'regs nv/ours':>13}")
    ratios, reg_over, instr_over, ops = [], 0, 0, 0
    for case in math_ops.CASES:
        if opts.match and not opts.match.search(case.name):
            continue
        for arch in opts.arch:
            data = export(case, arch)
            nv_ptx, nv_regs = nvidia(tool, data, arch)
            our_ptx, our_regs = ours(data, arch)
            nv_n, our_n = instructions_per_entry(nv_ptx), instructions_per_entry(our_ptx)
            total_nv, total_ours = sum(nv_n.values()), sum(our_n.values())
            ratios.append(total_ours / total_nv)
            print(f"{case.name:34} {arch:>6} {total_nv:>6}/{total_ours:<7} {total_ours / total_nv:6.2f} "
                  f"{max(nv_regs.values()):>5}/{max(our_regs.values()):<5}")
            for entry, op in zip(nv_n, math_ops.op_names(case)):
                ops += 1
                flags = (["INSTR"] if our_n[entry] > nv_n[entry] * SLACK else []) + (
                    ["REGS"] if our_regs[entry] > nv_regs[entry] * SLACK else [])
                instr_over += "INSTR" in flags
                reg_over += "REGS" in flags
                if opts.per_op or flags:
                    print(f"  {op:32} {arch:>6} {nv_n[entry]:>6}/{our_n[entry]:<7} "
                          f"{our_n[entry] / nv_n[entry]:6.2f} {nv_regs[entry]:>5}/{our_regs[entry]:<5} "
                          f"{' '.join(flags)}")
    if not ratios:
        print("no module matched", file=sys.stderr)
        return 1
    g = geomean(ratios)
    print(f"\nmodules: {len(ratios)}, ops: {ops}; static PTX instructions ours / nvidia: geomean {g:.3f} "
          f"(target <= {TARGET_GEOMEAN}: {'ok' if g <= TARGET_GEOMEAN else 'MISSED'}), "
          f"median {statistics.median(ratios):.3f}, max {max(ratios):.3f}")
    print(f"ops over nvidia+10% instructions (INSTR): {instr_over}; over nvidia+10% registers (REGS): {reg_over}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
