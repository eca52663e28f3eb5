"""PTX scalar types: width, kind and the numpy dtype an instruction computes in.

Registers hold raw bits (``uint8/16/32/64`` arrays, ``bool`` for predicates); an
instruction reinterprets them through the dtype of its type suffix.  Packed types
(``f16x2``, ``bf16x2``, ``f32x2``, ``e4m3x2``, ...) and ``tf32`` compute on raw bits and
are unpacked by the instructions that use them.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import ml_dtypes
import numpy as np


class Kind(enum.Enum):
    BITS = "b"
    UNSIGNED = "u"
    SIGNED = "s"
    FLOAT = "f"
    PRED = "pred"
    PACKED = "packed"


@dataclass(frozen=True)
class PtxType:
    name: str
    bits: int
    kind: Kind
    dtype: np.dtype

    @property
    def is_signed(self) -> bool:
        return self.kind is Kind.SIGNED

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.BITS, Kind.UNSIGNED, Kind.SIGNED)

    @property
    def raw(self) -> np.dtype:
        return raw_dtype(self.bits)


def raw_dtype(bits: int) -> np.dtype:
    return RAW_DTYPES[bits]


RAW_DTYPES = {1: np.dtype(bool), 8: np.dtype(np.uint8), 16: np.dtype(np.uint16),
              32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
SIGNED_DTYPES = {8: np.dtype(np.int8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
                 64: np.dtype(np.int64)}

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)
E2M3 = np.dtype(ml_dtypes.float6_e2m3fn)
E3M2 = np.dtype(ml_dtypes.float6_e3m2fn)


def _make_types() -> dict[str, PtxType]:
    table: dict[str, PtxType] = {"pred": PtxType("pred", 1, Kind.PRED, np.dtype(bool))}
    for bits in (8, 16, 32, 64):
        table[f"b{bits}"] = PtxType(f"b{bits}", bits, Kind.BITS, RAW_DTYPES[bits])
        table[f"u{bits}"] = PtxType(f"u{bits}", bits, Kind.UNSIGNED, RAW_DTYPES[bits])
        table[f"s{bits}"] = PtxType(f"s{bits}", bits, Kind.SIGNED, SIGNED_DTYPES[bits])
    table["b128"] = PtxType("b128", 128, Kind.BITS, np.dtype(np.uint64))
    table["f16"] = PtxType("f16", 16, Kind.FLOAT, np.dtype(np.float16))
    table["bf16"] = PtxType("bf16", 16, Kind.FLOAT, BF16)
    table["f32"] = PtxType("f32", 32, Kind.FLOAT, np.dtype(np.float32))
    table["f64"] = PtxType("f64", 64, Kind.FLOAT, np.dtype(np.float64))
    packed = {"f16x2": 32, "bf16x2": 32, "f32x2": 64, "tf32": 32, "e4m3x2": 16, "e5m2x2": 16,
              "ue8m0x2": 16, "e2m1x2": 8, "e2m3x2": 16, "e3m2x2": 16, "e4m3x4": 32,
              "e5m2x4": 32, "e2m1x4": 16, "e4m3": 8, "e5m2": 8, "e2m1": 4, "e2m3": 8,
              "e3m2": 8, "ue8m0": 8, "s8x4": 32, "u8x4": 32, "s16x2": 32, "u16x2": 32,
              "ue5m3x2": 16, "ue5m3": 8}
    for name, bits in packed.items():
        table[name] = PtxType(name, bits, Kind.PACKED, RAW_DTYPES.get(bits, np.dtype(np.uint8)))
    return table


TYPES = _make_types()

# the element dtype of each small float format, for cvt and mma
FORMAT_DTYPES = {"f16": np.dtype(np.float16), "bf16": BF16, "e4m3": E4M3, "e5m2": E5M2,
                 "ue8m0": E8M0, "e2m1": E2M1, "e2m3": E2M3, "e3m2": E3M2, "f32": np.dtype(np.float32),
                 "tf32": np.dtype(np.float32), "f64": np.dtype(np.float64)}


def ptx_type(name: str) -> PtxType:
    try:
        return TYPES[name]
    except KeyError:
        raise KeyError(f"unknown PTX type '.{name}'") from None


def is_type_name(name: str) -> bool:
    return name in TYPES


def find_types(parts: list[str]) -> list[PtxType]:
    """The type suffixes of an opcode, in order (``cvt.rn.f32.s32`` -> [f32, s32])."""
    return [TYPES[p] for p in parts if p in TYPES]
