"""Our TMA loads and bulk stores on sm_90+ (``lower/tma.py``, ``codegen/emit_tma.py``) and
our ``.nv.host`` callback filling their tensor maps (``codegen/host.py``).

* the decision: aligned zero-padded partition views feeding reductions or matrix multiplies
  go through TMA on sm_90, 100 and 120; NaN padding, ``allow_tma=False``, element-wise-only
  uses, sm_80 and unaligned arrays keep direct loads.  Aligned stores with rows of 16 bytes
  or more go through TMA in kernels that use shared memory anyway (a reduction, a matrix
  multiply, an atomic, a print), NaN-padded views included, unless a later access is
  ordered after the store by its token; a view loaded and stored shares its map;
* the callback, run on random argument buffers, writes each map exactly as
  ``tensormap.encode`` does, at the offsets ptxas gives the hidden parameters, and (with
  NVIDIA's tileiras) the same address, type, dims and strides as NVIDIA's callback;
* our PTX and our ``.nv.host`` run in the emulator and agree with the interpreter: partial
  edge tiles (clipped by TMA on stores), tiles wider than one box, loads in loops (the
  mbarrier phase alternates), stores in loops (the staging buffer is reused);
* ptxas takes the PTX for sm_90, sm_100 and sm_120.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from differential import Case, compare, export, random_array, run_interpreter
from kernels import tma as tma_kernels
from kernels.elementwise import CASES as ELEMENTWISE
from tileiras import diffcheck
from tileiras.codegen.abi import KernelInfo
from tileiras.codegen.host import build_host_object
from tileiras.codegen.tensormap import ElementType, Swizzle, TensorMap, decode, encode
from tileiras.emulate.nvhost import is_runnable_here
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.reader import read_bytecode

import _tma

CASES = {c.name: c for c in (*tma_kernels.CASES, *tma_kernels.OWN_CASES)}
TYPES = {"float16": ElementType.F16, "bfloat16": ElementType.BF16, "float32": ElementType.F32,
         "float64": ElementType.F64, "int8": ElementType.U8, "uint8": ElementType.U8,
         "int16": ElementType.U16, "int32": ElementType.U32, "int64": ElementType.U64}
needs_x86 = pytest.mark.skipif(not is_runnable_here(), reason=".nv.host is x86-64 code")


def compiled(name: str, arch: str = "sm_90", stop: str = "ptx"):
    bytecode = export(CASES[name], arch=arch)
    return bytecode, run_stages(read_bytecode(bytecode), CompileOptions(gpu_name=arch), stop)


# ----------------------------------------------------------------------------- the decision
LOAD_COPY = "cp.async.bulk.tensor.{}d.shared::cta.global"
STORE_COPY = "cp.async.bulk.tensor.{}d.global.shared::cta"


def copies(ptx: str, pattern: str) -> int:
    return sum(ptx.count(pattern.format(n)) for n in range(1, 6))


#: a store of 2-D f32 tiles with 256-byte rows goes as two boxes of 128-byte swizzled rows
#: (``tma.store_box``), as NVIDIA's tool stores centre_2d and matmul's f32 result
@pytest.mark.parametrize("name, arch, loads, stores", [
    ("tma_centre_2d_f32", "sm_90", 1, 2), ("tma_centre_2d_f32", "sm_100", 1, 2),
    ("tma_centre_2d_f32", "sm_120", 1, 2),
    ("tma_centre_2d_f32", "sm_80", 0, 0),
    ("tma_centre_2d_nan_f32", "sm_90", 0, 2),       # TMA fills zeros only; stores do not pad
    ("tma_centre_2d_no_tma", "sm_90", 0, 2),        # allow_tma = false on the load
    ("tma_centre_2d_no_tma_store", "sm_90", 1, 0),  # allow_tma = false on the store
    ("tma_scale_2d_f32", "sm_90", 0, 0),            # element-wise only: no shared memory
    ("tma_centre_1d_f32_wide", "sm_90", 4, 4),      # 1024 elements: four 256-element boxes
    ("tma_matmul_f16", "sm_90", 8, 2),         # its K loop: a TMA ring (test_ring_default.py) of 4
                                               # stages, 2 boxes x (3 ahead + 1 a trip)
    ("tma_row_sum_f16", "sm_90", 1, 1),
    ("tma_row_sum_narrow_f32", "sm_90", 1, 0),      # the stored rows are 8 bytes
    ("tma_centre_rows_loop_f32", "sm_90", 9, 1),    # its row loop (TmaStream): 8 trips before it, the next in it
    ("tma_centre_repeated_f32", "sm_90", 1, 3),     # LLVM unrolls its three trips
    ("tma_centre_then_reload_f32", "sm_90", 1, 1),  # y's store is ordered before y's load: direct
    ("tma_rescale_loop_f32", "sm_90", 1, 1),        # reduced in a loop it enters as a carried value
])
def test_which_loads_and_stores_go_through_tma(name: str, arch: str, loads: int, stores: int) -> None:
    _, c = compiled(name, arch)
    assert (copies(c.ptx, LOAD_COPY), copies(c.ptx, STORE_COPY)) == (loads, stores)
    commits = c.ptx.count("cp.async.bulk.commit_group")
    assert commits == c.ptx.count("cp.async.bulk.wait_group.read 0") and bool(commits) == bool(stores)
    assert c.ptx.count(".hidden\t.param .align 64 .b8") == len(c.kernels[0].tensor_maps)
    assert bool(c.kernels[0].tensor_maps) == bool(loads + stores)


def test_a_view_loaded_and_stored_shares_its_map() -> None:
    _, c = compiled("tma_centre_in_place_f32")
    assert (copies(c.ptx, LOAD_COPY), copies(c.ptx, STORE_COPY)) == (1, 1)
    assert len(c.kernels[0].tensor_maps) == 1


def test_unaligned_arrays_keep_direct_loads() -> None:
    """The elementwise kernels' arrays promise no 16-byte alignment: no TMA, no hidden maps."""
    case = ELEMENTWISE[0]
    c = run_stages(read_bytecode(export(case, arch="sm_90")), CompileOptions(gpu_name="sm_90"), "ptx")
    assert "cp.async.bulk" not in c.ptx and not any(k.tensor_maps for k in c.kernels)


# ----------------------------------------------------------------------------- the callback
@needs_x86
@pytest.mark.parametrize("name, arch", [
    ("tma_centre_2d_f32", "sm_90"), ("tma_centre_1d_u8", "sm_90"), ("tma_centre_2d_f64", "sm_90"),
    ("tma_centre_5d_f32", "sm_90"), ("tma_row_sum_f16", "sm_90"), ("tma_matmul_f16", "sm_90"),
    ("tma_centre_2d_f16_wide", "sm_90"),
    ("tma_centre_3d_f32", "sm_100"), ("tma_matmul_f16", "sm_120"),
])
def test_our_callback_writes_encode_of_the_arguments(name: str, arch: str) -> None:
    _, c = compiled(name, arch)
    host = build_host_object(c.kernels)
    specs = c.kernels[0].tensor_maps
    assert specs
    rng = np.random.default_rng(3)
    large = 0
    for _ in range(8):
        arrays = _tma.random_arrays(CASES[name], rng, {1: 20000, 2: 300})
        values = [v for a in arrays for v in _tma.array_values(*a[:3])]
        maps = _tma.run_callback(c.ptx, host, values, arch)
        assert len(maps) == len(specs)
        for raw, spec in zip(maps, specs):
            address, shape, strides, dtype = arrays[[a[0] for a in arrays].index(decode(raw).address)]
            esize = np.dtype(_tma.numpy_dtype_name(dtype)).itemsize
            want = TensorMap(address, TYPES[dtype], tuple(reversed(shape)),
                             tuple(s * esize for s in reversed(strides[:-1])), spec.box, Swizzle(spec.swizzle))
            assert raw == encode(want)
            large += want.span >= 1 << 17
    assert large   # the span bit was exercised


@needs_x86
@pytest.mark.parametrize("name", ["tma_centre_2d_f32", "tma_centre_3d_f32", "tma_row_sum_f16",
                                  "tma_centre_2d_bf16", "tma_matmul_f16"])
def test_our_maps_describe_the_tensors_as_nvidias_do(name: str, real_tileiras: str) -> None:
    """Same arguments to NVIDIA's callback and ours: each of our maps has the address, element
    type, dims and strides of NVIDIA's map of the same array (boxes and swizzles are each
    compiler's own choice)."""
    _, nv_ptx, nv_host = _tma.build_with_nvidia(CASES[name], real_tileiras)
    _, c = compiled(name)
    arrays = _tma.random_arrays(CASES[name], np.random.default_rng(5), {1: 20000, 2: 300})
    values = [v for a in arrays for v in _tma.array_values(*a[:3])]
    theirs = {m.address: m for m in map(decode, _tma.run_callback(nv_ptx, nv_host, values))}
    ours = [decode(raw) for raw in _tma.run_callback(c.ptx, build_host_object(c.kernels), values)]
    assert ours
    for m in ours:
        if m.address in theirs:
            other = theirs[m.address]
            assert (m.element_type, m.dims, m.strides) == (other.element_type, other.dims, other.strides)


# ----------------------------------------------------------------------------- end to end
#: case -> (shape of every array, grid); every shape leaves partial tiles at the edges
END_TO_END = {
    "tma_centre_1d_f32": ([(400,)] * 2, (4, 1, 1)),
    "tma_centre_1d_u8": ([(528,)] * 2, (3, 1, 1)),
    "tma_centre_2d_f32": ([(48, 80)] * 2, (3, 2, 1)),
    "tma_centre_2d_bf16": ([(32, 144)] * 2, (2, 2, 1)),
    "tma_centre_2d_f64": ([(16, 48)] * 2, (2, 2, 1)),
    "tma_centre_2d_i8": ([(32, 80)] * 2, (2, 2, 1)),
    "tma_centre_3d_f32": ([(16, 16, 48)] * 2, (3, 1, 1)),
    "tma_centre_5d_f32": ([(16, 2, 2, 4, 16)] * 2, (3, 1, 1)),
    "tma_centre_1d_f32_wide": ([(1520,)] * 2, (2, 1, 1)),
    "tma_centre_2d_f16_wide": ([(12, 1000)] * 2, (3, 1, 1)),
    "tma_row_sum_f16": ([(48, 240), (48,)], (3, 1, 1)),
    "tma_row_sum_loop_f32": ([(40, 112), (40,)], (3, 1, 1)),
    "tma_rescale_loop_f32": ([(176,)] * 2, (3, 1, 1)),
    "tma_row_sum_loop_bf16": ([(20, 208), (20,)], (3, 1, 1)),
    "tma_matmul_f16": ([(96, 64), (80, 64), (96, 80)], (2, 2, 1)),
    "tma_centre_rows_loop_f32": ([(40, 112)] * 2, (3, 1, 1)),
    "tma_centre_rows_loop_f16": ([(20, 208)] * 2, (3, 1, 1)),
    "tma_centre_in_place_f32": ([(40, 80)], (3, 3, 1)),
    "tma_centre_repeated_f32": ([(40, 32), (40, 80)], (3, 1, 1)),
    "tma_centre_then_reload_f32": ([(40, 32)] * 3, (3, 1, 1)),
    "tma_centre_2d_nan_f32": ([(40, 64)] * 2, (3, 1, 1)),
}


@needs_x86
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("name", sorted(END_TO_END))
def test_our_tma_ptx_and_host_object_match_interpreter(name: str, arch: str) -> None:
    bytecode, c = compiled(name, arch)
    assert copies(c.ptx, STORE_COPY)     # and a TMA load, but for the NaN-padded view
    shapes, grid = END_TO_END[name]
    arrays = [p for p in CASES[name].params[0] if hasattr(p, "ndim")]
    rng = np.random.default_rng(11)
    from differential import numpy_dtype
    values = [random_array(rng, numpy_dtype(p.dtype), s) for p, s in zip(arrays, shapes)]
    case = Case(bytecode, read_bytecode(bytecode).functions[0].name, values, grid)
    got = diffcheck.run_ptx(c.ptx, case.entry, grid, case.args(values), host_object=build_host_object(c.kernels))
    problem = compare(run_interpreter(case), got)
    assert problem is None, problem


@needs_x86
def test_without_the_callback_the_maps_are_empty() -> None:
    """The host object is what makes the loads work: with a callback that writes nothing
    (the kernel's info without maps) the launch faults or the results differ."""
    bytecode, c = compiled("tma_centre_2d_f32")
    shapes, grid = END_TO_END["tma_centre_2d_f32"]
    values = [random_array(np.random.default_rng(1), np.float32, s) for s in shapes]
    case = Case(bytecode, read_bytecode(bytecode).functions[0].name, values, grid)
    k = c.kernels[0]
    empty = build_host_object([KernelInfo(k.name, k.param_types, k.threads_per_cta, k.maxnreg,
                                          k.num_cta_in_cga, k.arch)])
    try:
        got = diffcheck.run_ptx(c.ptx, case.entry, grid, case.args(values), host_object=empty)
    except AssertionError as err:       # faulted in the emulator
        assert "faulted" in str(err)
    else:
        assert compare(run_interpreter(case), got) is not None


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
def test_ptxas_takes_our_tma_kernels(arch: str) -> None:
    for name in ("tma_centre_2d_f16_wide", "tma_row_sum_loop_f32", "tma_matmul_f16", "tma_centre_rows_loop_f16"):
        _, c = compiled(name, arch, "cubin")
        assert c.cubin[:4] == b"\x7fELF" and c.host and copies(c.ptx, STORE_COPY)


REDUCE_COPY = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.{}.tile.bulk_group"


@pytest.mark.slow
@needs_x86
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_atomic_view_reductions_are_bulk_tensor_reductions(arch: str) -> None:
    """``tile_atomics`` exported aligned: its six atomic reductions into views become bulk
    tensor reductions, as NVIDIA's tool emits them (f32 add; i32 signed max/min through a
    map that reads signed integers, or, and, xor), no ``atom`` left; PTX and host object
    agree with the interpreter on values of both signs, over partial edge tiles (grid 2x2
    of 32x32 tiles on 48x48 inputs).  Exported unaligned, they stay ``atom``s."""
    from kernels.memory import CASES as MEMORY

    case = next(c for c in MEMORY if c.name == "tile_atomics")
    data = export(case, arch=arch, aligned=True)
    c = run_stages(read_bytecode(data), CompileOptions(gpu_name=arch), "ptx")
    assert [c.ptx.count(REDUCE_COPY.format(op)) for op in ("add", "max", "min", "or", "and", "xor")] == [1] * 6
    assert "atom." not in c.ptx
    # each reduction token-ordered after the previous one waits at one barrier, not two
    assert not re.search(r"bar\.sync 0;\s*(?://[^\n]*\s*)*bar\.sync 0;", c.ptx)
    assert {m.element_type for m in c.kernels[0].tensor_maps} >= {ElementType.F32, ElementType.S32}
    rng = np.random.default_rng(5)
    values = [random_array(rng, np.float32, (48, 48)), random_array(rng, np.float32, (48, 48)),
              rng.integers(-1000, 1000, (48, 48)).astype(np.int32)]
    run = Case(data, read_bytecode(data).functions[0].name, values, (2, 2, 1))
    got = diffcheck.run_ptx(c.ptx, run.entry, run.grid, run.args(values), host_object=build_host_object(c.kernels))
    assert compare(run_interpreter(run), got) is None
    unaligned = run_stages(read_bytecode(export(case, arch=arch)), CompileOptions(gpu_name=arch), "ptx")
    assert "cp.reduce" not in unaligned.ptx and "atom." in unaligned.ptx


@pytest.mark.slow
@needs_x86
def test_staging_buffers_of_128_byte_rows_are_swizzled() -> None:
    """``tile_atomics`` aligned on sm_90: its 32x32 f32/i32 boxes have 128-byte rows, so every
    map is 128-byte swizzled and every staging buffer 1024-byte aligned; the threads' 16-byte
    staging writes and reads then meet no bank conflicts (the emulator's wavefront count),
    and the results still agree with the interpreter."""
    from kernels.memory import CASES as MEMORY
    from tileiras.emulate import launch

    case = next(c for c in MEMORY if c.name == "tile_atomics")
    data = export(case, arch="sm_90", aligned=True)
    c = run_stages(read_bytecode(data), CompileOptions(gpu_name="sm_90"), "ptx")
    assert {m.swizzle for m in c.kernels[0].tensor_maps} == {Swizzle.B128}
    assert ".align 1024 .b8 global_smem" in c.ptx
    rng = np.random.default_rng(8)
    values = [random_array(rng, np.float32, (48, 48)), random_array(rng, np.float32, (48, 48)),
              rng.integers(-1000, 1000, (48, 48)).astype(np.int32)]
    run = Case(data, read_bytecode(data).functions[0].name, values, (2, 2, 1))
    host = build_host_object(c.kernels)
    result = launch(c.ptx, run.entry, run.grid, run.args([v.copy() for v in values]), traffic=True, host_object=host)
    assert result.traffic.shared_stores.requests and result.traffic.shared_stores.conflicts == 0
    assert result.traffic.shared_loads.conflicts == 0
    got = diffcheck.run_ptx(c.ptx, run.entry, run.grid, run.args(values), host_object=host)
    assert compare(run_interpreter(run), got) is None


def test_64_bit_extents_get_no_tensor_map_as_with_nvidia():
    """A view indexed with i64 (cuTile's ``index_dtype=int64``, for tensors past 2^31
    elements) may have extents a tensor map cannot encode (32-bit): NVIDIA's tool loads and
    stores it directly and says why; so do we, and the kernel still agrees."""
    from tileiras.lower.tma import tma_check
    from tileiras.tile import ops_memory as MEM

    _, c = compiled("tma_centre_2d_i64_index", "sm_90")
    (tas,) = c.tas.values()
    assert tas.tensor_maps == () and not tas.tma
    views = [op for op in tas.aa.function.walk() if isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp))]
    assert views and all(tma_check(tas.aa, op, "sm_90") == "hardware coordinate limits exceeded - shapes or "
                         "strides require encoding beyond TMA descriptor capacity" for op in views)
    case = CASES["tma_centre_2d_i64_index"]
    (report,) = diffcheck.check_module(read_bytecode(export(case, "sm_90")), "sm_90", grid=(3, 2, 1), extent=80)
    assert report.problem is None, report.problem


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_f32_epilogue_stores_land_in_swizzled_boxes(arch) -> None:
    """gemm_at's 64x64 f32 result (256-byte rows) is stored by TMA as two 64x32 boxes of
    128-byte swizzled rows (``tma.store_box``), as NVIDIA's tool stores it: the
    accumulator's 16-byte runs, a row per lane (wgmma's fragments on sm_90, tcgen05's
    16x32bx2 rows on sm_100), then meet no bank conflicts in the staging (row-major they
    met 1536 in gemm_basic's), and the result still agrees with the interpreter."""
    from kernels.linalg import CASES as LINALG
    from tileiras.emulate import launch

    case = next(c for c in LINALG if c.name == "gemm_at")
    data = export(case, arch=arch, aligned=True)
    c = run_stages(read_bytecode(data), CompileOptions(gpu_name=arch), "ptx")
    (store,) = [(op, p) for op, p in c.tas[c.module.functions[0].name].tma.items() if op.name == "store_view_tko"]
    assert (store[1].box, store[1].boxes, store[1].swizzle) == ((64, 32), (1, 2), 128)
    assert copies(c.ptx, STORE_COPY) == 2
    rng = np.random.default_rng(4)
    values = [random_array(rng, np.float16, (112, 112)), random_array(rng, np.float16, (112, 112)),
              np.zeros((112, 112), np.float32)]
    run = Case(data, read_bytecode(data).functions[0].name, values, (2, 2, 1))
    host = build_host_object(c.kernels)
    result = launch(c.ptx, run.entry, run.grid, run.args([v.copy() for v in values]), traffic=True, host_object=host)
    assert result.traffic.shared_stores.requests and result.traffic.shared_stores.conflicts == 0
    got = diffcheck.run_ptx(c.ptx, run.entry, run.grid, run.args(values), host_object=host)
    assert compare(run_interpreter(run), got) is None
