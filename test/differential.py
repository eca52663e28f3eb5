"""Differential testing: the reference interpreter vs our PTX in the emulator.

For a cuTile kernel case (``test/kernels``): export its bytecode, build random inputs
from its parameter constraints, run the Tile IR interpreter (the semantics) and the
PTX our compiler emits in the PTX emulator (the code), and compare every array.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import ml_dtypes
import numpy as np

from tileiras import diffcheck, interp
from tileiras.diffcheck import Outcome, compare  # noqa: F401  (re-exported for the tests)
from tileiras.reader import read_bytecode

_NUMPY = {
    "float16": np.float16, "float32": np.float32, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
    "tfloat32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool_": np.bool_,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "float4_e2m1fn": ml_dtypes.float4_e2m1fn,
}


def numpy_dtype(ct_dtype: Any) -> Any:
    name = getattr(ct_dtype, "name", None) or str(ct_dtype).split(".")[-1]
    return _NUMPY[name]


random_array = diffcheck.random_array


@dataclass
class Case:
    """One exported entry with concrete inputs."""

    bytecode: bytes
    entry: str
    arrays: list[np.ndarray]        # the Python-level arguments, arrays and scalars
    grid: tuple[int, int, int]

    def args(self, arrays: Sequence[Any]) -> list[Any]:
        return interp.cutile_args(*arrays)


#: Elements along each dim of the random inputs: most tiles partial.  Aligned signatures
#: promise extents divisible by 16 (``ALIGNED_EXTENT``: 7 x 16, still partial tiles of 32+).
EXTENT = 100
ALIGNED_EXTENT = 112


def extent_of(case: Any, aligned: bool) -> int:
    """The inputs' extent for ``case``: its own (``KernelCase.extent``, rounded up to 16 where
    aligned) or the default."""
    if case.extent:
        return -(-case.extent // 16) * 16 if aligned else case.extent
    return ALIGNED_EXTENT if aligned else EXTENT


def export(case: Any, arch: str = "sm_90", version: str = "13.4", aligned: bool = False) -> bytes:
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    export_kernel(case.kernel, case.signatures(aligned=aligned), buf, gpu_code=arch,
                  output_format="tileir_bytecode", bytecode_version=version)
    return buf.getvalue()


def cached_export(cache: dict, case: Any, arch: str, aligned: bool = False) -> bytes:
    """``export(case, arch, aligned=aligned)`` once per (kernel, arch, aligned) in ``cache``;
    skips the calling test when cuTile refuses the combination (fp8 on sm_80, f4 before
    sm_100)."""
    import pytest

    key = (case.name, arch, aligned)
    if key not in cache:
        try:
            cache[key] = export(case, arch=arch, aligned=aligned)
        except Exception as err:  # noqa: BLE001 - cuTile's refusals have no common type
            pytest.skip(f"cuTile cannot export {case.name} for {arch}: {err}")
    return cache[key]


def make_inputs(params: Sequence[Any], rng: np.random.Generator, extent: int, indexes: Sequence[int] = ()
                ) -> list[Any]:
    """Random arguments for ``params``, every array ``extent`` along each dim; the integer
    arrays at positions ``indexes`` (``KernelCase.indexes``) hold in each row a permutation
    of the extent, a quarter of it shifted below 0 (out of range, as padding must handle)."""
    from cuda.tile.compilation import ArrayConstraint, ScalarConstraint

    values: list[Any] = []
    for position, p in enumerate(params):
        if isinstance(p, ArrayConstraint) and position in indexes:
            rows = [rng.permutation(extent) - extent // 4 for _ in range(extent ** (p.ndim - 1))]
            values.append(np.array(rows).reshape((extent,) * p.ndim).astype(numpy_dtype(p.dtype)))
        elif isinstance(p, ArrayConstraint):
            values.append(random_array(rng, numpy_dtype(p.dtype), (extent,) * p.ndim))
        elif isinstance(p, ScalarConstraint):
            dt = numpy_dtype(p.dtype)
            values.append(dt(3) if np.dtype(dt).kind in "iu" else dt(1.5))
    return values


def run_interpreter(c: Case) -> Outcome:
    return diffcheck.run_interpreter(c.bytecode, c.entry, c.grid, c.args(c.arrays))


def run_compiled(c: Case, gpu_name: str = "sm_90") -> Outcome:
    ptx, host = diffcheck.compile_with_host(read_bytecode(c.bytecode), gpu_name)
    return diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host)


def run_real_ptx(c: Case, real_tileiras: str, workdir: str, gpu_name: str = "sm_90",
                 expect: Optional[str] = None, interleave: Optional[int] = None) -> Outcome:
    """NVIDIA's tileiras compiles the case (its PTX from the cubin's ``.nv_debug_ptx_txt``);
    the emulator runs that PTX: a third opinion next to the interpreter and our code.
    ``expect``: an instruction the PTX must contain (what the test means to exercise);
    ``interleave``: the CTAs interleaved in bursts in the order this seed draws."""
    import os
    import subprocess

    from tileiras.emulate.cubin import elf_sections, ptx_from_cubin

    src = os.path.join(workdir, "case.tileir")
    out = os.path.join(workdir, "case.cubin")
    with open(src, "wb") as f:
        f.write(c.bytecode)
    subprocess.run([real_tileiras, f"--gpu-name={gpu_name}", "--lineinfo", src, "-o", out], check=True,
                   capture_output=True)
    with open(out, "rb") as f:
        cubin = f.read()
    ptx = ptx_from_cubin(cubin)
    assert expect is None or expect in ptx, f"NVIDIA's PTX has no {expect}"
    return diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), who="NVIDIA's",
                             host_object=elf_sections(cubin).get(".nv.host"), interleave=interleave,
                             burst=interleave is not None)
