"""The Tile IR op registry: enums, opcodes and every op definition.

Importing this package registers every op and checks the registry against the
opcode table, so a missing or extra definition fails at import time.
"""
from __future__ import annotations

from . import ops_arith, ops_control, ops_core, ops_internal, ops_memory  # noqa: F401  (registers the ops)
from .opcodes import OPCODES
from .registry import OPS_BY_NAME, OPS_BY_OPCODE, OpDef
from .traits import FUNCTION_BODY, ImplicitTerminator, Terminator, check_traits


def _check_registry() -> None:
    missing = sorted(set(OPCODES) - set(OPS_BY_NAME) - {"entry"})
    extra = sorted(set(OPS_BY_NAME) - set(OPCODES))
    if missing or extra:
        raise RuntimeError(f"op registry and opcode table disagree: missing {missing}, extra {extra}")


def _check_traits() -> None:
    """Every op's trait set is consistent and names registered parents and terminators."""
    problems = []
    for name, d in sorted(OPS_BY_NAME.items()):
        problems += [f"{name}: {p}" for p in check_traits(d)]
        for t in d.traits:
            named = (t.parents if isinstance(t, Terminator)
                     else (t.name,) if isinstance(t, ImplicitTerminator) else ())
            problems += [f"{name}: unknown op '{n}'" for n in named
                         if n != FUNCTION_BODY and n not in OPS_BY_NAME]
    if problems:
        raise RuntimeError("inconsistent op traits: " + "; ".join(problems))


_check_registry()
_check_traits()

__all__ = ["OPS_BY_NAME", "OPS_BY_OPCODE", "OpDef"]
