"""Structure: SSA visibility, regions and blocks, terminators, entry functions, symbols."""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Block, Function, Module, Operation, Region, Value
from ..tile import ops_control as C
from ..tile import ops_core as K
from ..tile.registry import ops_with, terminators_of
from ..tile.traits import FUNCTION_BODY, ImplicitTerminator, Terminator, find_trait
from .context import Context, verifies
from .diagnostic import quoted

ENTRY = "cuda_tile." + FUNCTION_BODY


def type_list(types: list[T.Type] | tuple[T.Type, ...]) -> str:
    return ", ".join(quoted(t) for t in types)


def parent_op(op: Operation) -> Optional[Operation]:
    """The op whose region holds ``op``; None at a function's top level."""
    block = op.parent
    region = block.parent if block is not None else None
    return region.parent if region is not None else None


def parent_name(op: Optional[Operation]) -> str:
    return ENTRY if op is None else op.definition.full_name


# -- module level ------------------------------------------------------------------------
def check_globals(ctx: Context, module: Module) -> None:
    for g in module.globals:
        if not isinstance(g.type, T.TileType) or g.type.rank != 1:
            ctx.emit(g.loc, "'cuda_tile.global' op type must have rank 1")


def check_symbol_table(ctx: Context, module: Module) -> None:
    """The module's symbol table, checked as MLIR's SymbolTable trait does once every op is
    verified: the first redefinition ends it; else the first symbol use that fails
    (``get_global``) is the one reported."""
    seen: set[str] = set()
    for symbol in [*module.globals, *module.functions]:
        if symbol.name in seen:
            ctx.emit(symbol.loc, f"redefinition of symbol named '{symbol.name}'")
            return
        seen.add(symbol.name)
    for fn in module.functions:
        for op in fn.walk():
            if isinstance(op, K.GetGlobalOp) and _global_use_problem(ctx, op):
                return


def _global_use_problem(ctx: Context, op: Operation) -> bool:
    name = op.attributes.get("name")
    g = next((g for g in ctx.module.globals if g.name == name), None)
    if g is None:
        ctx.op_error(op, f"'{name}' does not reference a valid global")
        return True
    pointer = op.result.type.element
    element = T.element_type(g.type)
    if pointer.pointee != element:
        ctx.op_error(op, f"pointee type of result type {quoted(pointer)} does not match type "
                         f"{quoted(element)} of the global @{name}")
        return True
    return False


# -- functions ---------------------------------------------------------------------------
def check_function(ctx: Context, fn: Function) -> None:
    if fn.is_extern:
        _check_extern(ctx, fn)
        return
    prefix = f"'{ENTRY}' op "
    loc = fn.loc
    if fn.type.results and fn.is_entry:
        ctx.emit(loc, prefix + "entry op must not return values")
    for t in (fn.type.inputs if fn.is_entry else ()):
        if isinstance(t, T.TileType) and t.rank != 0:
            ctx.emit(loc, prefix + "entry op must have scalar types (rank 0 !cuda_tile.tile)")
            break
    if len(fn.body.blocks) != 1:
        ctx.emit(loc, prefix + f"expects region #0 to have 0 or 1 blocks, found {len(fn.body.blocks)}"
                 if len(fn.body.blocks) > 1
                 else prefix + "region #0 ('body') failed to verify constraint: region with 1 blocks")
        return
    block = fn.entry_block
    args = [a.type for a in block.args]
    if len(args) != len(fn.type.inputs):
        ctx.emit(loc, prefix + f"entry block must have {len(fn.type.inputs)} arguments to match function signature")
    else:
        for i, (got, want) in enumerate(zip(args, fn.type.inputs)):
            if got != want:
                ctx.emit(loc, prefix + f"type of entry block argument #{i}({quoted(got)}) must match the type "
                                       f"of the corresponding argument in function signature({quoted(want)})")
    _check_block_end(ctx, None, block, terminators_of(FUNCTION_BODY), loc)


EXTERN = "'cuda_tile.preview$func' op "
ACCESS = "cuda_tile.preview$access"


def _check_extern(ctx: Context, fn: Function) -> None:
    """A bodiless extern declaration (SIMT preview), as NVIDIA's 13.5 tools check it.  Each
    argument needs a ``cuda_tile.preview$access`` attribute, whose bytecode encoding is not
    public (no attribute tag its reader takes gives one), so no declaration passes."""
    if not fn.is_private:
        ctx.emit(fn.loc, EXTERN + "symbol declaration cannot have public visibility")
    elif not fn.type.inputs:
        ctx.emit(fn.loc, EXTERN + "extern functions must declare at least one input")
    else:
        ctx.emit(fn.loc, EXTERN + f"extern function argument 0 must have a '{ACCESS}' arg attr")


def _check_block_end(ctx: Context, owner: Optional[Operation], block: Block,
                     allowed: tuple[type, ...], loc: object) -> None:
    name = parent_name(owner)
    prefix = f"'{name}' op "
    last = block.ops[-1] if block.ops else None
    if last is None or not isinstance(last, allowed):
        found = "nothing" if last is None else f"'{last.definition.full_name}'"
        ctx.emit(owner.loc if owner is not None else loc,
                 prefix + f"expects regions to end with '{allowed[0].definition.full_name}', found {found}")


# -- SSA visibility ----------------------------------------------------------------------
def check_operands_visible(ctx: Context, op: Operation, visible: set[Value]) -> None:
    for i, v in enumerate(op.operands):
        if v not in visible:
            ctx.op_error(op, f"operand #{i} does not dominate this use")


# -- regions and terminators --------------------------------------------------------------
@verifies(*ops_with(ImplicitTerminator))
def check_regions(ctx: Context, op: Operation) -> None:
    """Each region one block, ending with a terminator that names this op as a parent
    (its ``Terminator`` trait); the message names the implicit one."""
    allowed = terminators_of(op.definition.name)
    for i, (region, spec) in enumerate(zip(op.regions, op.definition.regions)):
        if isinstance(op, C.IfOp) and i == 1 and not region.blocks:
            continue  # the else region may be empty
        if len(region.blocks) != 1:
            ctx.op_error(op, f"region #{i} ('{spec.name}') failed to verify constraint: region with 1 blocks")
            continue
        _check_block_end(ctx, op, region.blocks[0], allowed, op.loc)


@verifies(*ops_with(Terminator))
def check_terminator_placement(ctx: Context, op: Operation) -> None:
    allowed = tuple("cuda_tile." + p for p in find_trait(op, Terminator).parents)
    if parent_name(parent_op(op)) not in allowed:
        ctx.op_error(op, f"expects parent op to be one of '{', '.join(allowed)}'")
        return
    if op.parent is not None and op.parent.ops and op.parent.ops[-1] is not op:
        ctx.op_error(op, "must be the last operation in the parent block")


def _ancestor_loop(ctx: Context, op: Operation, loops: tuple[type, ...]) -> Optional[Operation]:
    """The nearest enclosing loop of the given kinds through ``if`` ops only."""
    parent = parent_op(op)
    while parent is not None and not isinstance(parent, loops):
        if not isinstance(parent, C.IfOp):
            break
        parent = parent_op(parent)
    if parent is None or not isinstance(parent, loops):
        names = [cls.definition.full_name for cls in loops] + ["cuda_tile.if"]
        ctx.op_error(op, "can only be nested within a ancestor chain of '" + "', '".join(names) + "' operations")
        return None
    return parent


@verifies(C.BreakOp)
def check_break(ctx: Context, op: Operation) -> None:
    loop = _ancestor_loop(ctx, op, (C.LoopOp,))
    if loop is None:
        return
    got = [v.type for v in op.operands]
    want = [r.type for r in loop.results]
    if got != want:
        ctx.op_error(op, f"operand types must correspond to the parent loop result types: "
                         f"({type_list(got)}) vs ({type_list(want)})")


@verifies(C.ContinueOp)
def check_continue(ctx: Context, op: Operation) -> None:
    loop = _ancestor_loop(ctx, op, (C.ForOp, C.LoopOp))
    if loop is None:
        return
    got = [v.type for v in op.operands]
    if isinstance(loop, C.LoopOp):
        want = [v.type for v in loop.operands]
        if got != want:
            ctx.error(op, "`loop` is missing a valid terminator. `continue` op should have operand types that "
                          f"match the parent loop iter_values: ({type_list(want)}), but found: ({type_list(got)})")
    else:
        want = [r.type for r in loop.results]
        if got != want:
            ctx.error(op, "`for` is missing a valid terminator. `continue` op should have operand types that "
                          f"match the parent loop return types: ({type_list(want)}), but found: ({type_list(got)})")


@verifies(C.ReturnOp)
def check_return(ctx: Context, op: Operation) -> None:
    parent = parent_op(op)
    while isinstance(parent, C.IfOp):
        parent = parent_op(parent)
    if parent is not None:
        ctx.op_error(op, "must be used within a cuda_tile.entry, or cuda_tile.if operation")
        return
    fn = ctx.function
    results = len(fn.type.results) if fn is not None else 0
    if len(op.operands) != results:
        ctx.op_error(op, f"has {len(op.operands)} operands, but enclosing function (@{fn.name if fn else '?'}) "
                         f"returns {results}")
    elif op.operands and fn is not None and fn.is_entry:
        ctx.op_error(op, f"has {len(op.operands)} operands, but entry function must return 0 operands")
    else:
        for i, (v, t) in enumerate(zip(op.operands, fn.type.results if fn is not None else ())):
            if v.type != t:
                ctx.op_error(op, f"type of return operand {i} ({quoted(v.type)}) doesn't match function result "
                                 f"type ({quoted(t)}) in function @{fn.name}")


@verifies(C.IfOp)
def check_if(ctx: Context, op: Operation) -> None:
    want = [r.type for r in op.results]
    for i, t in enumerate(want):
        if isinstance(t, (T.TensorViewType, *T.ViewType)):
            kind = "tensor_view" if isinstance(t, T.TensorViewType) else "tile view"
            ctx.op_error(op, f"result type {i} is a {kind}, which is not supported")
            return
    for region, name in zip(op.regions, ("then", "else")):
        if not region.blocks:
            if name == "then":
                ctx.op_error(op, "must define then branch")
            elif want:
                ctx.op_error(op, "has non-empty return type, must define else branch")
            continue
        last = region.blocks[-1].ops[-1] if region.blocks[-1].ops else None
        if not isinstance(last, C.YieldOp):
            continue
        got = [v.type for v in last.operands]
        if want and not got:
            ctx.op_error(op, f"has return type of {type_list(want)} but {name} branch does not yield anything")
        elif not want and got:
            ctx.op_error(op, f"does not return a value, but {name} branch yields {type_list(got)}")
        elif got != want:
            ctx.op_error(op, f"type does not match yield type, {name} branch yields {type_list(got)} "
                             f"but op result type is {type_list(want)}")


def _check_iter_values(ctx: Context, op: Operation, iter_args: list[Value]) -> None:
    inits = list(op.initValues)
    if len(iter_args) != len(inits):
        ctx.op_error(op, f"mismatch in number of region iterator values and loop iterator inits: "
                         f"{len(iter_args)} vs {len(inits)}")
        return
    for i, (init, arg) in enumerate(zip(inits, iter_args)):
        if isinstance(arg.type, T.TensorViewType):
            ctx.op_error(op, f"loop-carried value {i} is a tensor_view, which is not supported")
        elif isinstance(arg.type, T.ViewType):
            ctx.op_error(op, f"loop-carried value {i} is a tile view, which is not supported")
        elif init.type != arg.type:
            ctx.op_error(op, f"init value {i} and region iter_value {i} have different type: "
                             f"{quoted(init.type)} != {quoted(arg.type)}")
    for i, r in enumerate(op.results):
        if isinstance(r.type, T.TensorViewType):
            ctx.op_error(op, f"result type {i} is a tensor_view, which is not supported")
        elif isinstance(r.type, T.ViewType):
            ctx.op_error(op, f"result type {i} is a tile view, which is not supported")


def _body_args(region: Region) -> Optional[list[Value]]:
    return region.blocks[0].args if len(region.blocks) == 1 else None


@verifies(C.ForOp)
def check_for(ctx: Context, op: Operation) -> None:
    args = _body_args(op.regions[0])
    if args is None:
        return
    if not args:
        ctx.op_error(op, "expected at least one block argument for induction variable")
        return
    if args[0].type != op.lowerBound.type:
        ctx.op_error(op, f"expected induction variable to be same type as bounds and step: "
                         f"{quoted(args[0].type)} vs {quoted(op.lowerBound.type)}")
        return
    if [v.type for v in op.initValues] != [r.type for r in op.results]:
        ctx.op_error(op, "failed to verify that all of {initValues, resultValues} have same type")
    _check_iter_values(ctx, op, args[1:])


@verifies(C.LoopOp)
def check_loop(ctx: Context, op: Operation) -> None:
    args = _body_args(op.regions[0])
    if args is not None:
        _check_iter_values(ctx, op, args)
