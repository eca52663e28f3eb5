"""What a test kernel is: a cuTile kernel plus the signatures to export it with."""
from __future__ import annotations

from dataclasses import dataclass
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

    def signatures(self) -> list[KernelSignature]:
        cc = (CallingConvention.cutile_python_v2() if self.calling_convention == "v2"
              else CallingConvention.cutile_python_v1())
        fn_name = self.kernel._annotated_function.pyfunc.__name__
        return [KernelSignature(list(p), cc).with_mangled_symbol(fn_name) for p in self.params]


def arr(dtype: Any, ndim: int = 1, *, index_dtype: Any = ct.int32, contiguous: bool = True,
        **extra: Any) -> ArrayConstraint:
    """A kernel array parameter (C-contiguous by default: last stride is constant 1)."""
    stride_constant = ([None] * (ndim - 1) + [1]) if contiguous and ndim else None
    return ArrayConstraint(dtype, ndim, index_dtype=index_dtype, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=stride_constant, **extra)


def scalar(dtype: Any) -> ScalarConstraint:
    return ScalarConstraint(dtype)
