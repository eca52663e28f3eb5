"""The Tile IR op registry: enums, opcodes and every op definition.

Importing this package registers every op and checks the registry against the
opcode table, so a missing or extra definition fails at import time.
"""
from __future__ import annotations

from . import ops_arith, ops_control, ops_core, ops_memory  # noqa: F401  (registers the ops)
from .opcodes import OPCODES
from .registry import OPS_BY_NAME, OPS_BY_OPCODE, OpDef


def _check_registry() -> None:
    missing = sorted(set(OPCODES) - set(OPS_BY_NAME) - {"entry"})
    extra = sorted(set(OPS_BY_NAME) - set(OPCODES))
    if missing or extra:
        raise RuntimeError(f"op registry and opcode table disagree: missing {missing}, extra {extra}")


_check_registry()

__all__ = ["OPS_BY_NAME", "OPS_BY_OPCODE", "OpDef"]
