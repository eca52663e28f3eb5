"""The Tile IR verifier.

``verify_module(module, gpu_name=None)`` walks every function once and returns every
diagnostic found (it never stops at the first); ``check_module`` raises
``VerifyError`` listing them when any is an error.

Per function: its signature, structure, hints and debug-info scopes (its
location, then its ops', ``debuginfo``).  Per op, in order: rules for every op
(type well-formedness, version and architecture gates), SSA visibility, the
registry-driven invariants (field counts, enum attributes, type constraints and
relations), then the op's own rules registered with ``@verifies(OpClass)`` in
the family modules.
"""
from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Module, Operation, Region, Value
from . import arch, debuginfo, ops_arith, ops_core, ops_memory, structure, types, versions  # noqa: F401 (register rules)
from . import hints as opt_hints
from .context import RULES, Context, verifies
from .diagnostic import Diagnostic, Severity, VerifyError
from .generic import check_invariants

__all__ = ["verify_module", "check_module", "recheck_for_target", "VerifyError", "Diagnostic", "Severity",
           "verifies"]


def verify_module(module: Module, *, gpu_name: Optional[str] = None,
                  hints: Optional[str] = None) -> list[Diagnostic]:
    """``hints``: None to accept any optimization hint (as tileiras does), "warn" or
    "error" to check them as cuda-tile-opt's -Wunsupported-hints / -Werr-hints do."""
    ctx = Context(module, gpu_name, hints=hints)
    versions.check_module(ctx, module)
    structure.check_globals(ctx, module)
    types.check_globals(ctx, module)
    debuginfo.check_globals(ctx, module)
    for fn in module.functions:
        ctx.function = fn
        types.check_function_signature(ctx, fn)  # also the entry block's arguments
        structure.check_function(ctx, fn)
        opt_hints.check_function_hints(ctx, fn)
        debuginfo.check_scopes(ctx, fn)
        _walk_region(ctx, fn.body, set())
    ctx.function = None
    structure.check_symbol_table(ctx, module)
    return ctx.diagnostics


def check_module(module: Module, *, gpu_name: Optional[str] = None) -> list[Diagnostic]:
    """Verify ``module``; raise ``VerifyError`` if any error was found, else return the warnings."""
    diagnostics = verify_module(module, gpu_name=gpu_name)
    if any(d.is_error for d in diagnostics):
        raise VerifyError(diagnostics)
    return diagnostics


def recheck_for_target(module: Module, gpu_name: str) -> None:
    """``check_module(module, gpu_name=gpu_name)`` for a module that passed ``check_module``
    without one: only the rules that read the target (``arch.TARGET_RULES``) run again,
    and the whole verifier only when they find an error, so the report is the same.  A
    second full pass would cost up to 10 ms of a large kernel's compile."""
    ctx = Context(module, gpu_name)
    for fn in module.functions:
        ctx.function = fn
        for op in fn.walk():
            for rule in arch.TARGET_RULES:
                rule(ctx, op)
    if ctx.error_count:
        check_module(module, gpu_name=gpu_name)


def _walk_region(ctx: Context, region: Region, visible: set[Value]) -> None:
    for block in region.blocks:
        _walk_block(ctx, block, visible)


def _walk_block(ctx: Context, block: Block, outer: set[Value]) -> None:
    visible = set(outer)
    visible.update(block.args)  # their types are checked with the op (or function) owning the block
    for op in block.ops:
        _verify_op(ctx, op, visible)
        for region in op.regions:
            _walk_region(ctx, region, visible)
        visible.update(op.results)


def _verify_op(ctx: Context, op: Operation, visible: set[Value]) -> None:
    for rule in RULES.get(Operation, ()):
        rule(ctx, op)
    structure.check_operands_visible(ctx, op, visible)
    if not check_invariants(ctx, op):
        return
    for rule in RULES.get(type(op), ()):
        rule(ctx, op)
