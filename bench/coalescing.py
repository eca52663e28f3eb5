"""How well our kernels' global accesses coalesce, and how many instructions they execute,
against NVIDIA's PTX for the same bytecode.

    python bench/coalescing.py [PATH ...] [--every K] [--all] [--match REGEX]

PATHs are .tileir files or folders of them (default: ../shared/corpus beside the repo); each
needs NVIDIA's PTX beside it (``NAME.ptx`` for ``NAME.tileir``, as in the corpus).  Where that
PTX takes hidden tensor maps (TMA, sm_90+), NVIDIA's tileiras compiles the file again for
the ``.nv.host`` object that fills them (it is in the cubin only) and that cubin's PTX runs;
ours runs with our own ``.nv.host``.  Both PTXs run in the emulator on the same synthesized arguments (``diffcheck.synthesize_args``, a 2x2
grid; arrays of ``--extent`` elements along each dynamic dim, 512 by default, 64 for 3-d and
wider views, so the measured tiles are full ones, as in real work, not mostly edges) with ``traffic=True`` (``tileiras/emulate/traffic.py``): every warp-level global load
and store is counted as a request with the distinct 32-byte sectors its threads touch.  A
GPU moves sectors, so ``ours / nvidia`` total sectors is the memory traffic ratio (1.0: same
transactions; 4.0: four times the L1/L2 transactions for the same data).

The emulator also counts executed thread-instructions (PTX, not SASS: a proxy for issue
time) and shared-memory wavefronts, with the bank conflicts among them (the wavefronts
beyond each request's bytes over 128; ``traffic.py``).  A kernel is flagged SECTORS when ours moves more than 10% more sectors than NVIDIA's,
INSTR when it executes more than 10% more instructions.  The table lists flagged kernels
(every kernel with --all), then a summary.  A benchmark, not a test.

Kernels where NVIDIA's PTX uses tensor cores (mma.sync, wgmma, tcgen05.mma; flagged TC) are
summarised apart: our matrix multiply runs on CUDA cores until the tensor-core lowering
lands, and their instruction ratios would swamp the SIMT code's.
"""
from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.diffcheck import compile_with_host, synthesize_args  # noqa: E402
from tileiras.emulate import launch  # noqa: E402
from tileiras.emulate.cubin import elf_sections, ptx_from_cubin  # noqa: E402
from tileiras.emulate.launch import EmulationResult  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_control as CF  # noqa: E402
from tileiras.tile import ops_memory as MEM  # noqa: E402
from tileiras.tools import find_tileiras  # noqa: E402

SLACK = 1.10
GRID = (2, 2, 1)
TENSOR_CORE = re.compile(r"\b(mma\.sync|wgmma\.mma_async|tcgen05\.mma)\b")
#: a hidden parameter that the cubin's .nv.host fills at launch: a tensor map, or the
#: workspace of maps built on the device (a grouped GEMM's ``.u64 .ptr``)
HIDDEN_PARAM = re.compile(r"\.hidden\s+\.param\b")


def arch_of(path: Path) -> str:
    return next(p for p in path.name.split(".") if p.startswith("sm_"))


def emulated(ptx: str, entry: str, args: list, host_object: Optional[bytes] = None) -> EmulationResult:
    """One launch with its global-memory traffic counted (``host_object``: the ``.nv.host``
    that fills the kernel's hidden tensor maps)."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    result = launch(ptx, entry, GRID, copies, traffic=True, host_object=host_object)
    if result.trap is not None and result.trap.kind not in ("trap", "assert"):
        raise RuntimeError(f"{result.trap.kind}: {result.trap.message}")
    return result


def view_rank(fn) -> int:
    return max((op.result.type.rank for op in fn.walk() if isinstance(op, MEM.MakeTensorViewOp)), default=1)


def uses_tensor_cores(path: Path) -> bool:
    return TENSOR_CORE.search(path.with_suffix(".ptx").read_text()) is not None


def measure(path: Path, extent: int = 512) -> list[tuple[str, EmulationResult, EmulationResult]]:
    """(entry, NVIDIA's launch, ours) for every entry of one file."""
    module = read_bytecode(path.read_bytes())
    if any(isinstance(op, CF.PrintTkoOp) for fn in module.functions for op in fn.walk()):
        raise RuntimeError("prints (every element, per thread: too slow to emulate at full size)")
    theirs, their_host = nvidia_ptx(path)
    ours, our_host = compile_with_host(module, arch_of(path))
    rows = []
    for fn in module.functions:
        if fn.is_entry:
            args = synthesize_args(fn, np.random.default_rng(1), extent if view_rank(fn) <= 2 else 64)
            rows.append((fn.name, emulated(theirs, fn.name, args, their_host),
                         emulated(ours, fn.name, args, our_host)))
    return rows


def nvidia_ptx(path: Path) -> tuple[str, Optional[bytes]]:
    """NVIDIA's PTX beside ``path``, or, where it takes hidden parameters (tensor maps, a
    workspace for maps built on the device), the PTX and ``.nv.host``
    of the cubin NVIDIA's tileiras builds from ``path`` again (``--lineinfo``: the cubin
    carries its PTX then)."""
    ptx = path.with_suffix(".ptx").read_text()
    if not HIDDEN_PARAM.search(ptx):
        return ptx, None
    tool = find_tileiras()
    if tool is None:
        raise RuntimeError("NVIDIA's PTX takes tensor maps, and NVIDIA's tileiras is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-coalescing-") as tmp:
        out = Path(tmp) / "k.cubin"
        subprocess.run([tool, f"--gpu-name={arch_of(path)}", "--lineinfo", str(path), "-o", str(out)],
                       check=True, capture_output=True)
        cubin = out.read_bytes()
    return ptx_from_cubin(cubin), elf_sections(cubin).get(".nv.host")


def sectors(r: EmulationResult) -> int:
    return r.traffic.loads.sectors + r.traffic.stores.sectors


def ratio(nv: EmulationResult, ours: EmulationResult) -> Optional[float]:
    return sectors(ours) / sectors(nv) if sectors(nv) else None


def instr_ratio(nv: EmulationResult, ours: EmulationResult) -> float:
    return ours.thread_instructions / max(nv.thread_instructions, 1)


def shared_wavefronts(r: EmulationResult) -> int:
    return r.traffic.shared_loads.wavefronts + r.traffic.shared_stores.wavefronts


def shared_conflicts(r: EmulationResult) -> int:
    return r.traffic.shared_loads.conflicts + r.traffic.shared_stores.conflicts


def row(name: str, nv: EmulationResult, ours: EmulationResult, flag: str) -> str:
    r = ratio(nv, ours)
    spr = lambda c: f"{c.sectors_per_request:5.1f}"  # noqa: E731
    a, b = nv.traffic, ours.traffic
    return (f"{name[:46]:46s} {spr(a.loads)}/{spr(b.loads)}  {spr(a.stores)}/{spr(b.stores)}  "
            f"{sectors(nv):>8d}/{sectors(ours):<8d} {'-' if r is None else f'{r:5.2f}'}  "
            f"{instr_ratio(nv, ours):6.2f}  {shared_wavefronts(nv):>7d}/{shared_wavefronts(ours):<7d} "
            f"{shared_conflicts(nv):>6d}/{shared_conflicts(ours):<6d} {flag}")


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values if v > 0))


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--every", type=int, default=1, help="take every K-th file")
    ap.add_argument("--all", action="store_true", help="list every kernel, not only flagged ones")
    ap.add_argument("--match", type=re.compile, default=None,
                    help="only files whose name this regular expression matches (re.search)")
    ap.add_argument("--extent", type=int, default=512, help="elements along each dynamic dim (1-d, 2-d views)")
    opts = ap.parse_args(argv)
    paths = opts.paths or [REPO.parent / "shared" / "corpus"]
    files = sorted(f for p in paths for f in (p.glob("*.tileir") if p.is_dir() else [p]))[::opts.every]
    files = [f for f in files if f.with_suffix(".ptx").exists()
             and (opts.match is None or opts.match.search(f.name))]
    print(f"{'kernel':46s} {'ld sect/req':>12s}  {'st sect/req':>12s}  {'sectors nv/ours':>17s} ratio  instr"
          f"  {'smem wavefronts':>15s} {'conflicts':>13s}")
    ratios, instrs, flagged, slower, failed, tensor = [], [], 0, 0, [], []
    for f in files:
        try:
            rows = measure(f, opts.extent)
        except Exception as err:  # noqa: BLE001 - a benchmark reports and goes on
            failed.append(f"{f.name}: {type(err).__name__}: {str(err)[:120]}")
            continue
        for entry, nv, ours in rows:
            r, ri = ratio(nv, ours), instr_ratio(nv, ours)
            if uses_tensor_cores(f):
                tensor.append((r, ri))
                if opts.all:
                    print(row(f"{f.name}", nv, ours, "TC"))
                continue
            flags = ["SECTORS"] if r is not None and r > SLACK else []
            flags += ["INSTR"] if ri > SLACK else []
            flag = " ".join(flags)
            if r is not None:
                ratios.append(r)
            instrs.append(ri)
            flagged += "SECTORS" in flags
            slower += "INSTR" in flags
            if flag or opts.all:
                print(row(f"{f.name}", nv, ours, flag))
    for line in failed:
        print(f"not measured: {line}")
    if ratios:
        print(f"kernels moving more than nvidia+10% sectors (SECTORS): {flagged} of {len(ratios)}")
        print(f"sector ratio ours/nvidia: geomean {geomean(ratios):.2f}, "
              f"median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")
    if instrs:
        print(f"kernels executing more than nvidia+10% instructions (INSTR): {slower} of {len(instrs)}")
        print(f"executed-instruction ratio ours/nvidia: geomean {geomean(instrs):.2f}, "
              f"median {statistics.median(instrs):.2f}, max {max(instrs):.2f}")
    if tensor:
        tc_sectors = [r for r, _ in tensor if r is not None]
        print(f"kernels where NVIDIA uses tensor cores (TC, not in the figures above): {len(tensor)}; "
              f"ours / nvidia sectors geomean {geomean(tc_sectors) if tc_sectors else float('nan'):.2f}, "
              f"instructions geomean {geomean([ri for _, ri in tensor]):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
