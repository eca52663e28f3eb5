"""Constant data as every stage reads it (interpreter, codegen, printer)."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("data, count, expected", [
    (bytes([0b1101]), 4, [1, 0, 1, 1]),                    # packed, lowest index in the lowest bit
    (bytes([0xFF]), 16, [1] * 16),                         # one all-ones byte: a splat
    (bytes([0x00]), 3, [0, 0, 0]),
    (bytes([0b10, 0b1]), 9, [0, 1, 0, 0, 0, 0, 0, 0, 1]),  # two packed bytes
    (bytes([1, 0] * 8), 16, [1, 0] * 8),                   # one byte an element
])
def test_i1_dense_is_read_alike_by_every_stage(data, count, expected):
    from tileiras.codegen.emit_shape import decode_elements
    from tileiras.interp.values import decode_dense
    from tileiras.ir import attrs as A
    from tileiras.ir import types as T
    from tileiras.text.attributes import dense_elements

    t = T.TileType(T.ScalarType("i1"), (count,))
    attr = A.DenseElementsAttr(t, data)
    assert A.i1_elements(data, count) == expected
    assert decode_dense(attr, t).astype(int).tolist() == expected
    assert decode_elements(attr, t) == expected
    assert dense_elements(attr) == expected
