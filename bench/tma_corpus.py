"""NVIDIA's TMA kernels in the emulator: how many run and agree with the interpreter.

    python bench/tma_corpus.py [FOLDER] [--arch sm_90] [--extent 128]

For every ``NAME.<arch>.*.tileir`` in FOLDER (default: ../shared/corpus-aligned beside the
repo) whose NVIDIA PTX (``NAME...ptx`` beside it) uses ``cp.async.bulk.tensor``, NVIDIA's
tileiras compiles the bytecode again (the ``.nv.host`` object its callback needs is in the
cubin only), the emulator runs its PTX with the hidden tensor maps filled by that callback
on synthesized arguments (``diffcheck.synthesize_args``, a 2x2 grid, ``--extent`` elements
per dynamic dim) and the result is compared with the reference interpreter's.  A benchmark
of the emulator's coverage, not a test.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.diffcheck import compare, distinct_grid, run_interpreter, run_ptx, synthesize_args  # noqa: E402
from tileiras.emulate.cubin import elf_sections, ptx_from_cubin  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tools import find_tileiras  # noqa: E402

GRID = (2, 2, 1)


def check(path: Path, tileiras: str, arch: str, extent: int) -> str:
    """'agree', or what went wrong, for one file (every entry)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.cubin"
        subprocess.run([tileiras, f"--gpu-name={arch}", "--lineinfo", str(path), "-o", str(out)],
                       check=True, capture_output=True)
        cubin = out.read_bytes()
    ptx, host = ptx_from_cubin(cubin), elf_sections(cubin).get(".nv.host")
    return agreement(read_bytecode(path.read_bytes()), ptx, host, extent, "NVIDIA's")


def agreement(module, ptx: str, host: Optional[bytes], extent: int, who: str = "compiled") -> str:
    """'agree', or what went wrong, running ``ptx`` (with its ``.nv.host``) on every entry of
    ``module`` against the interpreter (also ``bench/tma_stores.py``'s check)."""
    for fn in module.functions:
        if not fn.is_entry:
            continue
        args = synthesize_args(fn, np.random.default_rng(1), extent)
        grid = distinct_grid(fn, GRID)  # CTAs doing the same work race (atomics_rmw rewrites its indices)
        try:
            expected = run_interpreter(module, fn.name, grid, args)
            got = run_ptx(ptx, fn.name, grid, args, who=who, host_object=host)
        except Exception as err:  # noqa: BLE001 - a benchmark reports every failure
            return f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
        problem = compare(expected, got)
        if problem is not None:
            return f"differs: {problem[:160]}"
    return "agree"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(REPO.parent / "shared" / "corpus-aligned"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--extent", type=int, default=128)
    ns = ap.parse_args(argv)
    tileiras = find_tileiras()
    if tileiras is None:
        print("NVIDIA's tileiras is not installed")
        return 1
    files = [p for p in sorted(Path(ns.folder).glob(f"*.{ns.arch}.*.tileir"))
             if "cp.async.bulk.tensor" in p.with_suffix(".ptx").read_text()]
    agree = 0
    for path in files:
        verdict = check(path, tileiras, ns.arch, ns.extent)
        agree += verdict == "agree"
        print(f"{path.name:60s} {verdict}", flush=True)
    print(f"{agree}/{len(files)} TMA kernels run and agree with the interpreter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
