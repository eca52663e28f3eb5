"""Debug-info scope rules: cuda-tile's ``DebugInfoVerifier``, with NVIDIA's messages.

A location *has a scope* when it leads to a ``DILoc`` (``get_di_loc``): a
``DILoc`` itself, a call site's caller, the first part of a fused location that
has one, a name location's child.  A plain text position (``TextLoc``) or an
unknown location has none.  The rules, as tileiras 13.5 applies them:

1. a function whose location has a scope must have a ``DISubprogram`` scope;
2. whose linkage name is the function's name;
3. an op may have a scope only if its function has one;
4. and that scope (through lexical blocks) must be the function's subprogram;
5. ops at module level (globals) must not have a scope;
6. a function's location must not be a call site.

Rules 1, 2 and 6 stop a function's checks (cuda-tile's ``EntryOp::verify``
fails before its body is looked at); rules 3 and 4 report only the first
offending op of a function, in post-order (nested ops before their parent),
as MLIR's ``walk`` meets them.  The structure of the records themselves (a
lexical block's parent is a local scope, a subprogram names its file and
compile unit...) is checked where they are made: by the text parser
(``parser_locs``, MLIR's struct-parameter errors) and the bytecode reader.
"""
from __future__ import annotations

from collections.abc import Iterator

from ..ir import debug as D
from ..ir.core import Function, Module, Operation
from ..record import record
from ..text.escape import escape_string
from .context import Context


@record(frozen=True, eq=False)
class StandIn:
    """The location of a function that only stands in for a place ops were written
    outside any function (the conformance runner verifies loose ops in one): the
    scope rules do not treat it as a function.  ``module_body``: the ops that were
    written directly in a ``cuda_tile.module`` body, which rule 5 checks as
    cuda-tile's module verifier does."""

    module_body: tuple[Operation, ...] = ()


def check_globals(ctx: Context, module: Module) -> None:
    """Rule 5 for globals (only text gives them a location)."""
    for g in module.globals:
        di = get_di_loc(g.loc)
        if di is not None:
            ctx.emit(g.loc, f"'cuda_tile.global' op invalid operation debug info scope: {attr_text(di)}. "
                            "Global variables must not have scope.")


def check_scopes(ctx: Context, fn: Function) -> None:
    """Every rule for one function and the ops in it."""
    if isinstance(fn.loc, StandIn):
        _check_module_body(ctx, fn.loc.module_body)
    elif check_function(ctx, fn):
        check_function_body(ctx, fn)


def _check_module_body(ctx: Context, ops: tuple[Operation, ...]) -> None:
    for op in ops:
        di = get_di_loc(op.loc)
        if di is not None:
            ctx.emit(op.loc, f"'{_op_name(op)}' op invalid operation debug info scope: {attr_text(di)}. "
                             "Global variables must not have scope.")
            return  # cuda-tile's module verifier stops at the first


def check_function(ctx: Context, fn: Function) -> bool:
    """Rules 6, 1 and 2; False when one failed."""
    prefix = f"'{function_op_name(fn)}' op "
    if isinstance(fn.loc, D.DICallSite):
        ctx.emit(fn.loc, prefix + f"invalid function debug info location: {loc_text(fn.loc)}. "
                                  "Function location must not be a CallSiteLoc.")
        return False
    di = get_di_loc(fn.loc)
    if di is None:
        return True
    if not isinstance(di.scope, D.DISubprogram):
        ctx.emit(fn.loc, prefix + f"invalid function debug info scope: {attr_text(di.scope)}. "
                                  "Function location must have cuda_tile.di_subprogram debug info scope.")
        return False
    if di.scope.linkage_name != fn.name:
        ctx.emit(fn.loc, prefix + f"invalid function debug info scope: {attr_text(di.scope)}. "
                                  f"Function name \"{fn.name}\" does not match subprogram scope linkage name "
                                  f"{escape_string(di.scope.linkage_name)}.")
        return False
    return True


def check_function_body(ctx: Context, fn: Function) -> None:
    """Rules 3 and 4: the first op (post-order) whose scope is not the function's."""
    fn_di = get_di_loc(fn.loc)
    fn_subprogram = subprogram_of(fn_di.scope) if fn_di is not None else None
    for op in _post_order(fn):
        di = get_di_loc(op.loc)
        subprogram = subprogram_of(di.scope) if di is not None else None
        if subprogram is None:
            continue
        if fn_subprogram is None:
            ctx.emit(op.loc, f"'{_op_name(op)}' op invalid operation debug info scope: {attr_text(subprogram)}. "
                             "Operation has debug info scope, but function debug info scope is undefined.")
            return
        if subprogram != fn_subprogram:
            ctx.error(op, f"invalid operation debug info scope: {attr_text(subprogram)}. "
                          "Operation debug info scope does not match function debug info scope: "
                          f"{attr_text(fn_subprogram)}.")
            return


def function_op_name(fn: Function) -> str:
    """The op a function is in cuda-tile 13.5: entries, and the SIMT preview's functions."""
    return "cuda_tile.entry" if fn.is_entry else "cuda_tile.preview$func"


def _op_name(op: Operation) -> str:
    """``cuda_tile.x`` for our ops, the name as written for another dialect's (tests use them)."""
    return op.definition.name if op.definition.opcode < 0 else op.definition.full_name


def _post_order(fn: Function) -> Iterator[Operation]:
    def visit(op: Operation) -> Iterator[Operation]:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    yield from visit(inner)
        yield op

    for block in fn.body.blocks:
        for op in block.ops:
            yield from visit(op)


# -- looking through locations -------------------------------------------------------------
def get_di_loc(loc: object) -> D.DILoc | None:
    """The ``DILoc`` a location leads to, if any.  A location the bytecode cannot
    carry (the text parser's fused and name locations) lists what it wraps in
    ``children``."""
    if isinstance(loc, D.DILoc):
        return loc if loc.scope is not None else None  # a scope-less DILoc is a text position
    if isinstance(loc, D.DICallSite):
        return get_di_loc(loc.caller)
    for child in getattr(loc, "children", ()):
        di = get_di_loc(child)
        if di is not None:
            return di
    return None


def subprogram_of(scope: object) -> D.DISubprogram | None:
    """The subprogram a local scope belongs to, through its lexical blocks."""
    seen: set[int] = set()
    while isinstance(scope, D.DILexicalBlock) and id(scope) not in seen:
        seen.add(id(scope))
        scope = scope.scope
    return scope if isinstance(scope, D.DISubprogram) else None


# -- MLIR's spelling of debug attributes and locations in messages -------------------------
def attr_text(node: object) -> str:
    """A debug attribute as MLIR prints it in a diagnostic (no aliases; parameters
    of a fixed attribute kind without their ``#cuda_tile.name`` prefix; optional
    parameters left out at their default)."""
    if isinstance(node, D.DIFile):
        return "#cuda_tile.di_file" + _file_body(node)
    if isinstance(node, D.DICompileUnit):
        return "#cuda_tile.di_compile_unit" + _compile_unit_body(node)
    if isinstance(node, D.DISubprogram):
        params = [f"file = {_file_body(node.file)}", f"line = {node.line}", f"name = {escape_string(node.name)}",
                  f"linkageName = {escape_string(node.linkage_name)}",
                  f"compileUnit = {_compile_unit_body(node.compile_unit)}"]
        if node.scope_line:
            params.append(f"scopeLine = {node.scope_line}")
        if node.flags:
            params.append("flags = declaration" if node.flags == 1 else f"flags = {node.flags}")
        return f"#cuda_tile.di_subprogram<{', '.join(params)}>"
    if isinstance(node, D.DILexicalBlock):
        params = [f"scope = {attr_text(node.scope)}", f"file = {_file_body(node.file)}", f"line = {node.line}"]
        if node.column:
            params.append(f"column = {node.column}")
        return f"#cuda_tile.di_lexical_block<{', '.join(params)}>"
    if isinstance(node, D.DILoc) and node.scope is not None:
        return (f"#cuda_tile.di_loc<loc({escape_string(node.filename)}:{node.line}:{node.column}) "
                f"in {attr_text(node.scope)}>")
    return loc_text(node)


def loc_text(loc: object) -> str:
    """A location as MLIR prints it: ``loc(...)``."""
    return f"loc({_loc_body(loc)})"


def _loc_body(loc: object) -> str:
    if loc is None or isinstance(loc, D.DIUnknown):
        return "unknown"
    if isinstance(loc, D.DILoc) and loc.scope is None:
        return f"{escape_string(loc.filename)}:{loc.line}:{loc.column}"
    if isinstance(loc, D.DILoc):
        return attr_text(loc)
    if isinstance(loc, D.DICallSite):
        return f"callsite({_loc_body(loc.callee)} at {_loc_body(loc.caller)})"
    children = getattr(loc, "children", ())
    name = getattr(loc, "name", None)
    if name is not None:
        return escape_string(name) + (f"({_loc_body(children[0])})" if children else "")
    return f"fused[{', '.join(_loc_body(c) for c in children)}]"


def _file_body(f: D.DIFile) -> str:
    return f"<{escape_string(f.name)} in {escape_string(f.directory)}>"


def _compile_unit_body(cu: D.DICompileUnit) -> str:
    return f"<file = {_file_body(cu.file)}>"
