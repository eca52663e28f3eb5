"""What an op *is*: trait objects declared on the ``@tile_op`` classes.

Every stage asks these questions of an op (its memory effects, whether it is pure, a
terminator and of which parents, element-wise, cheap to compute again, its latency class)
through the queries at the bottom of this module, never through tables of op classes of
its own.  The traits follow MLIR's (``Pure``, ``NoMemoryEffect``, ``MemoryEffects<[MemRead,
MemWrite, MemAlloc]>`` on a resource, ``RecursiveMemoryEffects``, ``Terminator`` with
``ParentOneOf``, ``SingleBlockImplicitTerminator``, ``Elementwise``) and xDSL's irdl
traits (objects in an op's ``traits``); where cuda-tile's ``Ops.td`` declares one, ours
says the same.

``OpClass`` is the latency model's classification (``sched/latency.py`` gives each class
its cycles): it lives here so that every op can declare its class (``Latency``).
"""
from __future__ import annotations

import enum
from typing import Any, Iterable, Optional, TypeVar

from ..record import record


class OpClass(enum.Enum):
    """What the latency model distinguishes: a kind of hardware work, for the Tile IR ops
    and for the operations of the scheduled IR (an ``mma.sync`` and a ``wgmma``, a
    synchronous load and an asynchronous copy with its wait)."""

    FREE = "free"                    # views, constants, tokens, assumptions: no instruction
    MOVE = "move"                    # register moves and selects (broadcast, extract, select)
    INT = "int"                      # integer add/logic/compare/shift
    INT_MUL = "int_mul"              # integer multiply (IMAD on the FMA pipe)
    INT_DIV = "int_div"              # integer divide/remainder: an instruction sequence
    FLOAT = "float"                  # FP add/mul/fma/min/max/compare
    CONVERT = "convert"              # ftof, itof, ftoi
    TRANSCENDENTAL = "transcendental"  # exp, log, sin, tanh, rsqrt, ... (MUFU)
    FLOAT_DIV = "float_div"          # divf, sqrt, remf, pow: MUFU plus FMA refinement
    REDUCE = "reduce"                # reduce/scan: shuffles plus a shared-memory exchange
    GLOBAL_LOAD = "global_load"      # a synchronous load (ld.global): the value is waited for
    GLOBAL_STORE = "global_store"
    ATOMIC = "atomic"
    ASYNC_COPY = "async_copy"        # cp.async / TMA issue: global -> shared, no register result
    ASYNC_WAIT = "async_wait"        # cp.async.wait_group / mbarrier wait: where the copy's latency lands
    MMA = "mma"                      # mma.sync tiles (tensor cores, synchronous, one warp)
    WGMMA = "wgmma"                  # wgmma.mma_async (sm_90): a warp group, operands in shared memory
    MMA_FMA = "mma_fma"              # a matrix multiply on CUDA cores: a loop of FMAs
    BARRIER = "barrier"              # fences
    PRINT = "print"                  # device printf: a slow runtime call
    CONTROL = "control"              # a nested if/for/loop: cost from its body (see ddg)


class OpTrait:
    """Base of every trait; a trait is a frozen value (hashable, comparable)."""


# -- memory effects ------------------------------------------------------------------------
class EffectKind(enum.Enum):
    READ = "read"
    WRITE = "write"
    ALLOC = "alloc"


class Resource(enum.Enum):
    """What an effect acts on."""

    GLOBAL = "global"        # global memory, through pointer tiles and views
    MULTICAST = "multicast"  # a multimem view: the global memory of every GPU of a multicast group
    OUTPUT = "output"        # the device printf buffer (token-ordered like memory)
    LOCAL = "local"          # memory an ``alloca`` reserves
    EXECUTION = "execution"  # the kernel's progress: traps, fences, grid dependencies (no data)


#: Resources that hold data and whose accesses tokens order (what TileAA follows).
DATA_RESOURCES = (Resource.GLOBAL, Resource.MULTICAST, Resource.OUTPUT)
#: Memory other threads (and grids) read and write.
SHARED_MEMORY_RESOURCES = (Resource.GLOBAL, Resource.MULTICAST)


@record(frozen=True)
class Effect:
    kind: EffectKind
    resource: Resource


def Read(resource: Resource) -> Effect:  # noqa: N802 - reads like MLIR's MemRead
    return Effect(EffectKind.READ, resource)


def Write(resource: Resource) -> Effect:  # noqa: N802
    return Effect(EffectKind.WRITE, resource)


def Alloc(resource: Resource) -> Effect:  # noqa: N802
    return Effect(EffectKind.ALLOC, resource)


@record(frozen=True)
class MemoryEffects(OpTrait):
    """The op's effects (MLIR ``MemoryEffects<[...]>``); none at all is ``NoMemoryEffect``."""

    effects: tuple[Effect, ...] = ()


@record(frozen=True)
class NoMemoryEffect(MemoryEffects):
    """No effect, but not speculatable either (``divi`` may trap): MLIR ``NoMemoryEffect``."""


@record(frozen=True)
class Pure(NoMemoryEffect):
    """No effect and always speculatable (MLIR ``Pure``)."""


@record(frozen=True)
class RecursiveMemoryEffects(OpTrait):
    """The op's effects are those of the ops in its regions (``reduce``, ``scan``)."""


# -- structure -----------------------------------------------------------------------------
#: The parent name a terminator gives for a function body.
FUNCTION_BODY = "entry"


@record(frozen=True)
class Terminator(OpTrait):
    """Ends a block (MLIR ``Terminator`` + ``ParentOneOf``): ``parents`` are the mnemonics
    of the ops whose regions it may end, ``entry`` for a function body."""

    parents: tuple[str, ...]


@record(frozen=True)
class ImplicitTerminator(OpTrait):
    """Each region is one block, ending with a terminator whose ``parents`` name this op;
    ``name`` is the one the text form leaves out (MLIR ``SingleBlockImplicitTerminator``)."""

    name: str


# -- computation ---------------------------------------------------------------------------
@record(frozen=True)
class Elementwise(OpTrait):
    """Each result element is computed from the operand elements at the same position
    (operands of another shape, such as scalars, apply to every element)."""


@record(frozen=True)
class Contraction(OpTrait):
    """A matrix multiply-accumulate: ``result = acc + lhs @ rhs`` over the last two dims,
    operands ``(lhs, rhs, acc, ...)``."""


@record(frozen=True)
class Recomputable(OpTrait):
    """Cheap enough to compute again where a value is needed in another layout instead of
    keeping it live or moving it through shared memory; ``free``: no instruction of its own
    (it relabels or copies registers)."""

    free: bool = False


@record(frozen=True)
class Latency(OpTrait):
    """The op's class in the latency model (``sched/latency.py`` has the cycles)."""

    op_class: OpClass


# -- queries ---------------------------------------------------------------------------------
T_ = TypeVar("T_", bound=OpTrait)


def _traits(op_or_cls: Any) -> tuple[OpTrait, ...]:
    return op_or_cls.definition.traits


_FOUND: dict = {}


def find_trait(op_or_cls: Any, kind: type[T_]) -> Optional[T_]:
    """The op's trait of type ``kind`` (a subclass counts), or None.  Answers are kept per
    (definition, kind): every stage asks these questions of every op, and a definition's
    traits never change once registered."""
    definition = op_or_cls.definition
    key = (id(definition), kind)
    entry = _FOUND.get(key)
    if entry is None or entry[0] is not definition:  # the entry holds its definition: ids stay unique
        entry = _FOUND[key] = (definition, next((t for t in definition.traits if isinstance(t, kind)), None))
    return entry[1]


def has_trait(op_or_cls: Any, kind: type[OpTrait]) -> bool:
    return find_trait(op_or_cls, kind) is not None


def is_pure(op_or_cls: Any) -> bool:
    return has_trait(op_or_cls, Pure)


def is_terminator(op_or_cls: Any) -> bool:
    return has_trait(op_or_cls, Terminator)


def is_elementwise(op_or_cls: Any) -> bool:
    return has_trait(op_or_cls, Elementwise)


def is_contraction(op_or_cls: Any) -> bool:
    return has_trait(op_or_cls, Contraction)


def is_recomputable(op_or_cls: Any) -> bool:
    return has_trait(op_or_cls, Recomputable)


def is_free(op_or_cls: Any) -> bool:
    """Recomputable at no instruction of its own."""
    r = find_trait(op_or_cls, Recomputable)
    return r is not None and r.free


def latency_class(op_or_cls: Any) -> Optional[OpClass]:
    t = find_trait(op_or_cls, Latency)
    return None if t is None else t.op_class


def declared_effects(op_or_cls: Any) -> Optional[tuple[Effect, ...]]:
    """The effects the op's class declares; None when unknown (no effect trait, or
    recursive ones, which depend on the op's regions: see ``effects_of``)."""
    t = find_trait(op_or_cls, MemoryEffects)
    return None if t is None else t.effects


def effects_of(op: Any) -> Optional[tuple[Effect, ...]]:
    """The effects of one op, those of the ops in its regions for ``RecursiveMemoryEffects``
    ops; None when some effect is unknown (MLIR then assumes any effect)."""
    if not has_trait(op, RecursiveMemoryEffects):
        return declared_effects(op)
    out: list[Effect] = []
    for inner in (o for region in op.regions for block in region.blocks for o in block.ops):
        effects = effects_of(inner)
        if effects is None:
            return None
        out += effects
    return tuple(dict.fromkeys(out))


def _has_effect(op_or_cls: Any, kind: EffectKind, resources: Iterable[Resource]) -> bool:
    effects = declared_effects(op_or_cls) or ()
    wanted = tuple(resources)
    return any(e.kind is kind and e.resource in wanted for e in effects)


def reads(op_or_cls: Any, *resources: Resource) -> bool:
    return _has_effect(op_or_cls, EffectKind.READ, resources or tuple(Resource))


def writes(op_or_cls: Any, *resources: Resource) -> bool:
    return _has_effect(op_or_cls, EffectKind.WRITE, resources or tuple(Resource))


def touches(op_or_cls: Any, *resources: Resource) -> bool:
    """Any effect on one of ``resources``."""
    effects = declared_effects(op_or_cls) or ()
    return any(e.resource in resources for e in effects)


def only_effect(op_or_cls: Any, effect: Effect) -> bool:
    """Is ``effect`` the op's one declared effect (a plain load reads global memory and
    does nothing else; an atomic also writes it)?"""
    return declared_effects(op_or_cls) == (effect,)


def is_plain_load(op_or_cls: Any) -> bool:
    """A load from global memory that does nothing else (``load_ptr``, ``load_view``; not a
    multimem load-reduce, not an atomic)."""
    return only_effect(op_or_cls, Read(Resource.GLOBAL))


def is_plain_store(op_or_cls: Any) -> bool:
    """A store to global memory that reads nothing (``store_ptr``, ``store_view``; no atomic)."""
    return only_effect(op_or_cls, Write(Resource.GLOBAL))


def is_trivially_dead_if_unused(op: Any) -> bool:
    """May the op go when nothing uses its results (MLIR ``wouldOpBeTriviallyDead``)?
    Not a terminator, every effect known and a read: pure ops, ``NoMemoryEffect`` ones,
    loads (whatever their ordering, as NVIDIA's tileiras drops them), and reductions
    whose combiners are pure.  Allocations are kept."""
    if is_terminator(op):
        return False
    effects = effects_of(op)
    return effects is not None and all(e.kind is EffectKind.READ for e in effects)


def check_traits(definition: Any) -> list[str]:
    """Problems with one op's trait set (none for a consistent one)."""
    traits = definition.traits
    problems = []
    kinds = [type(t) for t in traits]
    if len(set(kinds)) != len(kinds):
        problems.append("a trait is declared twice")
    effects = [t for t in traits if isinstance(t, (MemoryEffects, RecursiveMemoryEffects))]
    if len(effects) > 1:
        problems.append("more than one memory-effect trait")
    if any(isinstance(t, Pure) for t in traits) and definition.regions:
        problems.append("a pure op with regions (its effects are its regions': RecursiveMemoryEffects)")
    if any(isinstance(t, RecursiveMemoryEffects) for t in traits) and not definition.regions:
        problems.append("RecursiveMemoryEffects without regions")
    if any(isinstance(t, ImplicitTerminator) for t in traits) and not definition.regions:
        problems.append("an implicit terminator without regions")
    term = next((t for t in traits if isinstance(t, Terminator)), None)
    if term is not None and (not term.parents or definition.results):
        problems.append("a terminator needs parents and has no results")
    computes = any(isinstance(t, (Elementwise, Recomputable, Contraction)) for t in traits)
    if computes and not definition.results:
        problems.append("element-wise, recomputable and contraction ops compute results")
    effect_free = any(isinstance(t, NoMemoryEffect) for t in traits)
    if any(isinstance(t, Recomputable) for t in traits) and not effect_free:
        problems.append("a recomputable op must have no memory effect")
    return problems
