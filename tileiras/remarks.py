"""Optimization remarks: what the compiler did with each memory and tensor-core op.

``--remarks=all|memory|tensorcore`` (and ``--remarks-passed/missed/failed/analysis``)
select remarks by category and kind; ``--remark-format=command-line`` prints them as
NVIDIA's tool does, ``yaml`` writes LLVM's remark YAML to ``--remarks-output-file``
(cuTile reads that file).  The remarks describe this compiler's decisions, with the
names NVIDIA's tool uses where the decision is the same kind.
"""
from __future__ import annotations

import enum
from typing import Iterable, Optional

from .ir import debug as D
from .ir.attrs import DictAttr, OptimizationHintsAttr
from .ir.core import Function, Module, Operation
from .record import field, record
from .tile import ops_arith as AR
from .tile import ops_memory as MEM
from .target import DEFAULT_HINTS_KEY
from .tile.traits import is_plain_load, is_plain_store


class Kind(enum.Enum):
    PASSED = ("Passed", "passed")
    MISSED = ("Missed", "missed")
    FAILED = ("Failure", "failed")
    ANALYSIS = ("Analysis", "analysis")

    @property
    def yaml_tag(self) -> str:
        return self.value[0]

    @property
    def word(self) -> str:
        return self.value[1]


class Category(enum.Enum):
    HINTS = ("hints", "Hints")          # only under ``--remarks=all``, as NVIDIA's tool has it
    MEMORY = ("memory", "Memory")
    TENSORCORE = ("tensorcore", "TensorCore")

    @property
    def option(self) -> str:
        return self.value[0]

    @property
    def pass_name(self) -> str:
        return self.value[1]


@record
class Remark:
    kind: Kind
    category: Category
    name: str
    message: str
    function: str
    loc: Optional[D.DebugAttr]
    args: list[tuple[str, str]] = field(default_factory=list)


def _loc_of(loc: Optional[D.DebugAttr]) -> Optional[tuple[str, int, int]]:
    while isinstance(loc, D.DICallSite):
        loc = loc.callee
    if isinstance(loc, D.DILoc):
        return loc.filename, loc.line, loc.column
    return None


def collect(module: Module, gpu_name: Optional[str] = None) -> list[Remark]:
    """The remarks for every entry of ``module``, in op order; remarks of the same name
    at the same source location are merged (their arguments kept, as NVIDIA's are), and
    where several entries share a source location (one kernel exported for several
    signatures), the last entry's remark stands, as with NVIDIA's tool.
    With ``gpu_name`` the tensor-core remarks report TileAS's decisions for that target
    (``_decisions``): which multiplies run on tensor cores, and per K loop whether it is
    software-pipelined, with how many stages, or why not."""
    out: list[Remark] = []
    seen: dict[tuple, Remark] = {}
    decisions = _decisions(module, gpu_name)
    for fn in module.functions:
        tas = decisions.get(fn.name)
        accesses = view_accesses(fn)
        mine: set[tuple] = set()
        ops = list(fn.walk())
        found = [(op, r) for op in ops for r in _hint_remarks(fn, op, gpu_name)]     # NVIDIA's come first
        found += [(op, r) for op in ops
                  for r in (*_op_remarks(fn, op, tas, gpu_name, accesses), *_loop_remarks(fn, op, tas))]
        for op, r in found:
            where = _loc_of(r.loc)
            key = (r.name, where) if where is not None else (r.function, r.name, id(op))
            if key in mine and r.name != NARROWING:
                seen[key].args += [a for a in r.args if a[0] == "Reason"]
                continue
            if key in seen:         # another entry's remark at this location (or, narrowing, another
                out.remove(seen[key])   # view's of this entry): the later one stands
            seen[key] = r
            mine.add(key)
            out.append(r)
    return out


def _hint_remarks(fn: Function, op: Operation, gpu_name: Optional[str]) -> Iterable[Remark]:
    """An op whose hints come from their ``default`` entry alone (none for ``gpu_name``):
    NVIDIA's tool says so once per op, naming the first such hint."""
    hints = op.attributes.get("optimization_hints")
    if not isinstance(hints, OptimizationHintsAttr) or gpu_name is None:
        return
    given = {arch: d for arch, d in hints.entries if isinstance(d, DictAttr)}
    own = given.get(gpu_name)
    for key, _ in getattr(given.get(DEFAULT_HINTS_KEY), "entries", ()):
        if own is None or own.get(key) is None:
            yield Remark(Kind.PASSED, Category.HINTS, "RemarkHintDefault", f"OptimizationHint used default {key}",
                         fn.name, op.loc)
            return


def _decisions(module: Module, gpu_name: Optional[str]) -> dict:
    """Each function's TileAS for ``gpu_name``, by name: the decisions the compiler's own
    passes make there (the pass list up to ``--emit=tileas``), or nothing without a target."""
    if not gpu_name:
        return {}
    from .pipeline import CompileOptions, run_stages  # noqa: PLC0415

    return run_stages(module, CompileOptions(gpu_name=gpu_name), "tileas", only_needed=True).tas


def _loop_remarks(fn: Function, op: Operation, tas) -> Iterable[Remark]:
    """Per tensor-core K loop or SIMT streaming loop: software-pipelined with how many
    stages, or why not."""
    from .lower.attention_pipeline import AttentionPlan  # noqa: PLC0415
    from .lower.attention_tma import AttentionRingPlan  # noqa: PLC0415
    from .lower.software_pipeline import PipelinePlan  # noqa: PLC0415
    from .lower.stream_pipeline import StreamPlan, UnrolledLoop, is_stream_loop  # noqa: PLC0415
    from .lower.tma_stream import TmaStream  # noqa: PLC0415
    from .lower.tma_ring import RingPlan  # noqa: PLC0415

    decision = tas.pipelines.get(op) if tas is not None else None
    if isinstance(decision, RingPlan):
        yield Remark(Kind.PASSED, Category.TENSORCORE, "RemarkSoftwarePipelined",
                     f"K loop software-pipelined with {decision.stages} stages", fn.name, op.loc,
                     [("Stages", str(decision.stages)), ("StagesFrom", decision.source),
                      *([("Copies", "TMA ring into ldmatrix's swizzled operands"),
                         ("Operands", "mma.sync fragments read from the stage with ldmatrix")] if decision.sync else
                        [("Copies", "TMA ring into tcgen05.mma's swizzled operands"),
                         ("Accumulator", "tensor memory, read back once after the loop")] if decision.tcgen05 else
                        [("Copies", "TMA ring into wgmma's swizzled operands"),
                         ("WgmmaInFlight", str(decision.in_flight) + (f" ({decision.serial_reason})"
                                                                       if decision.serial_reason else ""))]),
                      ("WarpSpecialized", f"producer warp {decision.producer_warp}" if decision.specialized
                       else f"no ({decision.specialize_reason})")]
                     + ([("Persistent", "mbarriers initialized once, phases carried across the enclosing loop")]
                        if decision.persistent else []))
    elif isinstance(decision, AttentionRingPlan):
        yield Remark(Kind.PASSED, Category.TENSORCORE, "RemarkSoftwarePipelined",
                     f"K/V loop software-pipelined with {decision.stages} stages", fn.name, op.loc,
                     [("Stages", str(decision.stages)), ("StagesFrom", decision.source),
                      ("Copies", "TMA ring into " + ("ldmatrix's" if decision.sync else "tcgen05.mma's"
                                                      if tas.tensor_cores[decision.mma].tcgen05 else "wgmma's")
                       + " swizzled operands (K/V)")]
                     + ([("Accumulators", "S and O in tensor memory" + (
                         "; Q @ K^T issued an iteration ahead, into a second S buffer" if decision.s_ahead else ""))]
                        if tas.tensor_cores[decision.mma].tcgen05 else []))
    elif isinstance(decision, AttentionPlan):
        yield Remark(Kind.PASSED, Category.TENSORCORE, "RemarkSoftwarePipelined",
                     f"K/V loop software-pipelined with {decision.stages} stages", fn.name, op.loc,
                     [("Stages", str(decision.stages)), ("StagesFrom", decision.source),
                      ("Copies", "cp.async " + "/".join(f"{t.copy_bytes}-byte" for t in decision.tiles) + " (K/V)")])
    elif isinstance(decision, (PipelinePlan, StreamPlan)):
        stream = isinstance(decision, StreamPlan)
        widths = [t.copy_bytes for t in decision.tiles] if stream else decision.copy_bytes
        copies = "/".join(f"{n}-byte" for n in widths) + (" into the tiles' layouts" if stream else " (A/B)")
        details = [("Stages", str(decision.stages)), ("StagesFrom", decision.source), ("Copies", f"cp.async {copies}")]
        if not stream:
            details.append(("Operands", "wgmma descriptors over the TMA ring's swizzled layouts"
                            if decision.staging is not None else "mma.sync fragments read from the stage"))
            if decision.b_columns:
                details.append(("B", "column-major view (dim_map [1, 0]): copied along K into N rows of K"))
        yield Remark(Kind.PASSED, Category.MEMORY if stream else Category.TENSORCORE, "RemarkSoftwarePipelined",
                     f"{'streaming' if stream else 'K'} loop software-pipelined with {decision.stages} stages",
                     fn.name, op.loc, details)
    elif isinstance(decision, TmaStream):
        yield Remark(Kind.PASSED, Category.MEMORY, "RemarkSoftwarePipelined",
                     f"streaming loop software-pipelined with {decision.stages} stages", fn.name, op.loc,
                     [("Stages", str(decision.stages)), ("StagesFrom", decision.source),
                      ("Copies", f"TMA, issued {decision.stages} trip{'s' if decision.stages > 1 else ''} ahead "
                                 "by thread 0 once every thread has read the stage")])
    elif isinstance(decision, UnrolledLoop):
        yield Remark(Kind.PASSED, Category.MEMORY, "RemarkLoopUnrolled",
                     f"streaming loop unrolled: its {decision.trips} trips' loads issued together", fn.name, op.loc,
                     [("Trips", str(decision.trips)), ("Registers", f"{decision.registers} for the loaded tiles")])
    elif decision is not None:
        kind = "streaming loop" if is_stream_loop(tas, op) else "K loop"
        yield Remark(Kind.MISSED, Category.MEMORY if kind == "streaming loop" else Category.TENSORCORE,
                     "RemarkSoftwarePipelineFailed", f"{kind} not software-pipelined", fn.name, op.loc,
                     [("Reason", decision)])


def _op_remarks(fn: Function, op: Operation, tas=None, gpu_name: Optional[str] = None,
                accesses: Optional[dict] = None) -> Iterable[Remark]:
    name = fn.name
    if is_plain_load(op) or is_plain_store(op):
        if isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp)):     # NVIDIA's: view accesses only
            yield from _memory_remarks(fn, op, tas, gpu_name)
        yield from _forwarding_remarks(fn, op, tas)
    elif isinstance(op, MEM.MakeTensorViewOp):
        bits = index_bits(op, (accesses or {}).get(op, ()), tas)
        if bits > 32:
            yield Remark(Kind.MISSED, Category.MEMORY, NARROWING,
                         f"Could not narrow tensor_view indexing to i32: index computations may require {bits} bits",
                         name, op.loc)
    elif isinstance(op, (AR.MmaFOp, AR.MmaIOp)) and tas is not None and op in tas.tensor_cores:
        form = tas.tensor_cores[op]
        unit = "SM100" if form.tcgen05 else "SM90" if form.warpgroup else "SM80"
        notes = [("Instruction", f"Tensor-core {unit}"), ("Shape", str(list(_instruction_shape(tas, op))))]
        if form.tcgen05:        # cta_group::1: one CTA's tensor core per MMA
            notes.append(("NumCTAs", "1"))
        yield Remark(Kind.PASSED, Category.TENSORCORE, "RemarkTensorCoreMMA",
                     "MMA operation successfully optimized to use Tensor Cores", fn.name, op.loc, notes)
    elif isinstance(op, (AR.MmaFOp, AR.MmaIOp)):
        yield Remark(Kind.MISSED, Category.TENSORCORE, "RemarkTensorCoreNotUsed",
                     "Matrix multiply lowered to fused multiply-adds on CUDA cores: tensor cores are not used yet",
                     name, op.loc)


NARROWING = "RemarkTensorViewIndexTypeNarrowing"
#: the largest value of an i32 shape or stride whose facts bound nothing
I32_MAX = (1 << 31) - 1


def view_accesses(fn: Function) -> dict[Operation, list[Operation]]:
    """Each ``make_tensor_view`` of ``fn`` -> the view loads and stores through its
    partition (or other) views, in op order."""
    out: dict[Operation, list[Operation]] = {}
    for op in fn.walk():
        if isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp)):
            source = getattr(op.view.owner, "tensor_view", None)
            if source is not None and isinstance(source.owner, MEM.MakeTensorViewOp):
                out.setdefault(source.owner, []).append(op)
    return out


def index_bits(view: Operation, accesses: Iterable[Operation], tas=None) -> int:
    """The bits the index math of the tensor view ``view`` makes may need, as NVIDIA's tool
    counts them for its narrowing remark: a sign bit and the largest element offset the
    view's ``accesses`` (``view_accesses``) reach, the sum over its dims of (shape - 1 +
    the largest tile along the dim) times the stride, each dynamic shape and stride at its largest value (its facts'
    upper bound, else the i32 maximum).  Accesses TMA copies (``tas``' plans) outside loops
    compute no index and do not count (in a loop NVIDIA's tool counts them: their boxes'
    coordinates step with the induction variable); 0 where no access counts.  NVIDIA's
    remarks agree with this on 220 of the 252 sm_80 and sm_90 files of both corpora."""
    from .lower.tiles import dynamic_operands  # noqa: PLC0415  (lowering loads on demand)
    from .lower.tma import enclosing_loop  # noqa: PLC0415

    shape_t = view.result.type
    rank = len(shape_t.shape)
    tiles, counted = [0] * rank, False
    for user in accesses:
        if _tma_box(tas, user) is not None and enclosing_loop(user) is None:
            continue
        counted = True
        view_t = user.view.type
        dims = list(getattr(view_t, "dim_map", None) or range(rank))
        for i, t in enumerate(getattr(view_t, "tile_shape", None) or ()):
            tiles[dims[i]] = max(tiles[dims[i]], t)
    if not counted:
        return 0

    def largest(static: tuple[int, ...], operands) -> list[int]:
        """Each dim's extent or stride, or the largest its dynamic operand may be."""
        out = []
        for s, v in zip(static, dynamic_operands(static, operands)):
            upper = tas.aa.fact(v).upper if v is not None and tas is not None else None
            out.append(abs(s) if v is None else upper if upper is not None else I32_MAX)
        return out

    shapes, strides = largest(shape_t.shape, view.dynamicShape), largest(shape_t.strides, view.dynamicStrides)
    offset = sum((s - 1 + t) * d for s, t, d in zip(shapes, tiles, strides))
    return min(64, offset.bit_length() + 1)


def _memory_remarks(fn: Function, op: Operation, tas, gpu_name: Optional[str]) -> Iterable[Remark]:
    """As NVIDIA's tool reports a view load or store: the instruction selected (TMA, with
    its box innermost first, or a global-memory load; a store is reported only when TMA
    takes it), and on archs with TMA why a view access does not use it, after its source
    location."""
    what = "Load" if is_plain_load(op) else "Store"
    box = _tma_box(tas, op)
    if box is not None:
        yield Remark(Kind.PASSED, Category.MEMORY, f"RemarkMemory{what}InstructionSelected",
                     f"{what} instruction selected", fn.name, op.loc,
                     [("Instruction", f"TMA {what} instruction"), ("Shape", str(list(box)))])
        return
    copied = _copied_async(tas, op)
    if what == "Load":
        yield Remark(Kind.PASSED, Category.MEMORY, "RemarkMemoryLoadInstructionSelected", "Load instruction selected",
                     fn.name, op.loc, [("Instruction", "Ldgsts instruction" if copied else
                                        "Global-memory load instruction")])
    if copied or not gpu_name or tas is None:
        return
    from .lower.tma import MIN_ARCH, tma_check  # noqa: PLC0415

    if int(gpu_name[3:]) < MIN_ARCH:
        return
    found = tma_check(tas.aa, op, gpu_name)
    reason = tas.tma_dropped.get(op) or (found if isinstance(found, str) else None)
    if not reason:              # no TMA candidate, or TMA could copy it but staging would not pay
        return
    where = _loc_of(op.loc)
    if where is not None:
        reason = f'loc("{where[0]}":{where[1]}:{where[2]}): {reason}'
    yield Remark(Kind.FAILED, Category.MEMORY, f"RemarkMemoryTma{what}Failed", f"Failed to select TMA {what.lower()} "
                 "instruction", fn.name, op.loc, [("Reason", reason)])


def _copied_async(tas, op: Operation) -> bool:
    """Is ``op`` a load a ``cp.async`` ring copies (a pipelined K loop's, an attention
    loop's, a streamed loop's): NVIDIA's remark calls that an LDGSTS instruction."""
    from .lower.attention_pipeline import AttentionPlan  # noqa: PLC0415
    from .lower.software_pipeline import PipelinePlan  # noqa: PLC0415
    from .lower.stream_pipeline import StreamPlan  # noqa: PLC0415

    plan = tas.pipelined.get(op) if tas is not None else None
    return isinstance(plan, (PipelinePlan, AttentionPlan, StreamPlan)) and op in plan.loads


def _tma_box(tas, op: Operation) -> Optional[tuple[int, ...]]:
    """The box (innermost dim first) of the TMA copies of ``op``, or None: a TMA load or
    store of ``lower.tma``, or a load a TMA ring copies."""
    from .lower.attention_tma import AttentionRingPlan  # noqa: PLC0415
    from .lower.tma_ring import RingPlan  # noqa: PLC0415

    if tas is None:
        return None
    if op in tas.tma:
        return tuple(reversed(tas.tma[op].box))
    plan = tas.pipelined.get(op)
    if isinstance(plan, RingPlan) and op in plan.loads:
        return tuple(reversed(plan.box[plan.loads.index(op)]))
    if isinstance(plan, AttentionRingPlan):
        for tile in (*plan.tiles, plan.q):
            if tile is not None and tile.load is op:
                return tuple(reversed(tile.box))
    return None


def _instruction_shape(tas, op: Operation) -> tuple[int, int, int]:
    """(M, N, K) of one tensor-core instruction of ``op``: a ``tcgen05.mma`` of the tile's
    rows (64 or 128) and columns, a ``wgmma`` m64nNk covering up to 256 of the tile's
    columns, or the ``mma.sync`` form's m{m}n8k{k}."""
    from .lower.mma_forms import WGMMA_MAX_N, tcgen05_rows  # noqa: PLC0415

    form = tas.tensor_cores[op]
    if form.tcgen05:
        return tcgen05_rows(op), op.result.type.shape[-1], form.k
    if form.warpgroup:
        return 64, min(op.result.type.shape[-1], WGMMA_MAX_N), form.k
    return form.m, 8, form.k


def _forwarding_remarks(fn: Function, op: Operation, tas) -> Iterable[Remark]:
    """A load that reads an earlier loop's registers (lower/forwarding.py), or why not."""
    if tas is not None and op in tas.forwarded:
        yield Remark(Kind.PASSED, Category.MEMORY, "RemarkLoadForwarded",
                     "Load reads the tiles an earlier loop loaded, from registers", fn.name, op.loc,
                     [("Trips", str(tas.forwarded[op].trips))])
    elif tas is not None and op in tas.forward_refused:
        yield Remark(Kind.MISSED, Category.MEMORY, "RemarkLoadForwardingFailed",
                     "Load not forwarded from an earlier loop's registers", fn.name, op.loc,
                     [("Reason", tas.forward_refused[op])])


def selected(remarks: Iterable[Remark], enabled: dict[Kind, set[Category]]) -> list[Remark]:
    return [r for r in remarks if r.category in enabled.get(r.kind, set())]


def enabled_from_options(options: Iterable[tuple[str, str]]) -> dict[Kind, set[Category]]:
    """``(option, category)`` pairs, e.g. ``("remarks", "all")``, ``("remarks_missed", "memory")``."""
    enabled: dict[Kind, set[Category]] = {k: set() for k in Kind}
    for option, value in options:
        cats = set(Category) if value == "all" else {c for c in Category if c.option == value}
        kinds = list(Kind) if option == "remarks" else [k for k in Kind if option == f"remarks_{k.word}" or
                                                      (k is Kind.FAILED and option == "remarks_failed")]
        for k in kinds:
            enabled[k] = set() if value == "none" else enabled[k] | cats
    return enabled


def _yaml_str(s: str) -> str:
    needs_quotes = any(c in s for c in ":#'\"{}[],&*!|>%@`") or s != s.strip()
    return "'" + s.replace("'", "''") + "'" if needs_quotes else s


def to_yaml(remarks: list[Remark]) -> str:
    parts = []
    for i, r in enumerate(remarks, 1):
        lines = [f"--- !{r.kind.yaml_tag}", f"Pass:            {r.category.pass_name}",
                 f"Name:            {r.name}"]
        loc = _loc_of(r.loc)
        if loc:
            file = "'" + loc[0].replace("'", "''") + "'"
            lines.append(f"DebugLoc:        {{ File: {file}, Line: {loc[1]}, Column: {loc[2]} }}")
        lines.append(f"Function:        {r.function}")
        lines.append("Args:")
        lines.append(f"  - RemarkId:    {i}")
        lines.append(f"  - Remark:      {_yaml_str(r.message)}")
        for key, value in r.args:
            lines.append(f"  - {key}: {' ' * max(1, 11 - len(key))}{_yaml_str(value)}")
        lines.append("...")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


def to_command_line(remarks: list[Remark]) -> str:
    out = []
    by_function: dict[str, list[Remark]] = {}
    for r in remarks:
        by_function.setdefault(r.function, []).append(r)
    for function, rs in by_function.items():
        out.append(f"in function: {function}:\n")
        by_cat: dict[Category, list[Remark]] = {}
        for r in rs:
            by_cat.setdefault(r.category, []).append(r)
        for cat, group in by_cat.items():
            out.append(f"\n  category: {cat.pass_name}\n")
            for r in group:
                out.append(f"    remark[{r.kind.word}]: {r.message}\n")
                loc = _loc_of(r.loc)
                if loc:
                    out.append(f'      --> "{loc[0]}":{loc[1]}:{loc[2]}\n')
                out.append("       |\n")
                out.append(f"       = name: {r.name}\n")
                for key, value in r.args:
                    label = "reason" if key == "Reason" else "note"
                    out.append(f"       = {label}: {value if label == 'reason' else f'{key} = {value}'}\n")
                out.append("\n")
    return "".join(out)
