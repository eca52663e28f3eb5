"""Global accesses coalesce: a warp's scalar load or store touches as few 32-byte sectors
as its bytes need (lower/tileas.py ``TileAS.canonical``, layout/linear.py ``sector_blocked``),
counted by the emulator as Nsight counts them (tileiras/emulate/traffic.py)."""
from __future__ import annotations

import numpy as np
from test_order import LOOP_KERNEL

from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.layout.linear import LANE, REG, WARP, default_blocked, sector_blocked
from tileiras.lower.tileas import TileAS
from tileiras.text.parser import parse_module

VADD = """cuda_tile.module @kernels {
  entry @vadd(%ap: tile<ptr<f32>>, %bp: tile<ptr<f32>>, %cp: tile<ptr<f32>>, %n: tile<i32>) {
    %tok = make_token : token
    %av = make_tensor_view %ap, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bv = make_tensor_view %bp, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %cv = make_tensor_view %cp, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %apv = make_partition_view %av : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
    %bpv = make_partition_view %bv : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
    %cpv = make_partition_view %cv : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
    %a, %t1 = load_view_tko weak %apv[%bx] token = %tok : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<1024xf32>, token
    %b, %t2 = load_view_tko weak %bpv[%bx] token = %tok : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<1024xf32>, token
    %c = addf %a, %b : tile<1024xf32>
    %t3 = store_view_tko weak %c, %cpv[%bx] token = %tok : tile<1024xf32>, partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""

#: a 32x32 tile of a row-major matrix whose row stride is known only at run time, plus one
COPY2D = """cuda_tile.module @kernels {
  entry @copy2d(%xp: tile<ptr<f32>>, %op: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>) {
    %tok = make_token : token
    %xv = make_tensor_view %xp, shape = [%n, %n], strides = [%s, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
    %ov = make_tensor_view %op, shape = [%n, %n], strides = [%s, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xpv = make_partition_view %xv : partition_view<tile=(32x32), tensor_view<?x?xf32, strides=[?,1]>>
    %opv = make_partition_view %ov : partition_view<tile=(32x32), tensor_view<?x?xf32, strides=[?,1]>>
    %t, %t1 = load_view_tko weak %xpv[%bx, %by] token = %tok : partition_view<tile=(32x32), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<32x32xf32>, token
    %one = constant <f32: 1.0> : tile<32x32xf32>
    %r = addf %t, %one : tile<32x32xf32>
    %t2 = store_view_tko weak %r, %opv[%bx, %by] token = %tok : tile<32x32xf32>, partition_view<tile=(32x32), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
    return
  }
}
"""


def run_with_traffic(text: str, entry: str, grid: tuple, args: list):
    ptx = diffcheck.compile_ptx(parse_module(text, "k.mlir"), "sm_90")
    return launch(ptx, entry, grid, args, traffic=True).check()


def test_vadd_reads_four_sectors_per_request():
    """1024 f32 over 128 threads: each warp instruction reads 32 consecutive floats (128
    bytes, four sectors), as NVIDIA's PTX does; 4 elements a thread at once would read
    16-byte strides, 16 sectors a request."""
    n = 1024
    a, b = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
    c = np.zeros(n, np.float32)
    result = run_with_traffic(VADD, "vadd", (1, 1, 1), [a, b, c, np.int32(n)])
    assert np.array_equal(c, a + b)
    t = result.traffic
    assert (t.loads.requests, t.loads.sectors) == (2 * 4 * 8, 2 * 4 * 8 * 4)
    assert (t.stores.requests, t.stores.sectors) == (32, 128)
    assert t.loads.efficiency == t.stores.efficiency == 1.0


def test_2d_tile_reads_whole_sectors():
    """Rows of 32 f32 in a 64-wide matrix: every warp access uses all of every sector."""
    s = 64
    x = np.arange(s * s, dtype=np.float32)
    o = np.zeros_like(x)
    result = run_with_traffic(COPY2D, "copy2d", (2, 2, 1), [x, o, np.int32(s), np.int32(s)])
    assert np.array_equal(o.reshape(s, s)[:s, :s], (x + 1).reshape(s, s))
    t = result.traffic
    assert t.loads.sectors_per_request == t.stores.sectors_per_request == 4.0
    assert t.loads.efficiency == t.stores.efficiency == 1.0


def tile_as(warps: int = 4) -> TileAS:
    return TileAS(None, warps)


def test_1d_canonical_layout_is_lane_major():
    """Thread t holds elements t, t+128, t+256, ... of a 1-D tile."""
    layout = tile_as().canonical((1024,))
    assert layout.bases(LANE) == ((1,), (2,), (4,), (8,), (16,))
    assert layout.bases(WARP) == ((32,), (64,))
    assert layout.bases(REG) == ((128,), (256,), (512,))


def test_2d_canonical_layout_keeps_a_thread_on_few_rows():
    """32x32 f32: eight lanes over a sector of a row, a thread's four elements of a row
    eight apart, so it meets two rows (as many as with four contiguous elements), not
    eight (lanes along whole rows)."""
    layout = tile_as().canonical((32, 32))
    assert layout.bases(LANE)[:3] == ((0, 1), (0, 2), (0, 4))
    rows = {layout.apply(reg=r)[0] for r in range(layout.size(REG))}
    assert len(rows) == 2
    assert len({layout.apply(reg=r)[0] for r in range(8)} - {0}) == 1
    assert default_blocked((32, 32), 4, 1).size(REG) == 8
    assert len({default_blocked((32, 32), 4, 1).apply(reg=r)[0] for r in range(8)}) == 8
    # f64: four lanes fill a sector; f16: sixteen
    assert tile_as().canonical((16, 16), nbytes=8).bases(LANE)[:2] == ((0, 1), (0, 2))
    assert tile_as().canonical((16, 64), nbytes=2).bases(LANE)[:5] == ((0, 1), (0, 2), (0, 4), (0, 8), (1, 0))


def test_sector_blocked_covers_the_tile_once():
    for shape, regs in (((32, 32), 8), ((16, 256), 32), ((4, 8, 16), 4), ((128, 128), 128)):
        layout = sector_blocked(shape, 4, 1, 8, regs)
        seen = {layout.apply(reg=r, lane=l, warp=w) for r in range(layout.size(REG))
                for l in range(32) for w in range(4)}
        assert len(seen) == int(np.prod(shape)) and layout.size(REG) == regs


def test_a_one_row_tile_is_laid_out_as_its_row():
    """A 1x256 tile (a row of a matrix, reshaped to 256 as cuTile writes it) gets the 1-d
    lane-major layout: the reshape is free, and a loop using the row twice loads each
    element once (with a sector-blocked row, each use loaded it again in the 1-d layout)."""
    row = sector_blocked((1, 256), 4, 1, 8, 4)
    assert row.reshape((256,)) == default_blocked((256,), 4, 1)
    text = LOOP_KERNEL.replace("%s = addf %acc, %x : tile<1x256xf32>",
                               "%r = reshape %x : tile<1x256xf32> -> tile<256xf32>\n"
                               "    %m = maxf %r, %r : tile<256xf32>\n"
                               "    %q = addf %m, %r : tile<256xf32>\n"
                               "    %s2 = reshape %q : tile<256xf32> -> tile<1x256xf32>\n"
                               "    %s = addf %acc, %s2 : tile<1x256xf32>")
    ptx = diffcheck.compile_ptx(parse_module(text, "row.mlir"), "sm_90")
    x = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    out = np.zeros((256, 256), np.float32)
    # block 0 walks its row's 16 tiles; only the first lies inside the 256 columns
    t = launch(ptx, "k", (1, 1, 1), [x, out, 256], traffic=True).check().traffic
    assert (t.loads.bytes, t.loads.requests, t.loads.sectors) == (256 * 4, 8, 32)   # each element once


SUM = """cuda_tile.module @kernels {
  entry @sum(%ap: tile<ptr<f32>>, %sp: tile<ptr<f32>>, %qp: tile<ptr<f32>>, %n: tile<i32>) {
    %tok = make_token : token
    %av = make_tensor_view %ap, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %sv = make_tensor_view %sp, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %apv = make_partition_view %av : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
    %spv = make_partition_view %sv : partition_view<tile=(1), tensor_view<?xf32, strides=[1]>>
    %a, %t1 = load_view_tko weak %apv[%bx] token = %tok : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<1024xf32>, token
    %s = reduce %a dim=0 identities=[0.000000e+00 : f32] : tile<1024xf32> -> tile<f32>
    (%l: tile<f32>, %r: tile<f32>) {
      %x = addf %l, %r : tile<f32>
      yield %x : tile<f32>
    }
    %s1 = reshape %s : tile<f32> -> tile<1xf32>
    %t2 = store_view_tko weak %s1, %spv[%bx] token = %tok : tile<1xf32>, partition_view<tile=(1), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    %i = exti %bx signed : tile<i32> -> tile<i64>
    %q = offset %qp, %i : tile<ptr<f32>>, tile<i64> -> tile<ptr<f32>>
    %t3 = store_ptr_tko weak %q, %s token=%tok : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}
"""


def test_a_scalar_is_stored_by_one_warp():
    """A reduction's scalar is held by all four warps of the CTA; only the first stores it
    (``emit_memory._in_owner_warps``), through a view and through a pointer: one request
    each a CTA, as NVIDIA's raw_memory stores its scalar, not four."""
    n, ctas = 2048, 2
    a = np.arange(n, dtype=np.float32) / 64
    s, q = np.zeros(n, np.float32), np.zeros(ctas, np.float32)
    result = run_with_traffic(SUM, "sum", (ctas, 1, 1), [a, s, q, np.int32(n)])
    sums = a.reshape(ctas, 1024).sum(axis=1)
    assert np.allclose(s[:ctas], sums) and np.allclose(q, sums) and not s[ctas:].any()
    assert result.traffic.stores.requests == 2 * ctas
