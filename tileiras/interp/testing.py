"""Helpers for tests: export a cuTile kernel to Tile IR bytecode in memory (no GPU needed).

    data = export(my_kernel, array(ct.float32), array(ct.float32), 16)
    run(data, None, grid, cutile_args(x, y))

Parameters are ``array(dtype, ndim)`` for array arguments, ``scalar(dtype)`` for runtime
scalars, and plain Python values for ``ct.Constant`` parameters.
"""
from __future__ import annotations

import io
from typing import Any


def array(dtype: Any, ndim: int = 1, *, contiguous: bool = True, index_dtype: Any = None) -> Any:
    """An array parameter: C-contiguous (last stride 1) unless ``contiguous=False``."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint
    stride_constant = ([None] * (ndim - 1) + [1]) if contiguous and ndim else None
    return ArrayConstraint(dtype, ndim, index_dtype=index_dtype or ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False, stride_constant=stride_constant)


def scalar(dtype: Any) -> Any:
    from cuda.tile.compilation import ScalarConstraint
    return ScalarConstraint(dtype)


def export(kernel: Any, *params: Any, version: str = "13.4", arch: str = "sm_90") -> bytes:
    """Tile IR bytecode of ``kernel`` specialized for ``params``."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel
    name = kernel._annotated_function.pyfunc.__name__
    sig = KernelSignature(list(params), CallingConvention.cutile_python_v1()).with_mangled_symbol(name)
    buf = io.BytesIO()
    export_kernel(kernel, [sig], buf, gpu_code=arch, output_format="tileir_bytecode",
                  bytecode_version=version)
    return buf.getvalue()
