"""A list of arrays as cuTile passes a list (or tuple) parameter of a kernel.

cuTile hands such a parameter to the kernel as two: a ``ptr<i64>`` to a table in device
memory with one row per array, and the number of rows.  A row holds the array's address,
then its shape, then its strides in elements (``1 + 2 * rank`` 64-bit words); the kernel
loads its row, turns the address back into a pointer (``int_to_ptr``) and builds a tensor
view from the shape and strides it read (grouped GEMM: ``A[g]``, ``B[g]``, ``C[g]``).

An ``ArrayList`` stands for the table wherever an argument list takes an array for a
pointer parameter: the interpreter (``interp.launch``), the emulator (``emulate.launch``)
and the checking tools map every member array into their memory as they map an array
argument (written back after the launch), then the table built from those addresses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass
class ArrayList:
    """The arrays of one list parameter, all of one rank."""

    arrays: list[np.ndarray]

    def __post_init__(self) -> None:
        ranks = {a.ndim for a in self.arrays}
        if len(ranks) > 1:
            raise ValueError(f"the arrays of a list parameter share one rank, got ranks {sorted(ranks)}")
        if not all(a.flags.c_contiguous or a.flags.f_contiguous for a in self.arrays):
            raise ValueError("the arrays of a list parameter must be contiguous (C or F order): "
                             "the table passes the strides of the memory the kernel reads")

    @property
    def rank(self) -> int:
        return self.arrays[0].ndim if self.arrays else 0

    @property
    def shape(self) -> tuple[int, int]:
        """The table's shape: a row per array, ``1 + 2 * rank`` words a row."""
        return (len(self.arrays), 1 + 2 * self.rank)

    def table(self, addresses: Sequence[int]) -> np.ndarray:
        """The table the kernel reads, the arrays at ``addresses`` (int64, C order)."""
        rows = [[int(addr), *a.shape, *(s // a.itemsize for s in a.strides)]
                for addr, a in zip(addresses, self.arrays)]
        return np.array(rows, dtype=np.int64).reshape(self.shape)

    def copy(self) -> "ArrayList":
        return ArrayList([a.copy(order="K") for a in self.arrays])


def copy_arguments(args: Sequence[Any]) -> list[Any]:
    """``args`` with every array, and every array of a list, copied in its own layout (an
    F-ordered array stays F-ordered: the strides passed with it describe that layout)."""
    return [a.copy(order="K") if isinstance(a, np.ndarray) else a.copy() if isinstance(a, ArrayList) else a
            for a in args]


def arrays_of(args: Sequence[Any]) -> list[np.ndarray]:
    """The arrays of ``args`` in order, a list's members where the list stands."""
    out: list[np.ndarray] = []
    for a in args:
        if isinstance(a, ArrayList):
            out.extend(a.arrays)
        elif isinstance(a, np.ndarray):
            out.append(a)
    return out
