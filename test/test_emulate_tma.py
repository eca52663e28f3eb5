"""NVIDIA's TMA PTX in the emulator: ``cp.async.bulk.tensor`` loads completing on mbarrier
transactions, bulk tensor stores, swizzled shared memory and out-of-bounds zeros, with the
tensor maps filled by NVIDIA's own ``.nv.host`` callback at launch.  Each kernel of
``test/kernels/tma.py`` (aligned signatures, so NVIDIA's tileiras uses TMA on sm_90) must
agree with the reference interpreter; shapes leave partial tiles at the edges."""
from __future__ import annotations

import numpy as np
import pytest

from differential import Case, compare, numpy_dtype, random_array, run_interpreter
from kernels import tma as tma_kernels
from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.emulate.nvhost import is_runnable_here
from tileiras.reader import read_bytecode

import _tma

#: case -> (shape of every array, grid)
SHAPES = {
    "tma_centre_1d_f32": ((400,), (4, 1, 1)),
    "tma_centre_1d_u8": ((528,), (3, 1, 1)),
    "tma_centre_2d_f32": ((48, 80), (3, 2, 1)),
    "tma_centre_2d_f16": ((48, 80), (2, 2, 1)),
    "tma_centre_2d_bf16": ((32, 144), (2, 2, 1)),
    "tma_centre_2d_f64": ((16, 48), (2, 2, 1)),
    "tma_centre_2d_i8": ((32, 80), (2, 2, 1)),
    "tma_centre_2d_i16": ((32, 80), (2, 2, 1)),
    "tma_centre_2d_i32": ((32, 48), (2, 2, 1)),
    "tma_centre_2d_i64": ((16, 32), (2, 2, 1)),
    "tma_centre_2d_nan_f32": ((32, 48), (2, 1, 1)),
    "tma_centre_2d_nan_f16": ((32, 48), (2, 1, 1)),
    "tma_centre_3d_f32": ((16, 16, 48), (3, 1, 1)),
    "tma_centre_4d_f16": ((16, 2, 4, 16), (3, 1, 1)),
    "tma_centre_5d_f32": ((16, 2, 2, 4, 16), (3, 1, 1)),
}
MATMUL = {"tma_matmul_f16": (96, 80, 64), "tma_matmul_bf16_k64": (80, 64, 144)}
SLOW = {"tma_matmul_f16", "tma_matmul_bf16_k64", "tma_centre_4d_f16", "tma_centre_5d_f32"}


def inputs(case, rng: np.random.Generator) -> tuple[list, tuple]:
    arrays = [p for p in case.params[0] if hasattr(p, "ndim")]
    if case.name in MATMUL:
        m, n, k = MATMUL[case.name]
        tm, tn = case.params[0][3], case.params[0][4]
        shapes, grid = [(m, k), (n, k), (m, n)], (-(-m // tm), -(-n // tn), 1)
    elif case.name == "tma_row_sum_f16":
        shapes, grid = [(48, 240), (48,)], (3, 1, 1)
    else:
        shape, grid = SHAPES[case.name]
        shapes = [shape] * len(arrays)
    values = [random_array(rng, numpy_dtype(p.dtype), s) for p, s in zip(arrays, shapes)]
    return values, grid


@pytest.fixture(scope="session")
def nvidia(real_tileiras: str) -> str:
    if not is_runnable_here():
        pytest.skip("NVIDIA's .nv.host is x86-64 code")
    return real_tileiras


CASES = [pytest.param(c, marks=pytest.mark.slow) if c.name in SLOW else c
         for c in tma_kernels.CASES if c.name != "tma_centre_2d_i64_index"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_nvidia_tma_ptx_matches_interpreter(case, nvidia: str) -> None:
    bytecode, ptx, host = _tma.build_with_nvidia(case, nvidia)
    assert "cp.async.bulk.tensor" in ptx
    values, grid = inputs(case, np.random.default_rng(7))
    entry = read_bytecode(bytecode).functions[0].name
    c = Case(bytecode, entry, values, grid)
    got = diffcheck.run_ptx(ptx, entry, grid, c.args(values), who="NVIDIA's", host_object=host)
    problem = compare(run_interpreter(c), got)
    assert problem is None, problem


def test_hidden_params_need_the_host_object(nvidia: str) -> None:
    case = next(c for c in tma_kernels.CASES if c.name == "tma_centre_2d_f32")
    bytecode, ptx, _ = _tma.build_with_nvidia(case, nvidia)
    values, grid = inputs(case, np.random.default_rng(7))
    c = Case(bytecode, read_bytecode(bytecode).functions[0].name, values, grid)
    with pytest.raises(Exception, match="hidden parameters"):
        launch(ptx, c.entry, grid, c.args(values))


# ----------------------------------------------------------------------------- our own maps
PTX_LOAD = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])
{
.reg .b32 %r<4>; .reg .b64 %rd<6>; .reg .pred %p<2>;
.shared .align 128 .b8 buf[512];
.shared .align 8 .b64 bar;
mov.b64 %rd1, tmap;
cvta.param.u64 %rd1, %rd1;
ld.param.u64 %rd2, [out];
mbarrier.init.shared.b64 [bar], 1;
cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [buf], [%rd1, {4, 2}], [bar];
mbarrier.arrive.expect_tx.shared.b64 %rd3, [bar], 256;
WAIT:
mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
@!%p1 bra WAIT;
ld.shared.u32 %r2, [buf];
st.global.u32 [%rd2+4], %r2;
ld.shared.u32 %r3, [buf+252];
st.global.u32 [%rd2+8], %r3;
cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {0, 0}], [buf];
cp.async.bulk.commit_group;
cp.async.bulk.wait_group.read 0;
ret;
}
"""


def _run_with_map(ptx: str, src: np.ndarray, traffic=None):
    """Runs ``ptx`` (one thread) with ``tmap`` an 8x8 box of u32 over ``src`` (10x12):
    (the launch, the address of src, the address of 12 output bytes); ``traffic``: a
    ``Traffic`` that counts the launch's memory requests."""
    from tileiras.codegen.tensormap import ElementType, TensorMap, encode
    from tileiras.emulate.launch import Launch, load_program
    from tileiras.emulate.machine import Batch

    prog = load_program(ptx, "k")
    run = Launch(prog, (1, 1, 1), (1, 1, 1), (1, 1, 1), 0)
    run.traffic = traffic
    run.allocate_globals()
    addr = run.gmem.allocate("src", src.nbytes)
    run.gmem.write(addr, src.tobytes())
    out_addr = run.gmem.allocate("out", 12)
    tmap = encode(TensorMap(addr, ElementType.U32, (12, 10), (48,), (8, 8)))
    for name, payload in (("out", out_addr.to_bytes(8, "little")), ("tmap", tmap)):
        at = prog.params.offsets[name]
        run.params[at:at + len(payload)] = np.frombuffer(payload, np.uint8)
    run.batch_coords = run.cta_coords()
    Batch(prog, run, np.arange(1)).run(10_000)
    return run, addr, out_addr


def test_our_map_load_lands_at_phase_completion_and_stores_in_bounds() -> None:
    """A map from ``encode`` (8x8 box of u32 over a 10x12 tensor): the box at column 8, row
    2 reads zeros past column 11; shared memory still holds zeros until the mbarrier's phase
    completes (reading it earlier traps); the bulk store back at (0, 0) writes the box
    there, in bounds only."""
    from tileiras.emulate.asynchrony import AsyncHazard

    src = np.arange(1, 121, dtype=np.uint32).reshape(10, 12)
    early = PTX_LOAD.replace("mbarrier.arrive.expect_tx", "ld.shared.u32 %r1, [buf];\nmbarrier.arrive.expect_tx")
    with pytest.raises(AsyncHazard, match=r"ld\.shared.* reads shared byte 0x0, the destination of .*"
                                          r"cp\.async\.bulk\.tensor.*before the mbarrier phase"):
        _run_with_map(early, src)
    run, addr, out_addr = _run_with_map(PTX_LOAD.replace("{4, 2}", "{8, 2}"), src)
    out = np.frombuffer(run.gmem.read(out_addr, 12), np.uint32)
    assert out[0] == 0                                   # not written
    assert out[1] == src[2, 8]                           # the box's first element
    assert out[2] == 0                                   # row 2+7, column 8+7: past column 11
    stored = np.frombuffer(run.gmem.read(addr, src.nbytes), np.uint32).reshape(10, 12)
    want = src.copy()
    want[:8, :8] = 0
    want[:8, :4] = src[2:10, 8:12]
    assert (stored == want).all()


def test_writing_a_bulk_store_source_before_its_wait_traps() -> None:
    """The bulk store reads ``buf`` until ``wait_group.read``: a write in between traps."""
    from tileiras.emulate.asynchrony import AsyncHazard

    early = PTX_LOAD.replace("cp.async.bulk.commit_group;", "cp.async.bulk.commit_group;\nst.shared.u32 [buf], 7;")
    with pytest.raises(AsyncHazard, match="before cp.async.bulk.wait_group.read"):
        _run_with_map(early, np.arange(1, 121, dtype=np.uint32).reshape(10, 12))
    late = PTX_LOAD.replace("cp.async.bulk.wait_group.read 0;", "cp.async.bulk.wait_group.read 0;\nst.shared.u32 [buf], 7;")
    _run_with_map(late, np.arange(1, 121, dtype=np.uint32).reshape(10, 12))


def test_bulk_copies_count_their_sectors() -> None:
    """``launch(traffic=True)`` counts a bulk tensor copy as one request of the sectors its
    in-bounds elements touch (``bulk.count_box``): the load of the box at column 8, row 2
    reads 16 bytes of each of 8 rows (48-byte pitch: offset 0 or 16 in a sector, one
    sector a row); the store at (0, 0) writes 32 bytes of each of 8 rows, one sector for
    the rows at even offsets and two for the odd ones: 12.  The three ``st.global.u32``
    are a sector each."""
    from tileiras.emulate.traffic import Traffic

    traffic = Traffic()
    src = np.arange(1, 121, dtype=np.uint32).reshape(10, 12)
    _run_with_map(PTX_LOAD.replace("{4, 2}", "{8, 2}"), src, traffic)
    assert (traffic.loads.requests, traffic.loads.sectors, traffic.loads.bytes) == (1, 8, 8 * 16)
    assert (traffic.stores.requests, traffic.stores.sectors, traffic.stores.bytes) == (2 + 1, 2 + 12, 8 + 8 * 32)
