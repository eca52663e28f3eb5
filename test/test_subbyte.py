"""4-bit elements (f4E2M1FN, i4): packing, conversions, memory, matrix multiply.

* Packing (spec 5.2.2): two elements a byte, element ``2i`` in bits 3..0; checked on the
  spec's own example, through pack/unpack, dense constants and memory.
* f4E2M1FN conversions: round to nearest even, saturation to +-6 (infinity too), NaN -> +6.
* The interpreter and our PTX (emulated) agree on the cuTile f4 cases (sm_100, cvt e2m1x2)
  and on Tile IR text for what cuTile does not write (i4, the arithmetic conversions used
  below sm_100).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tileiras import diffcheck, interp
from tileiras.interp import InterpError
from tileiras.interp.values import pack_nibbles, unpack_nibbles
from tileiras.text.parser import parse_module
from tileiras.verify import check_module

F4 = ml_dtypes.float4_e2m1fn

#: Every f4E2M1FN bit pattern and its value.
E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def run_both(text: str, args: list, grid=(1, 1, 1), gpu_name: str = "sm_100") -> tuple:
    module = parse_module(text, "subbyte.mlir")
    check_module(module, gpu_name=gpu_name)
    expected, got = diffcheck.run_both(module, "k", grid, args, gpu_name)
    return expected, got


# -- packing -------------------------------------------------------------------------------
def test_spec_packing_example():
    """spec 5.2.2: [0.5, 1.5] is the byte 0b0011_0001."""
    assert pack_nibbles(np.array([0.5, 1.5], F4)).tolist() == [0x31]
    assert unpack_nibbles(np.array([0x31], np.uint8), np.dtype(F4), (2,)).astype(float).tolist() == [0.5, 1.5]


def test_bit_patterns():
    codes = np.arange(16, dtype=np.uint8).view(F4)
    assert codes.astype(float).tolist() == E2M1_VALUES


def test_odd_count_pads_high_nibble():
    assert pack_nibbles(np.array([1.0, 2.0, 6.0], F4)).tolist() == [0x42, 0x07]


def test_int4_packing():
    x = np.array([-8, 7, -1, 1], ml_dtypes.int4)
    assert pack_nibbles(x).tolist() == [0x78, 0x1F]
    assert unpack_nibbles(pack_nibbles(x), x.dtype, (4,)).astype(int).tolist() == [-8, 7, -1, 1]


# -- conversion rules (interpreter) -----------------------------------------------------------
ROUNDING = [  # f32 input -> f4 value: nearest, ties to the even code, saturating
    (0.25, 0.0), (0.26, 0.5), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0),
    (5.0, 4.0), (5.01, 6.0), (7.0, 6.0), (1e30, 6.0), (np.inf, 6.0), (-np.inf, -6.0), (-0.1, -0.0),
    (-2.9, -3.0), (np.nan, 6.0),
]


def _ftof_text(src: str, dst: str, n: int = 16) -> str:
    def view(e: str) -> str:
        return f"partition_view<tile=({n}), tensor_view<{n}x{e}, strides=[1]>>"
    return f"""
entry @k(%x: tile<ptr<{src}>>, %y: tile<ptr<{dst}>>) {{
  %tok = make_token : token
  %tx = make_tensor_view %x, shape = [{n}], strides = [1] : tensor_view<{n}x{src}, strides=[1]>
  %px = make_partition_view %tx : {view(src)}
  %ty = make_tensor_view %y, shape = [{n}], strides = [1] : tensor_view<{n}x{dst}, strides=[1]>
  %py = make_partition_view %ty : {view(dst)}
  %c0 = constant <i32: 0> : tile<i32>
  %v, %t1 = load_view_tko weak %px[%c0] token = %tok : {view(src)}, tile<i32> -> tile<{n}x{src}>, token
  %w = ftof %v : tile<{n}x{src}> -> tile<{n}x{dst}>
  %t2 = store_view_tko weak %w, %py[%c0] token = %tok : tile<{n}x{dst}>, {view(dst)}, tile<i32> -> token
  return
}}
"""


@pytest.mark.parametrize("gpu_name", ["sm_100", "sm_90"])
def test_f32_to_f4_rounding(gpu_name, monkeypatch):
    """Known answers in the interpreter and in compiled code: cvt.rn.satfinite.e2m1x2 on
    sm_100, compare-and-count arithmetic below (the arch gate is lifted to reach it)."""
    if gpu_name == "sm_90":
        from tileiras.verify import arch
        monkeypatch.setitem(arch.MIN_ARCH, "f4E2M1FN", 0)
    x = np.array([v for v, _ in ROUNDING], np.float32)
    want = np.array([w for _, w in ROUNDING])
    expected, got = run_both(_ftof_text("f32", "f4E2M1FN"), [x, np.zeros(16, F4)], gpu_name=gpu_name)
    assert expected.arrays[1].astype(float).tolist() == want.tolist()
    np.testing.assert_array_equal(expected.arrays[1].view(np.uint8), got.arrays[1].view(np.uint8))
    assert np.signbit(expected.arrays[1].astype(float))[-3]  # -0.1 -> -0


@pytest.mark.parametrize("gpu_name", ["sm_100", "sm_90"])
@pytest.mark.parametrize("dst", ["f32", "f16", "bf16", "f8E4M3FN"])
def test_f4_widening_is_exact(gpu_name, dst, monkeypatch):
    if gpu_name == "sm_90":
        from tileiras.verify import arch
        monkeypatch.setitem(arch.MIN_ARCH, "f4E2M1FN", 0)
    x = np.arange(16, dtype=np.uint8).view(F4)
    out_dtype = diffcheck._DTYPES[dst]
    expected, got = run_both(_ftof_text("f4E2M1FN", dst), [x, np.zeros(16, out_dtype)], gpu_name=gpu_name)
    assert expected.arrays[1].astype(float).tolist() == E2M1_VALUES
    np.testing.assert_array_equal(expected.arrays[1].astype(float), got.arrays[1].astype(float))


def test_f8_to_f4_saturates():
    x = np.array([448.0, -448.0, 0.3125, 3.25, 5.5, -1.125] + [0.0] * 10, ml_dtypes.float8_e4m3fn)
    expected, got = run_both(_ftof_text("f8E4M3FN", "f4E2M1FN"), [x, np.zeros(16, F4)])
    assert expected.arrays[1].astype(float)[:6].tolist() == [6.0, -6.0, 0.5, 3.0, 6.0, -1.0]
    np.testing.assert_array_equal(expected.arrays[1].view(np.uint8), got.arrays[1].view(np.uint8))


# -- memory ---------------------------------------------------------------------------------
def _copy_text(shape: tuple[int, int], tile: tuple[int, int], strides: tuple[int, int]) -> str:
    s = "x".join(map(str, shape))
    t = "x".join(map(str, tile))
    st = ",".join(map(str, strides))
    tv = f"tensor_view<{s}xf4E2M1FN, strides=[{st}]>"
    pv = f"partition_view<tile=({t}), {tv}>"
    return f"""
entry @k(%x: tile<ptr<f4E2M1FN>>, %y: tile<ptr<f4E2M1FN>>) {{
  %tok = make_token : token
  %tx = make_tensor_view %x, shape = [{shape[0]}, {shape[1]}], strides = [{st}] : {tv}
  %px = make_partition_view %tx : {pv}
  %ty = make_tensor_view %y, shape = [{shape[0]}, {shape[1]}], strides = [{st}] : {tv}
  %py = make_partition_view %ty : {pv}
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %v, %t1 = load_view_tko weak %px[%bx, %by] token = %tok : {pv}, tile<i32> -> tile<{t}xf4E2M1FN>, token
  %t2 = store_view_tko weak %v, %py[%bx, %by] token = %tok : tile<{t}xf4E2M1FN>, {pv}, tile<i32> -> token
  return
}}
"""


@pytest.mark.parametrize("shape", [(34, 66), (33, 65)])
@pytest.mark.parametrize("tile", [(8, 16), (16, 2), (2, 64), (32, 32)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_copy_keeps_every_nibble(tile, order, shape):
    """Tiles whose pairs of a byte sit in one thread or in two: each element lands, bytes
    outside the tiles keep both nibbles (partial tiles at the edges).  Odd extents (outside
    the spec's byte-aligned rows) still land every nibble."""
    strides = (shape[1], 1) if order == "C" else (1, shape[0])
    x = np.random.default_rng(0).uniform(-6, 6, shape).astype(F4)
    x = x if order == "C" else np.asfortranarray(x)
    y = np.full(shape, -4.0, F4) if order == "C" else np.asfortranarray(np.full(shape, -4.0, F4))
    grid = (-(-shape[0] // tile[0]), -(-shape[1] // tile[1]), 1)
    expected, got = run_both(_copy_text(shape, tile, strides), [x, y], grid)
    np.testing.assert_array_equal(expected.arrays[1].view(np.uint8), x.view(np.uint8))
    np.testing.assert_array_equal(got.arrays[1].view(np.uint8), x.view(np.uint8))


def test_interpreter_store_writes_both_nibbles_of_a_byte():
    mem = interp.memory.Memory()
    base = mem.allocate(2, "m")
    mem.store(np.array([2 * base, 2 * base + 1, 2 * base + 3], np.uint64), np.array([1.0, 6.0, -0.5], F4),
              _f4())
    assert mem.buffers[0].data.tolist() == [0x72, 0x90]
    got = mem.load(np.array([2 * base + 1, 2 * base + 3], np.uint64), _f4())
    assert got.astype(float).tolist() == [6.0, -0.5]


def _f4():
    from tileiras.ir import types as T
    return T.F4E2M1FN


def test_pointer_offset_by_half_a_byte_raises():
    text = """
entry @k(%x: tile<ptr<f4E2M1FN>>, %o: tile<i32>) {
  %p = offset %x, %o : tile<ptr<f4E2M1FN>>, tile<i32> -> tile<ptr<f4E2M1FN>>
  return
}
"""
    module = parse_module(text, "odd.mlir")
    with pytest.raises(InterpError, match="odd number of elements"):
        interp.run(module, "k", 1, [np.zeros(4, F4), 3])
    interp.run(module, "k", 1, [np.zeros(4, F4), 2])


# -- i4 (Tile IR text: cuTile has no int4; mmaf refuses f4 operands, mmaf_scaled takes them) --------------------------------------
I4_TEXT = """
entry @k(%x: tile<ptr<i8>>, %s: tile<ptr<i32>>, %u: tile<ptr<i32>>, %f: tile<ptr<f32>>) {
  %tok = make_token : token
  %tx = make_tensor_view %x, shape = [32], strides = [1] : tensor_view<32xi8, strides=[1]>
  %px = make_partition_view %tx : partition_view<tile=(32), tensor_view<32xi8, strides=[1]>>
  %ts = make_tensor_view %s, shape = [32], strides = [1] : tensor_view<32xi32, strides=[1]>
  %ps = make_partition_view %ts : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>
  %tu = make_tensor_view %u, shape = [32], strides = [1] : tensor_view<32xi32, strides=[1]>
  %pu = make_partition_view %tu : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>
  %tf = make_tensor_view %f, shape = [32], strides = [1] : tensor_view<32xf32, strides=[1]>
  %pf = make_partition_view %tf : partition_view<tile=(32), tensor_view<32xf32, strides=[1]>>
  %c0 = constant <i32: 0> : tile<i32>
  %v, %t1 = load_view_tko weak %px[%c0] token = %tok : partition_view<tile=(32), tensor_view<32xi8, strides=[1]>>, tile<i32> -> tile<32xi8>, token
  %n = trunci %v : tile<32xi8> -> tile<32xi4>
  %a = exti %n signed : tile<32xi4> -> tile<32xi32>
  %b = exti %n unsigned : tile<32xi4> -> tile<32xi32>
  %c = itof %a signed : tile<32xi32> -> tile<32xf32>
  %t2 = store_view_tko weak %a, %ps[%c0] token = %tok : tile<32xi32>, partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>, tile<i32> -> token
  %t3 = store_view_tko weak %b, %pu[%c0] token = %tok : tile<32xi32>, partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>, tile<i32> -> token
  %t4 = store_view_tko weak %c, %pf[%c0] token = %tok : tile<32xf32>, partition_view<tile=(32), tensor_view<32xf32, strides=[1]>>, tile<i32> -> token
  return
}
"""


def test_i4_truncate_extend_convert():
    x = (np.arange(32) * 7 - 100).astype(np.int8)
    args = [x, np.zeros(32, np.int32), np.zeros(32, np.int32), np.zeros(32, np.float32)]
    expected, got = run_both(I4_TEXT, args, gpu_name="sm_90")
    low = x.astype(np.int64) & 0xF
    signed = np.where(low >= 8, low - 16, low)
    assert expected.arrays[1].tolist() == signed.tolist()
    assert expected.arrays[2].tolist() == low.tolist()
    assert expected.arrays[3].tolist() == signed.astype(float).tolist()
    for e, g in zip(expected.arrays, got.arrays):
        np.testing.assert_array_equal(e, g)


def test_f4_dense_constant_packing():
    """Dense f4 constants: packed bytes (low nibble first) and one byte an element read the same."""
    from tileiras.interp.values import decode_dense
    from tileiras.ir import attrs as A
    from tileiras.ir import types as T
    t = T.TileType(T.F4E2M1FN, (4,))
    packed = decode_dense(A.DenseElementsAttr(t, bytes([0x31, 0xF7])), t)
    unpacked = decode_dense(A.DenseElementsAttr(t, bytes([0x1, 0x3, 0x7, 0xF])), t)
    assert packed.astype(float).tolist() == unpacked.astype(float).tolist() == [0.5, 1.5, 6.0, -6.0]


# -- the cuTile cases --------------------------------------------------------------------------
def _subbyte_cases():
    pytest.importorskip("cuda.tile")
    from kernels import subbyte
    return [pytest.param(c, k, id=f"{c.name}[{k}]") for c in subbyte.CASES for k in range(len(c.params))]


@pytest.mark.parametrize("case, k", _subbyte_cases())
def test_cutile_case_interpreter_matches_compiled(case, k):
    from differential import Case, compare, export, make_inputs, run_compiled, run_interpreter

    from tileiras.reader import read_bytecode
    data = export(case, arch="sm_100")
    entry = read_bytecode(data).functions[k].name
    c = Case(data, entry, make_inputs(case.params[k], np.random.default_rng(1), 100), (2, 2, 1))
    problem = compare(run_interpreter(c), run_compiled(c, "sm_100"))
    assert problem is None, problem


# -- reader: tiles of ptr<f4E2M1FN> ------------------------------------------------------------
PTR_TILE_TEXT = """
entry @k(%x: tile<ptr<f4E2M1FN>>) {{
  %r = reshape %x : tile<ptr<f4E2M1FN>> -> tile<{shape}xptr<f4E2M1FN>>
  return
}}
"""


def _ptr_tile_bytecode(shape: str) -> bytes:
    from tileiras.writer import write_bytecode
    return write_bytecode(parse_module(PTR_TILE_TEXT.format(shape=shape), "ptr.mlir"))


@pytest.mark.parametrize("shape, offset", [("1", 10), ("1x1", 18), ("2x4x1", 26)])
def test_reader_refuses_tiles_of_f4_pointers(shape, offset):
    """NVIDIA's reader refuses the type tile<...xptr<f4E2M1FN>> itself, counting the offset
    from the byte after the type tag (measured with tileiras 13.5: 10, 18, 26 by rank)."""
    from tileiras.errors import BytecodeError
    from tileiras.reader import read_bytecode
    with pytest.raises(BytecodeError) as err:
        read_bytecode(_ptr_tile_bytecode(shape), None)
    assert str(err.value) == (f"error: error at offset {offset}: tiles of ptr<f4E2M1FN> must have rank 0; "
                              "use an f4 tile view for memory accesses")


def test_f4_pointer_tile_message_matches_nvidia(tmp_path, capsys, real_tileiras, real_tileirdisasm):
    import subprocess

    from tileiras import disasm, driver
    path = tmp_path / "k.tileir"
    path.write_bytes(_ptr_tile_bytecode("1x1"))
    for tool, ours_main, extra in ((real_tileiras, driver.main, ["--gpu-name", "sm_100", "-o", str(tmp_path / "x")]),
                                   (real_tileirdisasm, disasm.main, [])):
        real = subprocess.run([tool, str(path), *extra], capture_output=True, text=True, timeout=60)
        rc = ours_main([str(path), *extra])
        err = capsys.readouterr().err
        assert rc == real.returncode == 3
        assert err.splitlines()[0] == real.stderr.splitlines()[0]


# -- fnv8E5M3FNU (UE5M3 scales: no numpy type; held as codes, decoded by a table) -----------------
FNV8_KNOWN = [  # f32 input -> (code, value): bias 15, 3 mantissa bits, subnormals, NaN = 0xFF only
    (1.0, 0x78, 1.0), (1.0625, 0x78, 1.0), (1.1875, 0x7A, 1.25), (0.5, 0x70, 0.5),
    (2.0**-14, 0x08, 2.0**-14), (2.0**-17, 0x01, 2.0**-17), (2.0**-18, 0x00, 0.0), (3 * 2.0**-19, 0x01, 2.0**-17),
    (114688.0, 0xFE, 114688.0), (122880.0, 0xFE, 114688.0), (np.inf, 0xFE, 114688.0),
    (-3.0, 0x00, 0.0), (-np.inf, 0x00, 0.0), (np.nan, 0xFF, np.nan), (448.0, 0xBE, 448.0),
]


def test_fnv8_code_values():
    from tileiras.interp.floats import FNV8_VALUES
    assert FNV8_VALUES[[0x00, 0x01, 0x07, 0x08, 0x78, 0x79, 0xF8, 0xFE]].tolist() == [
        0.0, 2.0**-17, 7 * 2.0**-17, 2.0**-14, 1.0, 1.125, 65536.0, 114688.0]
    assert np.isnan(FNV8_VALUES[0xFF]) and np.all(np.diff(FNV8_VALUES[:0xFF]) > 0)


def _fnv8_text(n: int = 16) -> str:
    def view(e: str) -> str:
        return f"partition_view<tile=({n}), tensor_view<{n}x{e}, strides=[1]>>"
    return f"""
entry @k(%x: tile<ptr<f32>>, %y: tile<ptr<i8>>, %z: tile<ptr<f32>>) {{
  %tok = make_token : token
  %tx = make_tensor_view %x, shape = [{n}], strides = [1] : tensor_view<{n}xf32, strides=[1]>
  %px = make_partition_view %tx : {view("f32")}
  %ty = make_tensor_view %y, shape = [{n}], strides = [1] : tensor_view<{n}xi8, strides=[1]>
  %py = make_partition_view %ty : {view("i8")}
  %tz = make_tensor_view %z, shape = [{n}], strides = [1] : tensor_view<{n}xf32, strides=[1]>
  %pz = make_partition_view %tz : {view("f32")}
  %c0 = constant <i32: 0> : tile<i32>
  %v, %t1 = load_view_tko weak %px[%c0] token = %tok : {view("f32")}, tile<i32> -> tile<{n}xf32>, token
  %w = ftof %v : tile<{n}xf32> -> tile<{n}xfnv8E5M3FNU>
  %b = bitcast %w : tile<{n}xfnv8E5M3FNU> -> tile<{n}xi8>
  %t2 = store_view_tko weak %b, %py[%c0] token = %tok : tile<{n}xi8>, {view("i8")}, tile<i32> -> token
  %u = ftof %w : tile<{n}xfnv8E5M3FNU> -> tile<{n}xf32>
  %t3 = store_view_tko weak %u, %pz[%c0] token = %tok : tile<{n}xf32>, {view("f32")}, tile<i32> -> token
  return
}}
"""


def test_fnv8_conversions_known_answers():
    """f32 -> fnv8E5M3FNU -> f32 in the interpreter: round to nearest even, saturation to
    1.75 * 2^16 (infinity too), negatives to +0, NaN kept (test_fnv8.py: the compiled code)."""
    module = parse_module(_fnv8_text(), "fnv8.mlir")
    x = np.array([v for v, _, _ in FNV8_KNOWN] + [0.0], np.float32)
    out = interp.run(module, "k", 1, [x, np.zeros(16, np.int8), np.zeros(16, np.float32)])
    assert out[1].view(np.uint8).tolist() == [c for _, c, _ in FNV8_KNOWN] + [0]
    np.testing.assert_array_equal(out[2], np.array([w for _, _, w in FNV8_KNOWN] + [0.0], np.float32))


# -- pack / unpack (spec 5.2.2: element 2j in the low nibble of byte j) ---------------------------
def _view(n: int, e: str) -> str:
    return f"partition_view<tile=({n}), tensor_view<{n}x{e}, strides=[1]>>"


def _io(name: str, arg: str, n: int, e: str) -> str:
    return (f"  %t{name} = make_tensor_view %{arg}, shape = [{n}], strides = [1] : tensor_view<{n}x{e}, strides=[1]>\n"
            f"  %{name} = make_partition_view %t{name} : {_view(n, e)}\n")


def _pack_text(n: int, e: str) -> str:
    """x (n elements of e) -> pack -> y (n/2 bytes); z (n/2 bytes) -> unpack -> w (n of e),
    with i4 going through i8 memory (trunci / exti)."""
    m = n // 2
    mem = "i8" if e == "i4" else e
    load_x = f"  %lx, %t1 = load_view_tko weak %px[%c0] token = %tok : {_view(n, mem)}, tile<i32> -> tile<{n}x{mem}>, token\n"
    x = "%lx"
    if e == "i4":
        load_x += f"  %x4 = trunci %lx : tile<{n}xi8> -> tile<{n}xi4>\n"
        x = "%x4"
    unpacked = "%u"
    store_w = ""
    if e == "i4":
        store_w += f"  %u8 = exti %u signed : tile<{n}xi4> -> tile<{n}xi8>\n"
        unpacked = "%u8"
    store_w += (f"  %t4 = store_view_tko weak {unpacked}, %pw[%c0] token = %tok : tile<{n}x{mem}>, {_view(n, mem)}, "
                "tile<i32> -> token\n")
    return (f"entry @k(%x: tile<ptr<{mem}>>, %y: tile<ptr<i8>>, %z: tile<ptr<i8>>, %w: tile<ptr<{mem}>>) {{\n"
            "  %tok = make_token : token\n"
            + _io("px", "x", n, mem) + _io("py", "y", m, "i8") + _io("pz", "z", m, "i8") + _io("pw", "w", n, mem)
            + "  %c0 = constant <i32: 0> : tile<i32>\n" + load_x
            + f"  %p = pack {x} : tile<{n}x{e}> -> tile<{m}xi8>\n"
            + f"  %t2 = store_view_tko weak %p, %py[%c0] token = %tok : tile<{m}xi8>, {_view(m, 'i8')}, tile<i32> -> token\n"
            + f"  %lz, %t3 = load_view_tko weak %pz[%c0] token = %tok : {_view(m, 'i8')}, tile<i32> -> tile<{m}xi8>, token\n"
            + f"  %u = unpack %lz : tile<{m}xi8> -> tile<{n}x{e}>\n" + store_w + "  return\n}\n")


@pytest.mark.parametrize("n", [16, 512])
@pytest.mark.parametrize("e", ["f4E2M1FN", "i4"])
def test_pack_unpack_subbyte(e, n):
    """Interpreter and compiled code agree with the packing order, for a tile smaller than
    the CTA (one element a thread) and one of several elements a thread."""
    rng = np.random.default_rng(3)
    z = rng.integers(0, 256, n // 2).astype(np.uint8).view(np.int8)
    if e == "i4":
        x = rng.integers(-8, 8, n).astype(np.int8)
        args = [x, np.zeros(n // 2, np.int8), z, np.zeros(n, np.int8)]
        low = x.astype(np.uint8) & 0xF
    else:
        x = (np.arange(n) % 16).astype(np.uint8).view(F4)
        args = [x, np.zeros(n // 2, np.int8), z, np.zeros(n, F4)]
        low = x.view(np.uint8)
    expected, got = run_both(_pack_text(n, e), args, gpu_name="sm_100")
    bytes_want = (low[0::2] | (low[1::2] << 4)).astype(np.uint8)
    assert expected.arrays[1].view(np.uint8).tolist() == bytes_want.tolist()
    nibbles = np.stack([z.view(np.uint8) & 0xF, z.view(np.uint8) >> 4], axis=-1).reshape(-1)
    if e == "i4":
        w_want = np.where(nibbles >= 8, nibbles.astype(np.int16) - 16, nibbles).astype(np.int8)
        assert expected.arrays[3].tolist() == w_want.tolist()
    else:
        assert expected.arrays[3].view(np.uint8).tolist() == nibbles.tolist()
    for k in (1, 3):
        np.testing.assert_array_equal(expected.arrays[k].view(np.uint8), got.arrays[k].view(np.uint8))


# -- byte pairs: one thread holds both elements of a byte (as NVIDIA's tileiras lays them out) ----
def _memory_ops(ptx: str) -> list[str]:
    import re
    return re.findall(r"\b((?:ld|st)\.global[.\w]*|(?:atom|red)\.[.\w]*global[.\w]*)", ptx)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("tile", [(8, 16), (16, 2), (2, 64), (64, 64)])
def test_f4_copy_stores_whole_bytes(tile, order):
    """A copy through f4 views: each thread holds pairs along the unit-stride dim (dim 0 of a
    column-major view), loads and stores them as whole bytes: no atomics (128 threads and an
    8x16 tile: one byte a thread, as NVIDIA's PTX has it)."""
    shape = (34, 66)
    strides = (shape[1], 1) if order == "C" else (1, shape[0])
    ptx = diffcheck.compile_ptx(parse_module(_copy_text(shape, tile, strides), "copy.mlir"), "sm_100")
    ops = _memory_ops(ptx)
    assert set(ops) == {"ld.global.b8", "st.global.b8"}, ops
    assert "bar.sync" not in ptx  # loaded in the layout it is stored from
    if tile[0] * tile[1] <= 256:
        assert ops == ["ld.global.b8", "st.global.b8"]


def test_f4_bytes_split_over_tiles_keep_atomics():
    """One element a tile along the unit-stride dim: the two nibbles of a byte belong to two
    CTAs, so stores stay read-modify-writes (and still land every nibble)."""
    shape, tile = (8, 6), (8, 1)
    ptx = diffcheck.compile_ptx(parse_module(_copy_text(shape, tile, (6, 1)), "copy.mlir"), "sm_100")
    assert any(o.startswith("atom") for o in _memory_ops(ptx))
    x = np.random.default_rng(2).uniform(-6, 6, shape).astype(F4)
    expected, got = run_both(_copy_text(shape, tile, (6, 1)), [x, np.zeros(shape, F4)], (1, 6, 1))
    np.testing.assert_array_equal(got.arrays[1].view(np.uint8), x.view(np.uint8))


def test_pairs_reach_the_tiles_an_f4_tile_is_computed_from():
    """f32 -> f4 -> store: the f32 tile gets the pair layout too (two f32 a thread), so the
    conversion's result needs no redistribution before its byte stores."""
    from tileiras.lower.subbyte import holds_pairs
    from tileiras.pipeline import CompileOptions, run_stages
    module = parse_module(_ftof_text("f32", "f4E2M1FN", 64), "ftof.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_100"), "tileas").tas["k"]
    f32_tile = next(v for v in tas.layouts if str(v.type) == "tile<64xf32>")
    assert holds_pairs(tas.layouts[f32_tile], 0) and tas.layouts[f32_tile].size("reg") == 2
    assert not tas.converts
