"""Kernels cuTile exports but NVIDIA's tools reject (their verifier says no).

Not part of ALL_CASES: test_cli checks that we reject them the same way.
"""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr


@ct.kernel
def unsigned_divmod(x, out):
    a = ct.load(x, index=(ct.bid(0),), shape=(64,))
    q, m = ct.divmod(a, a | 1)  # cuTile emits divi with rounding negative_inf + unsigned
    ct.store(out, index=(ct.bid(0),), tile=q + m)


#: (case, the message NVIDIA's verifier gives)
REJECTED = [
    (KernelCase("unsigned_divmod", unsigned_divmod, [[arr(ct.uint32), arr(ct.uint32)]]),
     "'cuda_tile.divi' op rounding mode 'negative_inf' is not allowed with 'unsigned' flag"),
]
