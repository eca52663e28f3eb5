"""Verification state and the per-op-class rule registry.

A rule is a function ``rule(ctx, op)`` registered with ``@verifies(OpClass, ...)``;
it reports problems through ``ctx`` and returns nothing.  Rules for one class run
in registration order (family modules are imported in a fixed order).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Function, Module, Operation
from ..ir.debug import DebugAttr
from ..record import field, record
from .diagnostic import Diagnostic, Severity

Rule = Callable[["Context", Operation], None]

#: Op class -> rules, filled by ``@verifies`` when the family modules are imported.
RULES: dict[type, list[Rule]] = {}


def verifies(*op_classes: type) -> Callable[[Rule], Rule]:
    """Register ``rule`` for every op of the given classes."""

    def register(rule: Rule) -> Rule:
        for cls in op_classes:
            RULES.setdefault(cls, []).append(rule)
        return rule

    return register


@record
class Context:
    module: Module
    gpu_name: Optional[str] = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    function: Optional[Function] = None
    #: Optimization hint checking: None (tileiras: silent), "warn" or "error" (see ``hints.py``).
    hints: Optional[str] = None

    # -- reporting ----------------------------------------------------------------
    def emit(self, loc: Optional[DebugAttr], message: str, severity: Severity = Severity.ERROR) -> None:
        self.diagnostics.append(Diagnostic(loc, severity, message))

    def op_error(self, op: Operation, message: str) -> None:
        """MLIR's ``emitOpError``: the message is prefixed with the op's name."""
        self.emit(op.loc, f"'{op.definition.full_name}' op {message}")

    def error(self, op: Operation, message: str) -> None:
        """MLIR's ``emitError``: the message as is, located at the op."""
        self.emit(op.loc, message)

    def warning(self, op: Operation, message: str) -> None:
        self.emit(op.loc, message, Severity.WARNING)

    @property
    def error_count(self) -> int:
        return sum(d.is_error for d in self.diagnostics)
