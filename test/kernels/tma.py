"""Kernels that NVIDIA's tileiras compiles to TMA on sm_90 when their arrays are aligned as a
framework's are (16-byte base, strides and shapes divisible by 16): tiles of every rank
1-5 (centred on their row maxima) and element width, each padding, and a few kernels with shared-memory swizzles (mma
operands) and bulk stores.  ``test_tensormap.py`` runs NVIDIA's ``.nv.host`` callback on
them; ``test_emulate_tma.py`` runs NVIDIA's PTX for them in the emulator."""
from __future__ import annotations

from typing import Any

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]


def aligned(dtype: Any, ndim: int, index_dtype: Any = ct.int32) -> Any:
    """An array as cuTile specializes a framework's tensor: C-contiguous, 16-divisible."""
    return arr(dtype, ndim, index_dtype=index_dtype, base_addr_divisible_by=16,
               stride_divisible_by=[16] * (ndim - 1) + [1], shape_divisible_by=16)


def centre(t: Any) -> Any:
    """``t`` minus its maximum along the last axis: a use that goes through shared memory,
    which is when NVIDIA's tool loads and stores the tile with TMA (a bare copy it does not)."""
    return t - ct.max(t, axis=-1, keepdims=True)


@ct.kernel
def centre_1d(x, y, T: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=centre(ct.load(x, index=(i,), shape=(T,))))


@ct.kernel
def centre_2d(x, y, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i, j), tile=centre(t))


@ct.kernel
def centre_2d_nan(x, y, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.NAN)
    ct.store(y, index=(i, 0), tile=ct.where(t == t, t - ct.max(t, axis=0, keepdims=True), -1.0))


@ct.kernel
def centre_3d(x, y, TA: ConstInt, TB: ConstInt, TC: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i, 0, 0), tile=centre(ct.load(x, index=(i, 0, 0), shape=(TA, TB, TC))))


@ct.kernel
def centre_4d(x, y):
    i = ct.bid(0)
    ct.store(y, index=(i, 0, 0, 0), tile=centre(ct.load(x, index=(i, 0, 0, 0), shape=(2, 2, 4, 16))))


@ct.kernel
def centre_5d(x, y):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0, 0, 0, 0), shape=(1, 2, 2, 4, 16))
    ct.store(y, index=(i, 0, 0, 0, 0), tile=centre(t))


@ct.kernel
def row_sum(x, out, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(i,), tile=ct.sum(ct.astype(t, ct.float32), axis=1))


@ct.kernel
def matmul(a, bt, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """``c = a @ bt.T``: both operands K-major, as wgmma reads them without transposing."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
        ta = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(bt, index=(j, k), shape=(TN, TK), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, ct.transpose(tb), acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def centre_2d_no_tma(x, y, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO, allow_tma=False)
    ct.store(y, index=(i, 0), tile=centre(t))


@ct.kernel
def scale_2d(x, y, TM: ConstInt, TN: ConstInt):
    """Element-wise only: NVIDIA's tool loads such tiles directly, not with TMA."""
    i = ct.bid(0)
    ct.store(y, index=(i, 0), tile=ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO) * 2)


@ct.kernel
def row_sum_loop(x, out, TM: ConstInt, TN: ConstInt):
    """Row sums over column tiles: one TMA load a trip, so its mbarrier's phase alternates."""
    i = ct.bid(0)
    acc = ct.full((TM,), 0.0, dtype=ct.float32)
    for j in range(ct.num_tiles(x, axis=1, shape=(TM, TN))):
        t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.sum(ct.astype(t, ct.float32), axis=1)
    ct.store(out, index=(i,), tile=acc)


@ct.kernel
def centre_rows_loop(x, y, TM: ConstInt, TN: ConstInt):
    """Column tiles centred on their row maxima and stored: one TMA store a trip, so the
    staging buffer is written again once the previous trip's copy has read it."""
    i = ct.bid(0)
    for j in range(ct.num_tiles(x, axis=1, shape=(TM, TN))):
        t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(i, j), tile=centre(t))


@ct.kernel
def centre_repeated(x, y, TM: ConstInt, TN: ConstInt, REPEAT: ConstInt):
    """One centred tile stored ``REPEAT`` times along a row: a loop whose only shared-memory
    traffic is the store's, so its staging buffer is reused with nothing else in between."""
    i = ct.bid(0)
    t = centre(ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO))
    for j in range(REPEAT):
        ct.store(y, index=(i, j), tile=t)


@ct.kernel
def centre_then_reload(x, y, z, TM: ConstInt, TN: ConstInt):
    """Stores a centred tile, then loads it back (ordered after the store by its token)."""
    i = ct.bid(0)
    ct.store(y, index=(i, 0), tile=centre(ct.load(x, index=(i, 0), shape=(TM, TN))))
    ct.store(z, index=(i, 0), tile=ct.load(y, index=(i, 0), shape=(TM, TN)) * 2)


@ct.kernel
def centre_in_place(x, TM: ConstInt, TN: ConstInt):
    """Loads and stores the same view: one tensor map serves both."""
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(x, index=(i, j), tile=centre(t))


@ct.kernel
def centre_2d_no_tma_store(x, y, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i, 0), tile=centre(t), allow_tma=False)


@ct.kernel
def rescale_loop(x, y, T: ConstInt, TRIPS: ConstInt):
    """A row carried through a loop that reduces it every trip (while_break_continue's
    shape): it reaches shared memory through the loop, so it is a TMA load as NVIDIA's."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    for _ in range(TRIPS):
        t = t - ct.max(t) * 0.5
    ct.store(y, index=(i,), tile=t)


F16, BF16, F32, F64 = ct.float16, ct.bfloat16, ct.float32, ct.float64
I8, I16, I32, I64, U8 = ct.int8, ct.int16, ct.int32, ct.int64, ct.uint8


def centred(name: str, kernel: Any, dtype: Any, ndim: int, *consts: int, index: Any = ct.int32) -> KernelCase:
    return KernelCase(name, kernel, [[aligned(dtype, ndim, index), aligned(dtype, ndim, index), *consts]])


CASES = (
    centred("tma_centre_1d_f32", centre_1d, F32, 1, 128),
    centred("tma_centre_1d_u8", centre_1d, U8, 1, 256),
    centred("tma_centre_2d_f32", centre_2d, F32, 2, 16, 64),
    centred("tma_centre_2d_f16", centre_2d, F16, 2, 32, 64),
    centred("tma_centre_2d_bf16", centre_2d, BF16, 2, 16, 128),
    centred("tma_centre_2d_f64", centre_2d, F64, 2, 8, 32),
    centred("tma_centre_2d_i8", centre_2d, I8, 2, 16, 64),
    centred("tma_centre_2d_i16", centre_2d, I16, 2, 16, 64),
    centred("tma_centre_2d_i32", centre_2d, I32, 2, 16, 32),
    centred("tma_centre_2d_i64", centre_2d, I64, 2, 8, 16),
    centred("tma_centre_2d_i64_index", centre_2d, F32, 2, 16, 32, index=ct.int64),
    centred("tma_centre_2d_nan_f32", centre_2d_nan, F32, 2, 16, 64),
    centred("tma_centre_2d_nan_f16", centre_2d_nan, F16, 2, 16, 64),
    centred("tma_centre_3d_f32", centre_3d, F32, 3, 2, 8, 32),
    centred("tma_centre_4d_f16", centre_4d, F16, 4),
    centred("tma_centre_5d_f32", centre_5d, F32, 5),
    KernelCase("tma_row_sum_f16", row_sum, [[aligned(F16, 2), aligned(F32, 1), 16, 256]]),
    KernelCase("tma_matmul_f16", matmul, [[aligned(F16, 2), aligned(F16, 2), aligned(F32, 2), 64, 64, 32]]),
    KernelCase("tma_matmul_bf16_k64", matmul,
               [[aligned(BF16, 2), aligned(BF16, 2), aligned(BF16, 2), 64, 64, 64]]),
)

#: Cases for our own TMA code (test_tma_codegen.py): tiles wider than a 256-element box,
#: a load in a loop, a load whose hint refuses TMA,
#: an element-wise kernel (direct loads); stores in a loop, a store of 8-byte rows (too
#: narrow for TMA), a view loaded and stored, a store whose hint refuses TMA.
OWN_CASES = (
    centred("tma_centre_1d_f32_wide", centre_1d, F32, 1, 1024),
    centred("tma_centre_2d_f16_wide", centre_2d, F16, 2, 4, 512),
    centred("tma_centre_2d_no_tma", centre_2d_no_tma, F32, 2, 16, 64),
    centred("tma_scale_2d_f32", scale_2d, F32, 2, 16, 64),
    centred("tma_rescale_loop_f32", rescale_loop, F32, 1, 64, 3),
    KernelCase("tma_row_sum_loop_f32", row_sum_loop, [[aligned(F32, 2), aligned(F32, 1), 16, 32]]),
    KernelCase("tma_row_sum_loop_bf16", row_sum_loop, [[aligned(BF16, 2), aligned(F32, 1), 8, 64]]),
    KernelCase("tma_row_sum_narrow_f32", row_sum, [[aligned(F32, 2), aligned(F32, 1), 2, 64]]),
    centred("tma_centre_rows_loop_f32", centre_rows_loop, F32, 2, 16, 32),
    centred("tma_centre_rows_loop_f16", centre_rows_loop, F16, 2, 8, 64),
    KernelCase("tma_centre_repeated_f32", centre_repeated, [[aligned(F32, 2), aligned(F32, 2), 16, 32, 3]]),
    KernelCase("tma_centre_then_reload_f32", centre_then_reload,
               [[aligned(F32, 2), aligned(F32, 2), aligned(F32, 2), 16, 32]]),
    KernelCase("tma_centre_in_place_f32", centre_in_place, [[aligned(F32, 2), 16, 32]]),
    centred("tma_centre_2d_no_tma_store", centre_2d_no_tma_store, F32, 2, 16, 64),
)
