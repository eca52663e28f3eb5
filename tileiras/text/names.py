"""SSA value names, assigned the way MLIR's AsmPrinter (``SSANameState``) does.

Values get suggested names from per-op hooks (``%tview``, ``%cst_1_i32``,
``%blockId_x``...) or numbers (``%0``).  A name already visible in the current
region or an enclosing one gets a ``_N`` suffix from a conflict counter.  Each
region is numbered completely before the regions nested in it; nested regions
start from the counters as they stood after their parent region, and names
used in one region are invisible to its siblings.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Block, Function, Operation, Region, Value
from ..tile import ops_control, ops_core, ops_memory
from ..ir.types import ScalarType, TileType
from .attributes import dense_elements
from .floats import float_name_part

ResultNames = list[tuple[int, str]]

# ---------------------------------------------------------------------------
# Per-op suggested names (MLIR's getAsmResultNames / getAsmBlockArgumentNames).


def _constant_name(op: Operation) -> ResultNames:
    t = op.results[0].type
    elem = t.element if isinstance(t, TileType) else t
    assert isinstance(elem, ScalarType)
    values = constant_scalars(op)
    if elem.name == "i1":
        if all(values):
            return [(0, "true")]
        if not any(values):
            return [(0, "false")]
        return [(0, "cst_i1")]
    name = "cst"
    if len(set(values)) == 1:  # a splat (or a single element)
        if elem.is_int:
            v = values[0]
            if v >= 1 << (elem.bitwidth - 1):
                v -= 1 << elem.bitwidth
            name += f"_{v}"
        else:
            part = float_name_part(values[0], elem.name)
            if part is not None:
                name += f"_{part}"
    return [(0, f"{name}_{elem}")]


def constant_scalars(op: Operation) -> list[int]:
    """Raw element bit patterns of a numeric constant."""
    return dense_elements(op.attributes["value"])


def _fixed(name: str) -> Callable[[Operation], ResultNames]:
    return lambda op: [(0, name)] if op.results else []


#: Ops that implement MLIR's OpAsmOpInterface and suggest result names.
RESULT_NAME_HOOKS: dict[type, Callable[[Operation], ResultNames]] = {
    ops_core.ConstantOp: _constant_name,
    ops_core.BroadcastOp: _fixed("bcast"),
    ops_core.ReshapeOp: _fixed("reshape"),
    ops_core.ReduceOp: _fixed("reduce"),
    ops_control.ForOp: _fixed("for"),
    ops_memory.MakeTensorViewOp: _fixed("tview"),
    ops_memory.MakePartitionViewOp: _fixed("pview"),
    ops_memory.MakeStridedViewOp: _fixed("sview"),
    ops_memory.MakeGatherScatterViewOp: _fixed("gsview"),
}

#: Ops with OpAsmOpInterface that suggest no result names.
SILENT_ASM_OPS: frozenset[type] = frozenset({
    ops_control.IfOp, ops_control.LoopOp, ops_core.ScanOp, ops_core.ModuleOp,
})


def _assume_name(op: Operation) -> ResultNames:
    producer = op.operands[0].owner
    if isinstance(producer, Operation) and has_asm_interface(producer):
        suffix = ""
        for index, name in suggested_result_names(producer):
            if producer.results[index] is op.operands[0]:
                suffix = name
        return [(0, "assume_" + suffix)]
    return [(0, "assume")]


RESULT_NAME_HOOKS[ops_control.AssumeOp] = _assume_name


def _ods_result_names(op: Operation) -> ResultNames:
    """ODS's generated names for ops with several declared result groups:
    the first value of each non-empty group is named after the group."""
    results = op.definition.results
    out: ResultNames = []
    index = 0
    variadic = any(r.variadic for r in results)
    extra = len(op.results) - (len(results) - 1) if variadic else 1
    for r in results:
        size = extra if r.variadic else 1
        if size:
            out.append((index, r.name))
        index += size
    return out


def has_asm_interface(op: Operation) -> bool:
    cls = type(op)
    return (cls in RESULT_NAME_HOOKS or cls in SILENT_ASM_OPS
            or len(op.definition.results) > 1)


def suggested_result_names(op: Operation) -> ResultNames:
    hook = RESULT_NAME_HOOKS.get(type(op))
    if hook is not None:
        return hook(op)
    if type(op) in SILENT_ASM_OPS or len(op.definition.results) <= 1:
        return []
    return _ods_result_names(op)


def _for_arg_names(region: Region) -> list[str]:
    args = region.blocks[0].args
    return ["loopIdx"] + [f"iterArg{i}" for i in range(len(args) - 1)]


def _reduce_arg_names(region: Region) -> list[str]:
    n = len(region.blocks[0].args)
    names = []
    for i in range(n):
        name = "reduce_lhs" if i % 2 == 0 else "reduce_rhs"
        if n > 2:
            name += str(i // 2)
        names.append(name)
    return names


BLOCK_ARG_NAME_HOOKS: dict[type, Callable[[Region], list[str]]] = {
    ops_control.ForOp: _for_arg_names,
    ops_core.ReduceOp: _reduce_arg_names,
}


# ---------------------------------------------------------------------------


def sanitize(name: str) -> str:
    """MLIR's sanitizeIdentifier for value names."""
    def valid(ch: str) -> bool:
        return ch.isascii() and (ch.isalnum() or ch in "$._-")

    def copy() -> str:
        out = []
        for ch in name:
            if valid(ch):
                out.append(ch)
            elif ch == " ":
                out.append("_")
            else:
                out.append(format(ord(ch), "X"))
        return "".join(out)

    if name[0].isdigit():
        return "_" + copy()
    if all(valid(ch) for ch in name):
        return name
    return copy()


class NameTable:
    """Names of every value of one function (or any op list with regions)."""

    def __init__(self, body: Region, *, arg_start: int = 0):
        self.ids: dict[Value, int] = {}
        self.names: dict[Value, str] = {}
        self.groups: dict[Operation, list[int]] = {}
        self._scopes: list[set[str]] = []
        self._next_value = 0
        self._next_arg = arg_start
        self._next_conflict = 0
        self._number(body)

    # -- numbering ------------------------------------------------------
    def _number(self, top: Region) -> None:
        stack: list[tuple[Region, int, int, int, int]] = [(top, 0, self._next_arg, 0, 0)]
        while stack:
            region, self._next_value, self._next_arg, self._next_conflict, depth = stack.pop()
            del self._scopes[depth:]
            self._scopes.append(set())
            self._number_region(region)
            for block in region.blocks:
                for op in block.ops:
                    for sub in op.regions:
                        stack.append((sub, self._next_value, self._next_arg,
                                      self._next_conflict, depth + 1))

    def _number_region(self, region: Region) -> None:
        owner = region.parent
        hook = BLOCK_ARG_NAME_HOOKS.get(type(owner)) if owner is not None else None
        if hook is not None and region.blocks:
            for arg, name in zip(region.blocks[0].args, hook(region)):
                self._set_name(arg, name)
        for i, block in enumerate(region.blocks):
            self._number_block(block, is_entry=i == 0)

    def _number_block(self, block: Block, is_entry: bool) -> None:
        for arg in block.args:
            if arg in self.ids or arg in self.names:
                continue
            if is_entry:
                self._set_name(arg, f"arg{self._next_arg}")
                self._next_arg += 1
            else:
                self._set_name(arg, "")
        for op in block.ops:
            self._number_op(op)

    def _number_op(self, op: Operation) -> None:
        groups = [0]
        for index, name in suggested_result_names(op):
            self._set_name(op.results[index], name)
            if index:
                groups.append(index)
        if not op.results:
            return
        first = op.results[0]
        if first not in self.ids and first not in self.names:
            self.ids[first] = self._next_value
            self._next_value += 1
        if len(groups) != 1:
            self.groups[op] = sorted(groups)

    def _set_name(self, value: Value, name: str) -> None:
        if not name:
            self.ids[value] = self._next_value
            self._next_value += 1
            return
        self.names[value] = self._unique(name)

    def _used(self, name: str) -> bool:
        return any(name in scope for scope in self._scopes)

    def _unique(self, name: str) -> str:
        name = sanitize(name)
        if self._used(name):
            while True:
                probe = f"{name}_{self._next_conflict}"
                self._next_conflict += 1
                if not self._used(probe):
                    name = probe
                    break
        self._scopes[-1].add(name)
        return name

    # -- lookup ---------------------------------------------------------
    def _head(self, value: Value) -> tuple[Value, Optional[int]]:
        owner = value.owner
        if not isinstance(owner, Operation) or len(owner.results) == 1:
            return value, None
        number = value.index
        groups = self.groups.get(owner)
        if groups is None:
            return owner.results[0], number
        start = max(g for g in groups if g <= number)
        later = [g for g in groups if g > number]
        size = (later[0] if later else len(owner.results)) - start
        return owner.results[start], (number - start if size != 1 else None)

    def ref(self, value: Value, with_number: bool = True) -> str:
        head, number = self._head(value)
        if head in self.names:
            text = "%" + self.names[head]
        elif head in self.ids:
            text = f"%{self.ids[head]}"
        else:
            text = "<<UNKNOWN SSA VALUE>>"
        if number is not None and with_number:
            text += f"#{number}"
        return text

    def result_list(self, op: Operation) -> str:
        """The ``%a, %b:2`` list before `` = ``."""
        def group(start: int, count: int) -> str:
            text = self.ref(op.results[start], with_number=False)
            return text + (f":{count}" if count > 1 else "")

        groups = self.groups.get(op)
        if not groups:
            return group(0, len(op.results))
        bounds = groups + [len(op.results)]
        return ", ".join(group(bounds[i], bounds[i + 1] - bounds[i]) for i in range(len(groups)))


def function_names(function: Function) -> NameTable:
    return NameTable(function.body)


def detached_op_names(op: Operation) -> NameTable:
    """Names for an op that belongs to no block (for debugging dumps)."""
    block = Block()
    block.ops.append(op)  # not Block.append: the op keeps its (absent) parent
    return NameTable(Region([block]))
