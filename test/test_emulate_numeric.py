"""Exact rounding helpers of the PTX emulator, against rational arithmetic."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tileiras.emulate.numeric import Rounding, round_to, step, two_prod, two_sum

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def neighbours(value: Fraction, dtype) -> tuple[Fraction, Fraction]:
    """The representable values of dtype just below and above (or equal to) value."""
    with np.errstate(all="ignore"):
        guess = np.array([float(value)]).astype(dtype)
    lo = hi = guess
    while Fraction(float(lo[0])) > value:
        lo = step(lo, np.array([-1]))
    while Fraction(float(hi[0])) < value:
        hi = step(hi, np.array([1]))
    if Fraction(float(lo[0])) < value and Fraction(float(step(lo, np.array([1]))[0])) <= value:
        lo = step(lo, np.array([1]))
    return Fraction(float(lo[0])), Fraction(float(hi[0]))


@settings(max_examples=300, deadline=None)
@given(finite32, finite32, finite32, st.sampled_from(list(Rounding)[:4]), st.sampled_from(DTYPES))
def test_round_to_fma_is_correctly_rounded(a, b, c, mode, dtype):
    a64, b64, c64 = (np.array([v], np.float64) for v in (a, b, c))
    p, e = two_prod(a64, b64)
    s, t = two_sum(p, c64)
    hi, lo = two_sum(s, t + e)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if abs(exact) >= Fraction(float(ml_dtypes.finfo(dtype).max)):
        return
    with np.errstate(all="ignore"):
        got = round_to(hi, lo, dtype, mode)[0]
    below, above = neighbours(exact, dtype)
    g = Fraction(float(got))
    if mode is Rounding.RM:
        assert g == below
    elif mode is Rounding.RP:
        assert g == above
    elif mode is Rounding.RZ:
        assert g == (below if exact >= 0 else above)
    else:
        assert g in (below, above)
        assert abs(g - exact) <= min(abs(below - exact), abs(above - exact))


def test_step_crosses_zero_and_infinity():
    x = np.array([0.0, -0.0, np.inf, 1.0], np.float32)
    up = step(x, np.array([1, 1, -1, 1]))
    assert up[0] == np.float32(1e-45) and up[1] == np.float32(1e-45)
    assert up[2] == np.finfo(np.float32).max
    assert up[3] == np.nextafter(np.float32(1), np.float32(2))


def test_two_prod_is_exact_for_huge_operands():
    """The Dekker split overflows above ~2**996; the error term must still be exact."""
    a = np.array([1e308, 3e200, 2.0**1000, -1e300, 1.5, 1e308], dtype=np.float64)
    b = np.array([0.0, 1e100, 1.0 + 2.0**-40, -1e-5, 1 / 3, -0.0], dtype=np.float64)
    p, e = two_prod(a, b)
    assert np.all(np.isfinite(e))
    for x, y, pp, ee in zip(a, b, p, e):
        assert Fraction(x) * Fraction(y) == Fraction(pp) + Fraction(ee), (x, y)


def test_fma_with_huge_operand_and_zero_is_zero():
    from tileiras.emulate.ops.floating import exact_pair

    hi, lo = exact_pair("fma", [np.array([1e308]), np.array([0.0]), np.array([-0.0])])
    assert hi[0] == 0.0 and lo[0] == 0.0
    hi, lo = exact_pair("fma", [np.array([2.0**1000]), np.array([1.0 + 2.0**-52]), np.array([-(2.0**1000)])])
    assert hi[0] == 2.0**948 and lo[0] == 0.0


def test_fma_exact_zero_keeps_the_ieee_sign():
    """fma(+0, -0, -0) = -0 (both addends are -0); an exact cancellation is +0 in RN."""
    from tileiras.emulate.ops.floating import float_compute

    a, b, c = np.array([0.0, 0.0, 3.0], np.float32), np.array([-0.0, 0.0, 2.0], np.float32), \
        np.array([-0.0, -0.0, -6.0], np.float32)
    r = float_compute("fma", [a, b, c], np.dtype(np.float32), Rounding.RN, False)
    assert np.all(r == 0) and list(np.signbit(r)) == [True, False, False]
