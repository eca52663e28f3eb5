"""What a test kernel is: a cuTile kernel plus the signatures to export it with."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                   ScalarConstraint)


@dataclass(frozen=True)
class KernelCase:
    """``name`` is unique across test/kernels; ``params`` holds one parameter list per
    exported entry (several lists = several entries in one module)."""

    name: str
    kernel: Any
    params: Sequence[Sequence[Any]]
    calling_convention: str = "v1"
    #: positions of integer array parameters that index a dim as long as the inputs'
    #: extent (a paged cache's block table): ``differential.make_inputs`` fills each row
    #: with distinct indices mostly in range, not values up to the array's size
    indexes: tuple[int, ...] = ()
    #: elements along each dim of the differential tests' inputs (``differential.extent_of``)
    #: where the default would emulate for long (a persistent kernel's every row, chunk by
    #: chunk); 0: the default.  Still past one tile, so the last one is partial
    extent: int = 0

    def signatures(self, aligned: bool = False) -> list[KernelSignature]:
        """One signature per entry; ``aligned``: every array as a framework's tensor
        (``aligned_array``), the common case, else with no alignment promised."""
        cc = (CallingConvention.cutile_python_v2() if self.calling_convention == "v2"
              else CallingConvention.cutile_python_v1())
        fn_name = self.kernel._annotated_function.pyfunc.__name__
        return [KernelSignature(list(p), cc).with_mangled_symbol(fn_name) for p in self.entry_params(aligned)]

    def entry_params(self, aligned: bool = False) -> list[list[Any]]:
        """``params``, each array made ``aligned_array`` when ``aligned``."""
        return [[aligned_param(x) for x in p] if aligned else list(p) for p in self.params]


def arr(dtype: Any, ndim: int = 1, *, index_dtype: Any = ct.int32, contiguous: bool = True,
        **extra: Any) -> ArrayConstraint:
    """A kernel array parameter (C-contiguous by default: last stride is constant 1)."""
    stride_constant = ([None] * (ndim - 1) + [1]) if contiguous and ndim else None
    return ArrayConstraint(dtype, ndim, index_dtype=index_dtype, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=stride_constant, **extra)


def scalar(dtype: Any) -> ScalarConstraint:
    return ScalarConstraint(dtype)


#: What cuTile assumes of a framework's tensor: base address (bytes), strides and shapes
#: (elements) divisible by 16.
ALIGNMENT = 16


def aligned_array(p: ArrayConstraint) -> ArrayConstraint:
    """``p`` as cuTile specializes an ordinary framework tensor: a 16-byte aligned base, every
    stride and extent not fixed by a constant divisible by 16 (``assume div_by<16>``)."""
    strides = p.stride_constant or [None] * p.ndim
    shapes = p.shape_constant or [None] * p.ndim
    return replace(p, base_addr_divisible_by=ALIGNMENT,
                   stride_divisible_by=[1 if c is not None else ALIGNMENT for c in strides],
                   shape_divisible_by=[1 if c is not None else ALIGNMENT for c in shapes])


def aligned_param(p: Any) -> Any:
    """A kernel parameter (an array, a scalar, a tuple of them, a constant) with its arrays
    made ``aligned_array``."""
    if isinstance(p, ArrayConstraint):
        return aligned_array(p)
    if isinstance(p, tuple):
        return tuple(aligned_param(x) for x in p)
    return p
