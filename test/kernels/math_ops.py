"""Held-out style math kernels: every math op Tile IR has, one op per entry, on f32, f16,
bf16 and f64, with the flush-to-zero and rounding variants cuTile can write, exported with
plain arrays and with arrays aligned as a framework's (16-byte base, 16-divisible strides
and shapes).

Kept apart from ``ALL_CASES`` (like ``tma.py``): ``test_math_ops.py`` runs our PTX and
NVIDIA's on them in the emulator, and ``bench/math_cost.py`` counts their instructions.
One module per (dtype, alignment) holds one entry per op (``OP`` is a constant, so each
entry is that op alone), so that a module's PTX is the cost of the ops and a wrong bit is
traced to its op.
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]
TILE = 128
RM = ct.RoundingMode

#: the ops of ``math_op`` for every dtype, in ``OP`` order
PLAIN_OPS = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "sqrt", "rsqrt",
             "floor", "ceil", "abs", "pow", "atan2", "mod", "div", "maximum_nan", "minimum")
#: then its f32 ops with flush_to_zero and the rounding modes
FLAGGED_OPS = ("exp2_ftz", "rsqrt_ftz", "sqrt_ftz", "sqrt_rz", "sqrt_rp_ftz", "exp_approx", "tanh_approx",
               "div_approx", "div_approx_ftz", "div_full", "div_rz_ftz", "div_ftz", "add_rm", "mul_rp_ftz",
               "sub_rz", "max_ftz")
OPS = PLAIN_OPS + FLAGGED_OPS


@ct.kernel
def math_op(x, y, out, OP: ConstInt):
    """out = OPS[OP](x[, y]); the branches fold away (``OP`` is a constant)."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(TILE,))
    b = ct.load(y, index=(i,), shape=(TILE,))
    if OP == 0:
        r = ct.exp(a)
    elif OP == 1:
        r = ct.exp2(a)
    elif OP == 2:
        r = ct.log(a)
    elif OP == 3:
        r = ct.log2(a)
    elif OP == 4:
        r = ct.sin(a)
    elif OP == 5:
        r = ct.cos(a)
    elif OP == 6:
        r = ct.tan(a)
    elif OP == 7:
        r = ct.sinh(a)
    elif OP == 8:
        r = ct.cosh(a)
    elif OP == 9:
        r = ct.tanh(a)
    elif OP == 10:
        r = ct.sqrt(a)
    elif OP == 11:
        r = ct.rsqrt(a)
    elif OP == 12:
        r = ct.floor(a)
    elif OP == 13:
        r = ct.ceil(a)
    elif OP == 14:
        r = abs(a)
    elif OP == 15:
        r = ct.pow(a, b)
    elif OP == 16:
        r = ct.atan2(a, b)
    elif OP == 17:
        r = ct.mod(a, b)
    elif OP == 18:
        r = a / b
    elif OP == 19:
        r = ct.maximum(a, b, propagate_nan=True)
    elif OP == 20:
        r = ct.minimum(a, b)
    elif OP == 21:
        r = ct.exp2(a, flush_to_zero=True)
    elif OP == 22:
        r = ct.rsqrt(a, flush_to_zero=True)
    elif OP == 23:
        r = ct.sqrt(a, flush_to_zero=True)
    elif OP == 24:
        r = ct.sqrt(a, rounding_mode=RM.RZ)
    elif OP == 25:
        r = ct.sqrt(a, rounding_mode=RM.RP, flush_to_zero=True)
    elif OP == 26:
        r = ct.exp(a, rounding_mode=RM.APPROX)
    elif OP == 27:
        r = ct.tanh(a, rounding_mode=RM.APPROX)
    elif OP == 28:
        r = ct.truediv(a, b, rounding_mode=RM.APPROX)
    elif OP == 29:
        r = ct.truediv(a, b, rounding_mode=RM.APPROX, flush_to_zero=True)
    elif OP == 30:
        r = ct.truediv(a, b, rounding_mode=RM.FULL)
    elif OP == 31:
        r = ct.truediv(a, b, rounding_mode=RM.RZ, flush_to_zero=True)
    elif OP == 32:
        r = ct.truediv(a, b, flush_to_zero=True)
    elif OP == 33:
        r = ct.add(a, b, rounding_mode=RM.RM)
    elif OP == 34:
        r = ct.mul(a, b, rounding_mode=RM.RP, flush_to_zero=True)
    elif OP == 35:
        r = ct.sub(a, b, rounding_mode=RM.RZ)
    else:
        r = ct.maximum(a, b, flush_to_zero=True)
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def math_powi(x, n, out):
    """x ** n with an integer tile exponent: Tile IR's ``fpowi``."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(TILE,))
    k = ct.load(n, index=(i,), shape=(TILE,))
    ct.store(out, index=(i,), tile=a ** k)


def aligned(dtype: Any) -> Any:
    """A 1-d array as cuTile specializes a framework's tensor."""
    return arr(dtype, 1, base_addr_divisible_by=16, shape_divisible_by=16)


DTYPES = {"f32": ct.float32, "f16": ct.float16, "bf16": ct.bfloat16, "f64": ct.float64}
LAYOUTS = {"plain": lambda d: arr(d), "aligned": aligned}


def cases() -> tuple[KernelCase, ...]:
    out = []
    for layout, array in LAYOUTS.items():
        for tname, dtype in DTYPES.items():
            a = array(dtype)
            out.append(KernelCase(f"math_ops_{tname}_{layout}", math_op,
                                  [[a, a, a, k] for k in range(len(PLAIN_OPS))]))
            out.append(KernelCase(f"math_powi_{tname}_{layout}", math_powi, [[a, array(ct.int32), a]]))
        f32 = array(ct.float32)
        out.append(KernelCase(f"math_flagged_f32_{layout}", math_op,
                              [[f32, f32, f32, k] for k in range(len(PLAIN_OPS), len(OPS))]))
    return tuple(out)


CASES = cases()
ARCHS = ("sm_80", "sm_90")


def op_names(case: KernelCase) -> list[str]:
    """The op of each entry of ``case``, in entry order."""
    if case.kernel is math_op:
        return [OPS[params[-1]] for params in case.params]
    return ["powi"]
