"""A kernel whose shared-memory plan is over the arch's limit fails with one clear line
(exit 5), not with ptxas's error reduced to 'failed to compile Tile IR program'."""
from __future__ import annotations

import io

import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras.codegen.smem_limit import shared_bytes, smem_limit  # noqa: E402
from tileiras.errors import EXIT_COMPILE, CompileError  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402


@ct.kernel
def wide_mma(x, y):
    """A 128x256 by 256x128 f16 product: A and B staged whole in shared memory take 137,216
    bytes; on sm_120 they are staged in K slices (``mma_forms.mma_k_slice``) and fit."""
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(128, 256))
    b = ct.load(x, index=(0, i), shape=(256, 128))
    ct.store(y, index=(i, 0), tile=ct.mma(a, b, ct.zeros((128, 128), dtype=ct.float32)))


@ct.kernel
def wide_f32_product(x, y):
    """A 64x256 by 256x64 f32 product on CUDA cores (f32 has no tensor-core form): A and B
    staged whole, 131,072 bytes, with nothing to shrink: a real overflow on sm_120."""
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(64, 256))
    b = ct.load(x, index=(0, i), shape=(256, 64))
    ct.store(y, index=(i, 0), tile=ct.mma(a, b, ct.zeros((64, 64), dtype=ct.float32)))


def _module(arch: str, kernel=wide_mma, dtype=ct.float16):
    from cuda.tile.compilation import export_kernel
    from kernels._case import KernelCase, arr

    name = kernel._annotated_function.pyfunc.__name__
    case = KernelCase(name, kernel, [[arr(dtype, 2), arr(ct.float32, 2)]])
    buf = io.BytesIO()
    export_kernel(case.kernel, case.signatures(), buf, gpu_code=arch, output_format="tileir_bytecode")
    return read_bytecode(buf.getvalue())


def test_limits():
    assert [smem_limit(a) for a in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")] == \
        [166_912, 101_376, 101_376, 232_448, 232_448, 232_448, 101_376]
    ptx = (".visible .entry k(\n)\n{\n.shared .align 16 .b8 global_smem_k[1024];\n"
           ".shared .align 4 .u32 global_smem_k_$_0;\n}\n.visible .entry other(\n)\n{\n}\n")
    assert shared_bytes(ptx) == {"k": 1028, "other": 0}


def test_overflow_is_one_clear_error():
    module = _module("sm_120", wide_f32_product, ct.float32)
    name = module.functions[0].name
    with pytest.raises(CompileError) as err:
        compile_module(module, CompileOptions(gpu_name="sm_120"), "cubin")
    assert str(err.value) == (f"error: kernel '{name}' needs 131072 bytes of shared memory; "
                              "sm_120 allows at most 101376")
    assert err.value.exit_code == EXIT_COMPILE == 5


def test_within_the_limit_compiles():
    cubin = compile_module(_module("sm_90"), CompileOptions(gpu_name="sm_90"), "cubin")
    assert cubin[:4] == b"\x7fELF"


def test_k_slices_fit_sm120():
    """The f16 product that needs 137,216 bytes whole: K slices of 128 (69,632 bytes) on
    sm_120, assembled by ptxas; sm_90 keeps the whole staging."""
    ptx = compile_module(_module("sm_120"), CompileOptions(gpu_name="sm_120"), "ptx")
    assert list(shared_bytes(ptx).values()) == [69_632]
    assert ptx.count("bar.sync") >= 4           # stage, multiply, stage, multiply
    cubin = compile_module(_module("sm_120"), CompileOptions(gpu_name="sm_120"), "cubin")
    assert cubin[:4] == b"\x7fELF"
    whole = compile_module(_module("sm_90"), CompileOptions(gpu_name="sm_90"), "ptx")
    assert list(shared_bytes(whole).values()) != [69_632]
