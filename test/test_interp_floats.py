"""Property tests of the interpreter's exact float rounding against rational arithmetic."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tileiras.interp import floats as F
from tileiras.interp.floatarith import float_op
from tileiras.tile.enums import RoundingMode

MODES = [RoundingMode.NEAREST_EVEN, RoundingMode.ZERO, RoundingMode.POSITIVE_INF, RoundingMode.NEGATIVE_INF]
f32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


def reference(value: Fraction, fmt: str, mode: RoundingMode) -> float:
    if value == 0:
        return 0.0
    return F.round_fraction(value, F.FORMATS[fmt], mode)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64), st.sampled_from(MODES),
       st.sampled_from(["f16", "bf16", "f32", "tf32", "f8E4M3FN", "f8E5M2"]))
def test_round_f64_matches_rational_rounding(x, mode, fmt):
    got = float(F.round_f64(np.array([x]), F.FORMATS[fmt], mode)[0])
    want = reference(Fraction(x), fmt, mode)
    if F.FORMATS[fmt].saturating and math.isinf(want):
        want = math.copysign(F.FORMATS[fmt].max_finite, want)
    assert got == want or (got == 0 and want == 0)


@settings(max_examples=300, deadline=None)
@given(f32s, f32s, f32s, st.sampled_from(MODES),
       st.sampled_from(["add", "sub", "mul", "div", "fma"]))
def test_f32_arithmetic_is_rounded_once(a, b, c, mode, kind):
    x, y, z = (np.array([v], np.float32) for v in (a, b, c))
    if kind == "div" and b == 0:
        return
    args = [x, y, z] if kind == "fma" else [x, y]
    got = float(float_op(kind, args, "f32", mode)[0])
    fa, fb, fc = Fraction(float(x[0])), Fraction(float(y[0])), Fraction(float(z[0]))
    exact = {"add": fa + fb, "sub": fa - fb, "mul": fa * fb, "div": fa / fb if fb else 0,
             "fma": fa * fb + fc}[kind]
    assert got == reference(exact, "f32", mode)


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0, allow_nan=False, allow_infinity=False, width=32), st.sampled_from(MODES))
def test_f32_sqrt_directed_rounding(a, mode):
    got = float(float_op("sqrt", [np.array([a], np.float32)], "f32", mode)[0])
    if a == 0:
        assert got == 0
        return
    exact = Fraction(float(np.float32(a)))
    g = Fraction(got)
    up = Fraction(float(np.nextafter(np.float32(got), np.float32(np.inf))))
    down = Fraction(float(np.nextafter(np.float32(got), np.float32(0))))
    if mode is RoundingMode.POSITIVE_INF:
        assert g * g >= exact and down * down < exact
    elif mode in (RoundingMode.ZERO, RoundingMode.NEGATIVE_INF):
        assert g * g <= exact and up * up > exact
    else:
        assert abs(g * g - exact) <= abs(up * up - exact) and abs(g * g - exact) <= abs(down * down - exact)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64),
       st.floats(allow_nan=False, allow_infinity=False, width=64), st.sampled_from(MODES[1:]))
def test_f64_directed_rounding_uses_exact_rationals(a, b, mode):
    got = float(float_op("add", [np.array([a]), np.array([b])], "f64", mode)[0])
    exact = Fraction(a) + Fraction(b)
    if exact == 0:
        assert got == 0
        return
    assert got == F.round_fraction(exact, F.FORMATS["f64"], mode)
