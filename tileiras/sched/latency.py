"""The latency model: two numbers per op for the modulo scheduler.

For every *op class* (``OpClass``: a coarse grouping of ops by the hardware work they
do, which each op declares with its ``Latency`` trait in ``tile/``) and every
*architecture family* the model gives

* the **result latency**: cycles from the op's issue until a dependent op may
  issue, and
* the **pipe occupancy**: cycles during which the op holds each pipe it uses
  (a pipe is a functional-unit class: ``Pipe``), so that no other op can be
  issued to that pipe in those cycles.

Both are for one warp executing one *instruction* of the class.  A Tile IR op
works on a whole tile, so it expands to ``work`` instructions per warp (see
``sched.ddg.work_of``); ``LatencyModel.cost(op_class, work)`` scales the numbers:
the instructions issue back to back on the pipe, so the occupancy is
``work`` times the per-instruction occupancy and the result is ready
``(work - 1) * issue + latency`` cycles after the first issue.

Where the numbers come from.  They are orders of magnitude taken from the public
microbenchmark literature, not measurements of ours, and they are meant to rank
ops (a global load is ~100x an add, a transcendental ~5x, an mma ~8x), not to
predict cycle counts:

* Jia, Maggioni, Staiger, Scarpazza, "Dissecting the NVIDIA Volta GPU
  Architecture via Microbenchmarking" (2018) and the Turing follow-up (2019):
  dependent FP32/INT32 ALU ops ~4 cycles, MUFU (SFU) ~15-20 cycles, shared memory
  ~20-30 cycles, L2 hits ~200 cycles, DRAM ~400-500 cycles.
* Abdelkhalik, Arafa, Santhi, Badawy, "Demystifying the Nvidia Ampere
  Architecture through Microbenchmarking and Instruction-level Analysis" (2022):
  A100 FP32 add/FMA ~4 cycles, ``mma.sync`` m16n8k16 ~32 cycles, global memory
  ~300-500 cycles.
* Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture"
  (2024): H100 similar ALU and ``mma.sync`` latencies, global memory ~450-500
  cycles, twice A100's dense tensor throughput per SM; ``wgmma`` ~100-200 cycles
  from issue to accumulator by shape (128 here), asynchronous copies (``cp.async``,
  TMA) as slow as loads but leaving the warp free until their wait.
* Throughputs (hence occupancies) follow the CUDA C Programming Guide's
  "arithmetic instructions" table: per SM sub-partition 16 FP32 lanes on
  sm_80 (32 on sm_86+, sm_90, sm_100), 16 INT32 lanes, 4 SFU lanes; so a warp
  instruction holds the FMA pipe 2 (or 1) cycles, the SFU pipe 8 cycles.

The model is a plain frozen value passed to the scheduler as an argument; tests
build their own tables.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from ..record import record
from ..tile.traits import OpClass, latency_class


class Pipe(enum.Enum):
    """Functional-unit classes of an SM sub-partition."""

    ALU = "alu"            # integer and logic, moves, conversions
    FMA = "fma"            # FP32 add/mul/fma, integer multiply (IMAD)
    SFU = "sfu"            # transcendentals (MUFU)
    LSU = "lsu"            # global memory (loads, stores, atomics)
    SHARED = "shared"      # shared memory and shuffles (cross-thread exchange)
    TENSOR = "tensor"      # tensor cores (mma)
    BARRIER = "barrier"    # CTA-wide barriers and fences


class ArchFamily(enum.Enum):
    AMPERE = "ampere"        # sm_80..sm_89
    HOPPER = "hopper"        # sm_90
    BLACKWELL = "blackwell"  # sm_100 and later


def arch_family(arch: int) -> ArchFamily:
    """``80`` -> AMPERE, ``90`` -> HOPPER, ``100``/``120`` -> BLACKWELL."""
    if arch < 90:
        return ArchFamily.AMPERE
    if arch < 100:
        return ArchFamily.HOPPER
    return ArchFamily.BLACKWELL


@record(frozen=True)
class OpCost:
    """One instruction of a class: cycles until the result, cycles held per pipe."""

    latency: int
    occupancy: tuple[tuple[Pipe, int], ...] = ()

    def __post_init__(self) -> None:
        assert self.latency >= 0 and all(c >= 0 for _, c in self.occupancy)

    @property
    def issue(self) -> int:
        """Cycles between two back-to-back instructions of this class (their longest pipe hold)."""
        return max((c for _, c in self.occupancy), default=0)

    def scaled(self, work: int) -> OpCost:
        """``work`` instructions issued back to back."""
        if work <= 1:
            return self
        return OpCost(self.latency + (work - 1) * self.issue,
                      tuple((p, c * work) for p, c in self.occupancy))

    def pipe_cycles(self, pipe: Pipe) -> int:
        return sum(c for p, c in self.occupancy if p is pipe)


@record(frozen=True)
class LatencyModel:
    """Per op class, the cost of one instruction; per pipe, how many ops it accepts a cycle."""

    name: str
    costs: Mapping[OpClass, OpCost]
    capacity: Mapping[Pipe, int]

    def cost(self, op_class: OpClass, work: int = 1) -> OpCost:
        return self.costs[op_class].scaled(work)

    def capacity_of(self, pipe: Pipe) -> int:
        return self.capacity.get(pipe, 1)

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted((k.value, v) for k, v in self.costs.items())),
                     tuple(sorted((k.value, v) for k, v in self.capacity.items()))))


def _costs(fma_issue: int, mma_issue: int, dram: int) -> Mapping[OpClass, OpCost]:
    P = Pipe
    return MappingProxyType({
        OpClass.FREE: OpCost(0),
        OpClass.MOVE: OpCost(2, ((P.ALU, 1),)),
        OpClass.INT: OpCost(4, ((P.ALU, 2),)),
        OpClass.INT_MUL: OpCost(5, ((P.FMA, 2),)),
        OpClass.INT_DIV: OpCost(40, ((P.ALU, 10), (P.FMA, 10))),
        OpClass.FLOAT: OpCost(4, ((P.FMA, fma_issue),)),
        OpClass.CONVERT: OpCost(6, ((P.ALU, 2),)),
        OpClass.TRANSCENDENTAL: OpCost(20, ((P.SFU, 8), (P.FMA, fma_issue))),
        OpClass.FLOAT_DIV: OpCost(40, ((P.SFU, 8), (P.FMA, 8 * fma_issue))),
        OpClass.REDUCE: OpCost(150, ((P.SHARED, 10), (P.BARRIER, 1))),
        OpClass.GLOBAL_LOAD: OpCost(dram, ((P.LSU, 4),)),
        OpClass.GLOBAL_STORE: OpCost(dram, ((P.LSU, 4),)),
        OpClass.ATOMIC: OpCost(dram + 100, ((P.LSU, 8),)),
        # the copy's data is in shared memory a DRAM latency later; the warp goes on meanwhile
        OpClass.ASYNC_COPY: OpCost(dram, ((P.LSU, 4),)),
        OpClass.ASYNC_WAIT: OpCost(20, ((P.BARRIER, 1),)),
        OpClass.MMA: OpCost(32, ((P.TENSOR, mma_issue),)),
        # one m64nNk16 wgmma of a warp group is four warps' m16n8k16 steps per 8 columns
        OpClass.WGMMA: OpCost(128, ((P.TENSOR, 4 * mma_issue),)),
        OpClass.MMA_FMA: OpCost(4, ((P.FMA, fma_issue),)),
        OpClass.BARRIER: OpCost(20, ((P.BARRIER, 1),)),
        OpClass.PRINT: OpCost(2000, ((P.LSU, 100), (P.BARRIER, 1))),
        OpClass.CONTROL: OpCost(0),
    })


_UNIT_CAPACITY = MappingProxyType({p: 1 for p in Pipe})

#: sm_80: 16 FP32 lanes per sub-partition (2 cycles a warp), m16n8k16 every 8 cycles.
AMPERE = LatencyModel("ampere", _costs(fma_issue=2, mma_issue=8, dram=450), _UNIT_CAPACITY)
#: sm_90: 32 FP32 lanes, twice A100's tensor rate per SM.
HOPPER = LatencyModel("hopper", _costs(fma_issue=1, mma_issue=4, dram=480), _UNIT_CAPACITY)
#: sm_100+: ``mma.sync`` runs at about Hopper's rate (tcgen05 is not modelled).
BLACKWELL = LatencyModel("blackwell", _costs(fma_issue=1, mma_issue=4, dram=500), _UNIT_CAPACITY)

MODELS: Mapping[ArchFamily, LatencyModel] = MappingProxyType({
    ArchFamily.AMPERE: AMPERE, ArchFamily.HOPPER: HOPPER, ArchFamily.BLACKWELL: BLACKWELL})


def model_for(arch: int) -> LatencyModel:
    """The model of an architecture number (``90`` for sm_90)."""
    return MODELS[arch_family(arch)]


# -- op classes ---------------------------------------------------------------------------
def classify(op: object) -> OpClass:
    """The latency model's class of an op: the class its ``Latency`` trait declares."""
    op_class = latency_class(op) if hasattr(op, "definition") else None
    if op_class is None:
        raise ValueError(f"the latency model has no class for op '{getattr(op, 'name', op)}'")
    return op_class
