"""Type tags and attribute tags of the bytecode (numbers that never change)."""
from __future__ import annotations

import enum

from ..ir import types as T
from ..ir.version import V13_1, V13_2, V13_3, V13_4, Version


class TypeTag(enum.IntEnum):
    POINTER = 12
    TILE = 13
    TENSOR_VIEW = 14
    PARTITION_VIEW = 15
    FUNCTION = 16
    TOKEN = 17
    GATHER_SCATTER_VIEW = 20
    STRIDED_VIEW = 21


#: scalar type tag -> (type, first version)
_SCALARS: dict[int, tuple[T.ScalarType, Version]] = {
    0: (T.I1, V13_1), 1: (T.I8, V13_1), 2: (T.I16, V13_1), 3: (T.I32, V13_1), 4: (T.I64, V13_1),
    5: (T.F16, V13_1), 6: (T.BF16, V13_1), 7: (T.F32, V13_1), 8: (T.TF32, V13_1), 9: (T.F64, V13_1),
    10: (T.F8E4M3FN, V13_1), 11: (T.F8E5M2, V13_1), 18: (T.F8E8M0FNU, V13_2),
    19: (T.F4E2M1FN, V13_3), 22: (T.I4, V13_3), 130: (T.FNV8E5M3FNU, V13_4),
}
SCALAR_TYPE_BY_TAG = {tag: t for tag, (t, _) in _SCALARS.items()}
SCALAR_TYPE_SINCE = {tag: v for tag, (_, v) in _SCALARS.items()}
SCALAR_TAG_BY_TYPE = {t: tag for tag, (t, _) in _SCALARS.items()}

#: composite type tag -> first version
COMPOSITE_TYPE_TAGS: dict[int, Version] = {
    TypeTag.POINTER: V13_1, TypeTag.TILE: V13_1, TypeTag.TENSOR_VIEW: V13_1,
    TypeTag.PARTITION_VIEW: V13_1, TypeTag.FUNCTION: V13_1, TypeTag.TOKEN: V13_1,
    TypeTag.GATHER_SCATTER_VIEW: V13_3, TypeTag.STRIDED_VIEW: V13_3,
}


class AttrTag(enum.IntEnum):
    INTEGER = 1
    FLOAT = 2
    BOOL = 3
    TYPE = 4
    STRING = 5
    ARRAY = 6
    DENSE_ELEMENTS = 7
    DIV_BY = 8
    SAME_ELEMENTS = 9
    DICTIONARY = 10
    OPTIMIZATION_HINTS = 11
    BOUNDED = 12


class SectionId(enum.IntEnum):
    END = 0
    STRING = 1
    FUNCTION = 2
    DEBUG = 3
    CONSTANT = 4
    TYPE = 5
    GLOBAL = 6


MAGIC = b"\x7fTileIR\x00"

#: Header tag bit marking public-preview content.
PREVIEW_TAG_BIT = 1
