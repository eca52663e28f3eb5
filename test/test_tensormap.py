"""The tensor-map layout (``tileiras.codegen.tensormap``) against NVIDIA's own encoder.

NVIDIA's tileiras compiles our TMA kernels (``test/kernels/tma.py``) for sm_90; the
``ON_ARGUMENTS_CHANGE`` callback of its ``.nv.host`` object runs here on argument buffers of
random shapes, strides and addresses, and every map it writes must equal ``encode`` of the
arguments byte for byte.  Without NVIDIA's tool the recorded maps below are the evidence."""
from __future__ import annotations


import numpy as np
import pytest

from kernels import tma as tma_kernels
from tileiras.codegen.tensormap import (ElementType, Swizzle, TensorMap, TensorMapError, decode,
                                        encode)
from tileiras.emulate.nvhost import is_runnable_here

import _tma

# Maps NVIDIA's callback wrote (tileiras 13.5.37, sm_90), with the arguments they came from.
RECORDED = [
    # 5-D f32 (16, 32, 48, 64, 80), box (1, 2, 2, 4, 16): strides in the 4 u32 from 0x0c
    ("00563412007f0000c2032400140000000005000000f0000000001e00000000004f0000003f0000002f000000"
     "1f0000000f0000000000000f030101",
     TensorMap(0x7F0012345600, ElementType.F32, (80, 64, 48, 32, 16),
               (320, 20480, 983040, 31457280), (16, 4, 2, 2, 1))),
    # 2-D f16 (144, 160) matmul B operand, box (64, 32), 128-byte swizzle
    ("00563413007f00001263040014000000000000000000000000000000000000009f0000008f000000000000"
     "0000000000000000000000003f1f",
     TensorMap(0x7F0013345600, ElementType.F16, (160, 144), (320,), (64, 32), Swizzle.B128)),
    # 2-D f64 (144, 160), box (16, 8): spans 180 KiB, so bit 21 of the word at 0x08 is set
    ("00563413007f00009204240050000000000000000000000000000000000000009f0000008f000000000000"
     "0000000000000000000000000f07",
     TensorMap(0x7F0013345600, ElementType.F64, (160, 144), (1280,), (16, 8))),
]


@pytest.mark.parametrize("raw,expected", RECORDED)
def test_recorded_maps(raw: str, expected: TensorMap) -> None:
    data = bytes.fromhex(raw.ljust(256, "0"))
    assert encode(expected) == data
    assert decode(data) == expected


def test_decode_refuses_what_the_layout_does_not_cover() -> None:
    good = encode(TensorMap(0x1000, ElementType.F32, (64, 32), (256,), (32, 8)))
    for offset, value in ((0x09, 0x08), (0x3C, 1), (0x40, 1), (0x34, 1), (0x08, 0x03)):
        bad = bytearray(good)
        bad[offset] |= value
        with pytest.raises(TensorMapError):
            decode(bytes(bad))
    with pytest.raises(TensorMapError):
        encode(TensorMap(0x1008, ElementType.F32, (64,), (), (32,)))
    with pytest.raises(TensorMapError):
        encode(TensorMap(0x1000, ElementType.F32, (64, 2), (100,), (32, 2)))


def test_large_bit_is_the_span() -> None:
    def word(dims: tuple, strides: tuple) -> int:
        return int.from_bytes(encode(TensorMap(0, ElementType.U8, dims, strides, (1,) * len(dims)))[8:12], "little")
    assert not word((1 << 17 - 4,), ()) >> 21 & 1 and not word((16, 16), (16,)) >> 21 & 1
    assert word((1 << 17,), ()) >> 21 & 1
    assert word((16, 8192), (16,)) >> 21 & 1 and not word((15, 8192), (16,)) >> 21 & 1


TYPES = {"float16": ElementType.F16, "bfloat16": ElementType.BF16, "float32": ElementType.F32,
         "float64": ElementType.F64, "int8": ElementType.U8, "uint8": ElementType.U8,
         "int16": ElementType.U16, "int32": ElementType.U32, "int64": ElementType.U64}


@pytest.fixture(scope="session")
def built(real_tileiras: str) -> dict:
    if not is_runnable_here():
        pytest.skip("NVIDIA's .nv.host is x86-64 code")
    return {}


@pytest.mark.slow
@pytest.mark.parametrize("case", tma_kernels.CASES, ids=lambda c: c.name)
def test_nvidia_callback_equals_encode(case, built: dict, real_tileiras: str) -> None:
    """Every map NVIDIA's callback fills equals ``encode`` of the arguments it was given,
    the compiler's choices (box, swizzle) read from the first run."""
    _, ptx, host = _tma.build_with_nvidia(case, real_tileiras)
    if "cp.async.bulk.tensor" not in ptx:
        pytest.skip(f"NVIDIA's tileiras does not use TMA for {case.name}")
    rng = np.random.default_rng(15)
    choices: dict[int, TensorMap] = {}
    for _ in range(12):
        arrays = _tma.random_arrays(case, rng, {1: 200, 2: 200})
        values = [v for a in arrays for v in _tma.array_values(*a[:3])]
        maps = _tma.run_callback(ptx, host, values)
        assert maps
        by_address = {a[0]: a for a in arrays}
        for slot, raw in enumerate(maps):
            got = decode(raw)
            address, shape, strides, dtype = by_address[got.address]
            esize = np.dtype(_tma.numpy_dtype_name(dtype)).itemsize
            first = choices.setdefault(slot, got)
            want = TensorMap(address, TYPES[dtype], tuple(reversed(shape)),
                             tuple(s * esize for s in reversed(strides[:-1])), first.box, first.swizzle)
            assert raw == encode(want), (slot, got, want)
