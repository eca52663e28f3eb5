"""Emulated thread-instructions per second of the PTX emulator on a few kernels.

    python bench/emulate.py            # hand-written PTX kernels (no NVIDIA tools needed)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from tileiras.emulate import launch  # noqa: E402


def bench(name: str, ptx: str, grid, args, repeat: int = 3) -> None:
    launch(ptx, "k", grid, args).check()           # warm-up (parse + compile are cached)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        result = launch(ptx, "k", grid, args)
        best = min(best, time.perf_counter() - t)
    n = result.thread_instructions
    print(f"{name:28s} {n:>12,d} thread-instr  {result.steps:>7,d} steps  {best * 1e3:8.1f} ms"
          f"  {n / best / 1e6:8.2f} M thread-instr/s")


def main() -> None:
    import test_emulate_ptx as k
    rng = np.random.default_rng(0)
    n = 1 << 20
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    bench("vector add (1M, 8K CTAs)", k.VADD, (n // 128,), [a, b, np.zeros(n, np.float32), n])
    x = rng.standard_normal(256 * 1024).astype(np.float32)
    bench("block reduce (1K CTAs)", k.REDUCE, (1024,), [x, np.zeros(1024, np.float32)])
    s = rng.standard_normal((4096, 64)).astype(np.float32)
    bench("softmax rows (4K warps)", k.SOFTMAX, (4096,), [s, np.zeros_like(s)])
    bench("divergent loop (1 warp)", k.DIVERGE, (1,),
          [np.zeros((32, 2), np.uint32)])
    bench("barrier exchange (512 CTAs)", k.BARRIER_EXCHANGE, (512,), [np.zeros(512 * 128, np.uint32)])


if __name__ == "__main__":
    main()
