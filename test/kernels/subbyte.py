"""4-bit elements: float4_e2m1fn tiles loaded, converted, stored and multiplied.

cuTile writes f4 only for sm_100+ (bytecode 13.3+): on older targets these cases are refused
and skipped.  cuTile cannot mangle a kernel name for a float4 array parameter ("Unexpected
dtype"), so these cases export under a plain symbol (``SymbolCase``).
"""
from __future__ import annotations

from dataclasses import dataclass

import cuda.tile as ct
from cuda.tile.compilation import CallingConvention, KernelSignature

from ._case import KernelCase, arr

F4, E8M0, E4M3 = ct.float4_e2m1fn, ct.float8_e8m0fnu, ct.float8_e4m3fn
F16, F32 = ct.float16, ct.float32


@dataclass(frozen=True)
class SymbolCase(KernelCase):
    """Entries named ``<function>_<k>`` instead of cuTile's mangled names."""

    def signatures(self, aligned: bool = False) -> list[KernelSignature]:
        fn_name = self.kernel._annotated_function.pyfunc.__name__
        cc = CallingConvention.cutile_python_v1()
        return [KernelSignature(p, cc).with_symbol(f"{fn_name}_{k}")
                for k, p in enumerate(self.entry_params(aligned))]


@ct.kernel
def f4_roundtrip(x, y, z):
    """x -> f4 (round to nearest even, saturating) -> y; y -> f32 -> z."""
    t = ct.load(x, index=(ct.bid(0),), shape=(64,))
    ct.store(y, index=(ct.bid(0),), tile=ct.astype(t, F4))
    g = ct.load(y, index=(ct.bid(0),), shape=(64,))
    ct.store(z, index=(ct.bid(0),), tile=ct.astype(g, z.dtype))


@ct.kernel
def f4_tiles_2d(a, b, c):
    """2-D f4 tiles: load, widen, add, narrow, store (rows of 16 elements = 8 bytes)."""
    ta = ct.load(a, index=(ct.bid(0), ct.bid(1)), shape=(16, 16), padding_mode=ct.PaddingMode.ZERO)
    tb = ct.load(b, index=(ct.bid(0), ct.bid(1)), shape=(16, 16), padding_mode=ct.PaddingMode.ZERO)
    s = ct.astype(ta, F16) + ct.astype(tb, F16)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(s, F4))


@ct.kernel
def f4_transpose(a, b):
    """Column-major reads of an f4 tile: neighbouring elements of a byte in different threads."""
    t = ct.load(a, index=(ct.bid(0), 0), shape=(32, 8))
    ct.store(b, index=(0, ct.bid(0)), tile=ct.permute(t, (1, 0)))


@ct.kernel
def mx_f4_gemm(a, sa, b, sb, c):
    """MX matmul: f4 operands with e8m0 block scales (32 elements a block; ct.mma and Tile
    IR's mmaf refuse f4 operands)."""
    ta = ct.load(a, index=(ct.bid(0), 0), shape=(32, 64))
    tb = ct.load(b, index=(0, ct.bid(1)), shape=(64, 32))
    tsa = ct.load(sa, index=(ct.bid(0), 0), shape=(32, 2))
    tsb = ct.load(sb, index=(0, ct.bid(1)), shape=(2, 32))
    acc = ct.mma_scaled(ta, tsa, tb, tsb, ct.zeros((32, 32), dtype=F32))
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)


@ct.kernel
def nv_f4_gemm(a, sa, b, sb, c):
    """NVFP4-style matmul: f4 operands with e4m3 scales (16 elements a block)."""
    ta = ct.load(a, index=(ct.bid(0), 0), shape=(16, 32))
    tb = ct.load(b, index=(0, 0), shape=(32, 16))
    tsa = ct.load(sa, index=(ct.bid(0), 0), shape=(16, 2))
    tsb = ct.load(sb, index=(0, 0), shape=(2, 16))
    acc = ct.mma_scaled(ta, tsa, tb, tsb, ct.zeros((16, 16), dtype=F32))
    ct.store(c, index=(ct.bid(0), 0), tile=acc)


CASES = [
    SymbolCase("f4_roundtrip", f4_roundtrip, [[arr(F32), arr(F4), arr(F32)], [arr(F16), arr(F4), arr(F16)]]),
    SymbolCase("f4_tiles_2d", f4_tiles_2d, [[arr(F4, 2), arr(F4, 2), arr(F4, 2)]]),
    SymbolCase("f4_transpose", f4_transpose, [[arr(F4, 2), arr(F4, 2)]]),
    SymbolCase("mx_f4_gemm", mx_f4_gemm, [[arr(F4, 2), arr(E8M0, 2), arr(F4, 2), arr(E8M0, 2), arr(F32, 2)]]),
    SymbolCase("nv_f4_gemm", nv_f4_gemm, [[arr(F4, 2), arr(E4M3, 2), arr(F4, 2), arr(E4M3, 2), arr(F32, 2)]]),
]
