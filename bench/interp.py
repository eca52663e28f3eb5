"""Reference-interpreter throughput, and the emulator on our own PTX for the same kernels.

    python bench/interp.py [--extent N] [--grid X] [--wide N] [--no-before]

For a few test kernels (exported with cuTile, no GPU): tile elements the interpreter
produces per second (elements of every op result, summed over the grid), and the
emulated thread-instructions per second of the PTX our compiler emits for them — the
cost of the two oracles the differential tests use.

Then one softmax over a 1 x ``--wide`` f32 row (``test_interp_stream.softmax_row``), the
interpreter with its reduce shortcuts (after) and without them (before: the combiner region
run once per element, as the interpreter did before issue 18.2; ``--no-before`` skips it).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

KERNELS = ("float_arith", "math_funcs", "row_reductions", "softmax_rows", "loop_accumulate", "gemm")


def result_elements(module, entry: str) -> int:
    """Elements of all op results of one block's execution (loops counted once)."""
    from tileiras.ir import types as T

    fn = next(f for f in module.functions if f.name == entry)
    return sum(r.type.num_elements for op in fn.walk() for r in op.results if isinstance(r.type, T.TileType))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extent", type=int, default=256)
    parser.add_argument("--grid", type=int, default=4)
    parser.add_argument("--wide", type=int, default=32768, help="row width of the softmax line (0: none)")
    parser.add_argument("--no-before", action="store_true", help="skip the slow general-path run")
    args = parser.parse_args()

    from differential import Case, export, make_inputs
    from kernels import ALL_CASES

    from tileiras import diffcheck
    from tileiras.emulate import launch
    from tileiras.reader import read_bytecode

    print(f"{'kernel':22s} {'interp':>10s} {'elements/s':>12s} {'emulator':>10s} {'thread-instr/s':>15s}")
    for case in (c for c in ALL_CASES if c.name in KERNELS):
        data = export(case)
        module = read_bytecode(data)
        entry = module.functions[0].name
        c = Case(data, entry, make_inputs(case.params[0], np.random.default_rng(0), args.extent),
                 (args.grid, args.grid, 1))
        t = time.perf_counter()
        diffcheck.run_interpreter(data, entry, c.grid, c.args(c.arrays))
        t_interp = time.perf_counter() - t
        elements = result_elements(module, entry) * args.grid * args.grid
        ptx = diffcheck.compile_ptx(module, "sm_90")
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in c.args(c.arrays)]
        t = time.perf_counter()
        result = launch(ptx, entry, c.grid, copies)
        t_emu = time.perf_counter() - t
        print(f"{case.name:22s} {t_interp * 1e3:8.1f}ms {elements / t_interp:12,.0f} {t_emu * 1e3:8.1f}ms "
              f"{result.thread_instructions / t_emu:15,.0f}")
    if args.wide:
        wide_row(args.wide, not args.no_before)


def wide_row(n: int, before: bool) -> None:
    """Seconds for a softmax of one n-wide f32 row, with and without the reduce shortcuts."""
    from unittest import mock

    from test_interp_stream import softmax_row

    from tileiras import interp
    from tileiras.interp import reduce

    module = interp.load_module(softmax_row(n))
    x = np.random.default_rng(0).uniform(-4, 4, (1, n)).astype(np.float32)

    def seconds() -> float:
        out = np.zeros_like(x)
        t = time.perf_counter()
        interp.run(module, None, 1, [x, out, 1, n])
        return time.perf_counter() - t

    after = seconds()
    line = f"softmax 1x{n} f32: interpreter {after:.2f}s"
    if before:
        with mock.patch.object(reduce, "_fast_reduce", lambda *a: None):
            line += f" (before, a region run per element: {seconds():.2f}s)"
    print(line)


if __name__ == "__main__":
    main()
