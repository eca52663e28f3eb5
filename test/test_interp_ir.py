"""Interpreter tests on hand-built IR, for ops and attributes cuTile does not emit."""
from __future__ import annotations

from typing import Any, Sequence

import ml_dtypes
import numpy as np
import pytest

from tileiras.interp import InterpError, run
from tileiras.ir import types as T
from tileiras.ir.core import Block, Function, Global, Module, Region
from tileiras.ir.version import V13_4
from tileiras.tile import ops_arith as A
from tileiras.tile import ops_control as K
from tileiras.tile import ops_core as C
from tileiras.tile import ops_memory as M
from tileiras.tile.enums import (ComparisonOrdering, ComparisonPredicate, IntegerOverflow,
                                 MemoryOrderingSemantics,
                                 RoundingMode, Signedness)

WEAK = MemoryOrderingSemantics.WEAK


def tile(elem: T.Type, *shape: int) -> T.TileType:
    return T.TileType(elem, tuple(shape))


def ptr(elem: T.Type) -> T.TileType:
    return T.TileType(T.PointerType(elem), ())


class Builder:
    """Appends ops to one entry block."""

    def __init__(self, *arg_types: T.Type):
        self.block = Block(arg_types)
        self.args = self.block.args

    def op(self, cls: type, operands: Sequence[Any] = (), results: Sequence[T.Type] = (),
           segments: Any = None, **attrs: Any):
        op = cls(list(operands), attrs, list(results), segments=segments)
        self.block.append(op)
        return op.results[0] if len(op.results) == 1 else op.results

    def store(self, dst, value, mask=None):
        return self.op(M.StorePtrTkoOp, [dst, value] + ([mask] if mask is not None else []), [T.TOKEN],
                       segments=(1, 1, int(mask is not None), 0), memory_ordering_semantics=WEAK)

    def ptrs(self, base, n: int):
        """A tile of ``n`` consecutive pointers from the scalar pointer ``base``."""
        pt = base.type.element
        idx = self.op(C.IotaOp, [], [tile(T.I32, n)])
        b = self.op(C.BroadcastOp, [self.op(C.ReshapeOp, [base], [tile(pt, 1)])], [tile(pt, n)])
        return self.op(C.OffsetOp, [b, idx], [tile(pt, n)])

    def module(self, *globals_: Global) -> Module:
        self.op(K.ReturnOp)
        fn = Function("kernel", T.FunctionType(tuple(a.type for a in self.args), ()),
                      Region([self.block]), is_entry=True)
        return Module(V13_4, [fn], list(globals_))


def constant(b: Builder, t: T.TileType, values) -> Any:
    from tileiras.ir.attrs import DenseElementsAttr
    from tileiras.interp.values import dtype_of
    raw = np.asarray(values).astype(dtype_of(t)).tobytes()
    return b.op(C.ConstantOp, [], [t], value=DenseElementsAttr(t, raw))


def test_mulhii_high_bits():
    b = Builder(ptr(T.I32), ptr(T.I64))
    x32 = constant(b, tile(T.I32, 2), np.array([2**31, 0xFFFFFFFF], np.uint32))
    y32 = constant(b, tile(T.I32, 2), np.array([2, 0xFFFFFFFF], np.uint32))
    x64 = constant(b, tile(T.I64, 2), np.array([2**63, 2**64 - 1], np.uint64))
    y64 = constant(b, tile(T.I64, 2), np.array([4, 2**64 - 1], np.uint64))
    b.store(b.ptrs(b.args[0], 2), b.op(A.MulhiIOp, [x32, y32], [tile(T.I32, 2)]))
    b.store(b.ptrs(b.args[1], 2), b.op(A.MulhiIOp, [x64, y64], [tile(T.I64, 2)]))
    o32, o64 = np.zeros(2, np.uint32), np.zeros(2, np.uint64)
    run(b.module(), None, 1, [o32, o64])
    np.testing.assert_array_equal(o32, [1, 0xFFFFFFFE])
    np.testing.assert_array_equal(o64, [2, 2**64 - 2])


@pytest.mark.parametrize("signedness,rounding,expect", [
    (Signedness.SIGNED, RoundingMode.ZERO, [3, -3, -3, 3]),
    (Signedness.SIGNED, RoundingMode.NEGATIVE_INF, [3, -4, -4, 3]),
    (Signedness.SIGNED, RoundingMode.POSITIVE_INF, [4, -3, -3, 4]),
    (Signedness.UNSIGNED, RoundingMode.POSITIVE_INF, [4, 1431655762, 1, 1]),  # -10 = 2^32 - 10
])
def test_divi_rounding(signedness, rounding, expect):
    b = Builder(ptr(T.I32))
    x = constant(b, tile(T.I32, 4), np.array([10, -10, 10, -10], np.int32))
    y = constant(b, tile(T.I32, 4), np.array([3, 3, -3, -3], np.int32))
    b.store(b.ptrs(b.args[0], 4), b.op(A.DivIOp, [x, y], [tile(T.I32, 4)], signedness=signedness,
                                       rounding=rounding))
    out = np.zeros(4, np.int32)
    run(b.module(), None, 1, [out])
    np.testing.assert_array_equal(out, np.array(expect, np.int64).astype(np.int32))


def test_shift_by_width_or_more():
    b = Builder(ptr(T.I32))
    x = constant(b, tile(T.I32, 4), np.array([-16, -16, 1, 1], np.int32))
    n = constant(b, tile(T.I32, 4), np.array([2, 40, 31, 32], np.int32))
    t = tile(T.I32, 4)
    sr = b.op(A.ShRIOp, [x, n], [t], signedness=Signedness.SIGNED)
    ur = b.op(A.ShRIOp, [x, n], [t], signedness=Signedness.UNSIGNED)
    sl = b.op(A.ShLIOp, [x, n], [t])
    cat = b.op(C.CatOp, [b.op(C.CatOp, [sr, ur], [tile(T.I32, 8)], dim=0), sl], [tile(T.I32, 12)], dim=0)
    b.store(b.ptrs(b.args[0], 12), cat)
    out = np.zeros(12, np.int32)
    run(b.module(), None, 1, [out])
    np.testing.assert_array_equal(out[:4], [-4, -1, 0, 0])
    np.testing.assert_array_equal(out[4:8].view(np.uint32), [(2**32 - 16) >> 2, 0, 0, 0])
    np.testing.assert_array_equal(out[8:], [-64, 0, -2**31, 0])


def test_cmpf_ordered_and_unordered():
    b = Builder(ptr(T.I8))
    x = constant(b, tile(T.F32, 4), np.array([1.0, np.nan, 2.0, np.nan], np.float32))
    y = constant(b, tile(T.F32, 4), np.array([1.0, 1.0, 3.0, np.nan], np.float32))
    results = []
    for pred in (ComparisonPredicate.EQUAL, ComparisonPredicate.NOT_EQUAL, ComparisonPredicate.LESS_THAN):
        for order in (ComparisonOrdering.ORDERED, ComparisonOrdering.UNORDERED):
            c = b.op(A.CmpFOp, [x, y], [tile(T.I1, 4)], comparison_predicate=pred, comparison_ordering=order)
            results.append(b.op(C.ExtIOp, [c], [tile(T.I8, 4)], signedness=Signedness.UNSIGNED))
    acc = results[0]
    for k, r in enumerate(results[1:], start=2):
        acc = b.op(C.CatOp, [acc, r], [tile(T.I8, 4 * k)], dim=0)
    b.store(b.ptrs(b.args[0], 24), acc)
    out = np.zeros(24, np.int8)
    run(b.module(), None, 1, [out])
    np.testing.assert_array_equal(out.reshape(6, 4), [
        [1, 0, 0, 0], [1, 1, 0, 1],      # eq: ordered, unordered
        [0, 0, 1, 0], [0, 1, 1, 1],      # ne
        [0, 0, 1, 0], [0, 1, 1, 1],      # lt
    ])


def test_globals_are_memory_initialized_per_launch():
    g = Global("counter", tile(T.I32, 4), np.array([1, 2, 3, 4], np.int32).tobytes())
    b = Builder(ptr(T.I32))
    gp = b.op(C.GetGlobalOp, [], [ptr(T.I32)], name="counter")
    p = b.ptrs(gp, 4)
    v, _ = b.op(M.LoadPtrTkoOp, [p], [tile(T.I32, 4), T.TOKEN], segments=(1, 0, 0, 0),
                memory_ordering_semantics=WEAK)
    one = constant(b, tile(T.I32, 4), np.full(4, 10, np.int32))
    b.store(p, b.op(A.AddIOp, [v, one], [tile(T.I32, 4)]))
    v2, _ = b.op(M.LoadPtrTkoOp, [p], [tile(T.I32, 4), T.TOKEN], segments=(1, 0, 0, 0),
                 memory_ordering_semantics=WEAK)
    b.store(b.ptrs(b.args[0], 4), v2)
    module = b.module(g)
    out = np.zeros(4, np.int32)
    run(module, None, 3, [out])   # three blocks share the global: +10 each
    np.testing.assert_array_equal(out, [31, 32, 33, 34])
    run(module, None, 1, [out])   # a new launch starts from the initial value
    np.testing.assert_array_equal(out, [11, 12, 13, 14])


def test_masked_load_with_padding_and_ptr_int_roundtrip():
    b = Builder(ptr(T.F32), ptr(T.F32))
    as_int = b.op(C.PtrToIntOp, [b.args[0]], [tile(T.I64)])
    eight = constant(b, tile(T.I64), np.array(8, np.int64))
    back = b.op(C.IntToPtrOp, [b.op(A.AddIOp, [as_int, eight], [tile(T.I64)])], [ptr(T.F32)])  # +2 floats
    p = b.ptrs(back, 4)
    mask = constant(b, tile(T.I1, 4), np.array([1, 0, 1, 0], bool))
    pad = constant(b, tile(T.F32, 4), np.full(4, -9.5, np.float32))
    v, _ = b.op(M.LoadPtrTkoOp, [p, mask, pad], [tile(T.F32, 4), T.TOKEN], segments=(1, 1, 1, 0),
                memory_ordering_semantics=WEAK)
    b.store(b.ptrs(b.args[1], 4), v)
    x = np.arange(6, dtype=np.float32)   # elements 3 and 5 would be read... but are masked
    out = np.zeros(4, np.float32)
    run(b.module(), None, 1, [x, out])
    np.testing.assert_array_equal(out, [2.0, -9.5, 4.0, -9.5])


def test_unmasked_out_of_bounds_access_raises():
    b = Builder(ptr(T.F32))
    v, _ = b.op(M.LoadPtrTkoOp, [b.ptrs(b.args[0], 8)], [tile(T.F32, 8), T.TOKEN], segments=(1, 0, 0, 0),
                memory_ordering_semantics=WEAK)
    with pytest.raises(InterpError, match="outside every buffer"):
        run(b.module(), None, 1, [np.zeros(4, np.float32)])


@pytest.mark.parametrize("mode,expect", [(RoundingMode.ZERO, [1, 2, 0.25, 2.0**-127]),
                                         (RoundingMode.POSITIVE_INF, [1, 4, 0.5, 2.0**-127])])
def test_ftof_to_e8m0(mode, expect):
    b = Builder(ptr(T.F8E8M0FNU))
    x = constant(b, tile(T.F32, 4), np.array([1.0, 3.0, 0.3, 0.0], np.float32))
    b.store(b.ptrs(b.args[0], 4), b.op(C.FToFOp, [x], [tile(T.F8E8M0FNU, 4)], rounding_mode=mode))
    out = np.zeros(4, ml_dtypes.float8_e8m0fnu)
    run(b.module(), None, 1, [out])
    np.testing.assert_array_equal(out.astype(np.float64), expect)


def test_loop_with_break_and_alloca_scratch():
    """loop { i += 1; scratch[0] = i * i; if i == 5: break }, then copy scratch out."""
    b = Builder(ptr(T.I32))
    scratch = b.op(M.AllocaOp, [], [ptr(T.I32)], num_elem=4, alignment=16)
    zero = constant(b, tile(T.I32), np.array(0, np.int32))
    body = Block([tile(T.I32)])
    inner = Builder()
    inner.block = body
    i = body.args[0]
    one = constant(inner, tile(T.I32), np.array(1, np.int32))
    nxt = inner.op(A.AddIOp, [i, one], [tile(T.I32)])
    inner.store(scratch, inner.op(A.MulIOp, [nxt, nxt], [tile(T.I32)]))
    five = constant(inner, tile(T.I32), np.array(5, np.int32))
    done = inner.op(A.CmpIOp, [nxt, five], [tile(T.I1)], comparison_predicate=ComparisonPredicate.EQUAL,
                    signedness=Signedness.SIGNED)
    then_b, else_b = Block(), Block()
    then_b.append(K.BreakOp([nxt], {}, []))
    else_b.append(K.YieldOp([], {}, []))
    body.append(K.IfOp([done], {}, [], regions=[Region([then_b]), Region([else_b])]))
    body.append(K.ContinueOp([nxt], {}, []))
    loop = K.LoopOp([zero], {}, [tile(T.I32)], regions=[Region([body])])
    b.block.append(loop)
    v, _ = b.op(M.LoadPtrTkoOp, [scratch], [tile(T.I32), T.TOKEN], segments=(1, 0, 0, 0),
                memory_ordering_semantics=WEAK)
    out_p = b.ptrs(b.args[0], 2)
    pair = b.op(C.CatOp, [b.op(C.ReshapeOp, [loop.results[0]], [tile(T.I32, 1)]),
                          b.op(C.ReshapeOp, [v], [tile(T.I32, 1)])], [tile(T.I32, 2)], dim=0)
    b.store(out_p, pair)
    out = np.zeros(2, np.int32)
    run(b.module(), None, 1, [out])
    np.testing.assert_array_equal(out, [5, 25])


@pytest.mark.parametrize("flag,values,raises", [
    (IntegerOverflow.NONE, [2**31 - 1, 1], False),
    (IntegerOverflow.NO_SIGNED_WRAP, [2**31 - 1, 1], True),
    (IntegerOverflow.NO_UNSIGNED_WRAP, [2**31 - 1, 1], False),
    (IntegerOverflow.NO_UNSIGNED_WRAP, [-1, 1], True),
    (IntegerOverflow.NO_SIGNED_WRAP, [-1, 1], False),
])
def test_overflow_flags_in_strict_mode(flag, values, raises):
    b = Builder(ptr(T.I32))
    x = constant(b, tile(T.I32), np.array(values[0], np.int64).astype(np.int32))
    y = constant(b, tile(T.I32), np.array(values[1], np.int32))
    b.store(b.args[0], b.op(A.AddIOp, [x, y], [tile(T.I32)], overflow=flag))
    module = b.module()
    out = np.zeros(1, np.int32)
    run(module, None, 1, [out])      # default: wraps
    assert out[0] == np.int32(np.int64(values[0] + values[1]).astype(np.int32))
    if raises:
        with pytest.raises(InterpError, match="wrap violated"):
            run(module, None, 1, [out], strict=True)
    else:
        run(module, None, 1, [out], strict=True)
