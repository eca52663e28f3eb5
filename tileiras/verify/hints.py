"""Optimization hint checks, off by default as in tileiras (which accepts any hint
silently); cuda-tile-opt's ``-Wunsupported-hints`` turns them into warnings and
``-Werr-hints`` makes a bad hint an error (``verify_module(..., hints="warn"|"error")``).

Per architecture entry: the key must be a known architecture, every hint must be one
the op takes (entry: CGA size, worker warps, occupancy; loads and stores: latency,
and allow_tma on view loads/stores) and its value in range.
"""
from __future__ import annotations

from typing import Optional

from ..ir import attrs as A
from ..ir.core import Function, Operation
from ..tile.registry import OPS_BY_NAME, AttrKind
from .context import Context, verifies
from .diagnostic import Severity

#: Architecture keys a hint dictionary may use (tileiras 13.5's --gpu-name list).
KNOWN_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110",
               "sm_120", "sm_121")
ENTRY_HINTS = ("num_cta_in_cga", "num_worker_warps_per_cta", "occupancy")
_SINGLE_CTA_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89")
_FAILED = "Optimization hints verification failed"


def _int(value: A.Attribute) -> Optional[int]:
    if isinstance(value, A.IntegerAttr) and not isinstance(value, A.BoolAttr):
        width = getattr(value.type, "bitwidth", 64)
        v = value.value
        return v - (1 << width) if v >> (width - 1) & 1 and width > 1 else v
    return None


def _power_of_two_at_most(n: Optional[int], limit: int) -> bool:
    return n is not None and 0 < n <= limit and not n & (n - 1)


def _value_problem(arch: str, key: str, value: A.Attribute) -> str:
    n = _int(value)
    where = f"{arch}.{key}"
    if key == "allow_tma":
        return "" if isinstance(value, A.BoolAttr) else f"boolean value expected for {where}"
    if n is None:
        return f"integer value expected for {where}"
    if key == "num_cta_in_cga":
        if arch.startswith(_SINGLE_CTA_ARCHS) and n != 1:
            return f"expected 1 for {where}"
        return "" if _power_of_two_at_most(n, 16) else f"expected power-of-two ≤ 16 for {where}"
    if key == "num_worker_warps_per_cta":
        return "" if _power_of_two_at_most(n, 32) else f"expected power-of-two ≤ 32 for {where}"
    if key == "latency":
        return "" if 1 <= n <= 10 else f"integer value in the range [1, 10] is expected for {where}"
    if key == "occupancy":
        return "" if 1 <= n <= 32 else f"integer value in the range [1, 32] is expected for {where}"
    return f"unknown param {key} for {arch}"


def _entry_problems(arch: str, hints: A.DictAttr, allowed: tuple[str, ...]) -> list[str]:
    if arch not in KNOWN_ARCHS:
        return [f"unknown hint key {arch}"]
    out = []
    for key, value in hints.entries:
        if allowed and key not in allowed:
            out.append(f"{key} is not known hint for current Operation")
            continue
        problem = _value_problem(arch, key, value)
        if problem:
            out.append(problem)
    return out


def check_hints(ctx: Context, loc: object, hints: Optional[A.OptimizationHintsAttr],
                allowed: tuple[str, ...]) -> None:
    if ctx.hints is None or hints is None:
        return
    for arch, entry in hints.entries:
        problems = _entry_problems(arch, entry, allowed)
        for p in problems:
            ctx.emit(loc, p, Severity.WARNING)
        if problems and ctx.hints == "error":
            ctx.emit(loc, _FAILED)
            return


def check_function_hints(ctx: Context, fn: Function) -> None:
    check_hints(ctx, fn.loc, fn.hints, ENTRY_HINTS if fn.is_entry else ())


def _hint_keys(op: Operation) -> tuple[str, ...]:
    """The hints the op's declaration takes (``Attr.hint_keys`` of its hints attribute)."""
    return next((a.hint_keys for a in op.definition.attrs if a.kind is AttrKind.HINTS), ())


@verifies(*(d.cls for _, d in sorted(OPS_BY_NAME.items()) if any(a.hint_keys for a in d.attrs)))
def check_op_hints(ctx: Context, op: Operation) -> None:
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, A.OptimizationHintsAttr):
        check_hints(ctx, op.loc, hints, _hint_keys(op))
