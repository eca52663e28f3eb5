"""``launch()``: run one kernel of a PTX module over a grid, with numpy arrays as memory."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np

from . import ops  # noqa: F401  (registers every instruction handler)
from .machine import Batch, Deadlock, KernelTrap, StepLimit
from .memory import GLOBAL_BASE, GlobalMemory, MemoryFault
from .parser import parse_ptx
from .program import Program, compile_program
from .traffic import Traffic
from .weak import BURST, WeakMemory
from ..interp.arraylist import ArrayList
from ..interp.values import is_nibble_dtype, pack_nibbles, unpack_nibbles
from .ptxtypes import BF16, TYPES

DEFAULT_BATCH_THREADS = 8192
DEFAULT_MAX_STEPS = 20_000_000


@dataclass
class TrapInfo:
    kind: str            # "trap", "assert", "memory", "deadlock", "step-limit", "unsupported"
    message: str
    detail: dict = field(default_factory=dict)


@dataclass
class PrintfRecord:
    ctaid: tuple
    tid: tuple
    text: str


@dataclass
class EmulationResult:
    kernel: str
    grid: tuple
    block: tuple
    cluster: tuple
    printf: list = field(default_factory=list)       # PrintfRecord, in execution order
    asserts: list = field(default_factory=list)      # dicts: message, file, line, function, ...
    trap: Optional[TrapInfo] = None
    instruction_counts: collections.Counter = field(default_factory=collections.Counter)
    steps: int = 0
    traffic: Optional[Traffic] = None                # launch(..., traffic=True): traffic.py

    @property
    def output(self) -> str:
        return "".join(r.text for r in self.printf)

    @property
    def ok(self) -> bool:
        return self.trap is None

    @property
    def thread_instructions(self) -> int:
        return sum(self.instruction_counts.values())

    def check(self) -> "EmulationResult":
        """Raise ``EmulationError`` if the kernel trapped, asserted, faulted or deadlocked."""
        if self.trap is not None:
            raise EmulationError(f"{self.trap.kind}: {self.trap.message}")
        return self


class EmulationError(RuntimeError):
    pass


def dim3(value: Any) -> tuple:
    if isinstance(value, (int, np.integer)):
        return (int(value), 1, 1)
    t = tuple(int(v) for v in value)
    return (t + (1, 1, 1))[:3]


@lru_cache(maxsize=32)
def load_program(ptx: str, kernel: Optional[str]) -> Program:
    return compile_program(parse_ptx(ptx), kernel)


class Launch:
    """State shared by every batch of one launch: global memory, params, geometry, output."""

    def __init__(self, prog: Program, grid: tuple, block: tuple, cluster: tuple, smem_bytes: int):
        self.prog = prog
        self.grid = grid                      # in CTAs
        self.block = block
        self.cluster = cluster
        self.cta_per_cluster = int(np.prod(cluster))
        self.gmem = GlobalMemory()
        self.dynamic_smem = smem_bytes
        dyn_off = -(-prog.shared.size // 128) * 128 if prog.dynamic_shared else prog.shared.size
        self.dynamic_smem_offset = dyn_off
        for var in prog.dynamic_shared:
            prog.shared.offsets[var.name] = dyn_off
            prog.shared.variables[var.name] = var
        self.smem_size = dyn_off + smem_bytes
        self.params = np.zeros(max(prog.params.size, 1), np.uint8)
        self.printf: list = []
        self.asserts: list = []
        self.arrays: list = []
        self.traffic: Optional[Traffic] = None
        self.check_races = True

    def allocate_globals(self) -> None:
        layout = self.prog.globals
        base = self.gmem.allocate("module globals", layout.size)
        assert base == GLOBAL_BASE
        for name, off in layout.offsets.items():
            var = layout.variables[name]
            if var.init is not None:
                self.gmem.write(base + off, var.init)
            for byte_off, sym in var.init_syms:
                target = layout.offsets.get(sym.name)
                if target is not None:
                    value = base + target + sym.offset
                    self.gmem.write(base + off + byte_off, value.to_bytes(8, "little"))

    def set_params(self, args: Sequence[Any]) -> None:
        """The user's arguments; ``.hidden`` parameters (TMA tensor maps) come after them and
        are filled by ``fill_hidden_params``."""
        fn = self.prog.function
        user = [v for v in fn.params if not v.hidden]
        if len(args) != len(user):
            raise TypeError(f"kernel '{fn.name}' takes {len(user)} parameters, got {len(args)}")
        for var, arg in zip(user, args):
            off = self.prog.params.offsets[var.name]
            payload = self.param_bytes(var, arg)
            self.params[off:off + len(payload)] = np.frombuffer(payload, np.uint8)

    def place(self, arr: np.ndarray, name: str) -> int:
        """Copy ``arr`` into global memory (read back by ``copy_back``); its address.  A
        contiguous array keeps its own layout (C or F order: the strides passed with it
        describe it), any other is laid out in C order."""
        data = arr.T if arr.flags.f_contiguous and not arr.flags.c_contiguous else np.ascontiguousarray(arr)
        if is_nibble_dtype(data.dtype):  # 4-bit elements: two a byte (spec 5.2.2); the
            packed = pack_nibbles(np.ascontiguousarray(arr))   # allocation ends on a 32-bit word, as
            data = np.zeros(-(-packed.size // 4) * 4, np.uint8)  # cudaMalloc's do (nibble stores use
            data[:packed.size] = packed   # atomics on the word that holds the byte)
        addr = self.gmem.allocate(name, data.nbytes)
        self.gmem.write(addr, data.tobytes())
        self.arrays.append((arr, addr))
        return addr

    def param_bytes(self, var, arg) -> bytes:
        if isinstance(arg, np.ndarray) and arg.ndim > 0:
            return self.place(arg, f"arg:{var.name}").to_bytes(8, "little")
        if isinstance(arg, ArrayList):  # the members, then the table of their addresses
            addresses = [self.place(a, f"arg:{var.name}[{k}]") for k, a in enumerate(arg.arrays)]
            table = arg.table(addresses)
            addr = self.gmem.allocate(f"arg:{var.name} table", table.nbytes)
            self.gmem.write(addr, table.tobytes())
            return addr.to_bytes(8, "little")
        ty = TYPES[var.type_name]
        if ty.is_float:
            return np.array(arg).astype(ty.dtype).tobytes()
        if var.type_name == "b8" and var.size == 2 and not isinstance(arg, (int, np.integer)):
            value = np.asarray(arg)
            if value.dtype not in (np.dtype(np.float16), BF16):
                value = value.astype(np.float16)
            return value.tobytes()
        if isinstance(arg, (np.generic, np.ndarray)) and np.asarray(arg).dtype.kind == "f":
            return np.asarray(arg).tobytes()[:var.size]
        width = max(var.size, 1)
        return (int(arg) % (1 << (8 * width))).to_bytes(width, "little")

    def fill_hidden_params(self, host_object: Optional[bytes]) -> None:
        """Run the ``.nv.host`` callback NVIDIA's tileiras wrote for the kernel on its
        parameter bank, as the CUDA driver does at launch, and copy the tensor maps it writes
        into the hidden parameters (``nvhost.py``)."""
        fn = self.prog.function
        hidden = [v for v in fn.params if v.hidden]
        if not hidden:
            return
        if host_object is None:
            raise EmulationError(f"kernel '{fn.name}' has {len(hidden)} hidden parameters (tensor "
                                 f"maps): launch it with the cubin's .nv.host object")
        from .nvhost import bank_offsets, load_host_object

        arch = next((t for t in self.prog.module.target if t.startswith("sm_")), "sm_90")
        bank, size = bank_offsets(fn.params, arch)
        buf = np.zeros(size, np.uint8)
        for var in fn.params:
            at, here = bank[var.name], self.prog.params.offsets[var.name]
            buf[at:at + var.size] = self.params[here:here + var.size]
        host = load_host_object(host_object)
        workspace = self.gmem.allocate("tensor-map workspace", host.workspace_bytes) if host.workspace_bytes else 0
        host.on_arguments_change(fn.name, buf, workspace)
        for var in hidden:
            at, here = bank[var.name], self.prog.params.offsets[var.name]
            self.params[here:here + var.size] = buf[at:at + var.size]

    def copy_back(self) -> None:
        for arr, addr in self.arrays:
            if is_nibble_dtype(arr.dtype):
                raw = self.gmem.read(addr, (arr.size + 1) // 2)
                arr[...] = unpack_nibbles(np.frombuffer(raw, np.uint8), arr.dtype, arr.shape)
                continue
            raw = self.gmem.read(addr, arr.nbytes)
            buffer = arr.T if arr.flags.f_contiguous and not arr.flags.c_contiguous else arr
            buffer[...] = np.frombuffer(raw, arr.dtype).reshape(buffer.shape)

    # -- output
    def thread_coords(self, batch: Batch, tid: int) -> tuple[tuple, tuple]:
        lt = int(batch.linear_tid[tid])
        bx, by, _ = self.block
        ctaid = tuple(int(v) for v in self.batch_coords[int(batch.cta_of[tid])])
        return ctaid, (lt % bx, (lt // bx) % by, lt // (bx * by))

    def describe_thread(self, batch: Batch, tid: int) -> str:
        ctaid, t = self.thread_coords(batch, tid)
        return f"block {list(ctaid)}, thread {list(t)}"

    def record_printf(self, batch: Batch, tid: int, text: str) -> None:
        ctaid, t = self.thread_coords(batch, tid)
        self.printf.append(PrintfRecord(ctaid, t, text))

    def record_assert(self, batch: Batch, tid: int, message: str, file: str, line: int,
                      function: str) -> None:
        ctaid, t = self.thread_coords(batch, tid)
        text = (f"{file}:{line}: {function}: block: [{ctaid[0]},{ctaid[1]},{ctaid[2]}], "
                f"thread: [{t[0]},{t[1]},{t[2]}] Assertion `{message}` failed.")
        self.asserts.append({"message": message, "file": file, "line": line, "function": function,
                             "ctaid": ctaid, "tid": t, "text": text})

    # -- geometry
    def cta_coords(self) -> np.ndarray:
        """(x, y, z) of every CTA, cluster by cluster (so batches hold whole clusters)."""
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster
        ranks = np.array([(x, y, z) for z in range(cz) for y in range(cy) for x in range(cx)],
                         np.int64)
        clusters = np.array([(x, y, z) for z in range(gz // cz) for y in range(gy // cy)
                             for x in range(gx // cx)], np.int64)
        coords = clusters[:, None, :] * np.array([cx, cy, cz]) + ranks[None, :, :]
        return coords.reshape(-1, 3)

    def special_values(self, batch: Batch, key: str) -> np.ndarray:
        name, _, axis = key.partition(".")
        k = "xyz".index(axis) if axis in ("x", "y", "z") else 0
        lt = batch.linear_tid
        bx, by, bz = self.block
        coords = self.batch_coords[batch.cta_of] if name.startswith(("ctaid", "cluster")) else None
        u = np.uint64
        if name == "tid":
            return ((lt % bx, (lt // bx) % by, lt // (bx * by))[k]).astype(u)
        if name == "ntid":
            return np.array(self.block[k], u)
        if name == "ctaid":
            return coords[:, k].astype(u)
        if name == "nctaid":
            return np.array(self.grid[k], u)
        if name == "clusterid":
            return (coords[:, k] // self.cluster[k]).astype(u)
        if name == "nclusterid":
            return np.array(self.grid[k] // self.cluster[k], u)
        if name == "cluster_ctaid":
            return (coords[:, k] % self.cluster[k]).astype(u)
        if name == "cluster_nctaid":
            return np.array(self.cluster[k], u)
        if name == "cluster_ctarank":
            cx, cy, _ = self.cluster
            c = coords % np.array(self.cluster)
            return (c[:, 0] + cx * (c[:, 1] + cy * c[:, 2])).astype(u)
        if name == "cluster_nctarank":
            return np.array(int(np.prod(self.cluster)), u)
        if name == "is_explicit_cluster":
            return np.array(int(np.prod(self.cluster)) > 1, u)
        if name == "laneid":
            return (lt % 32).astype(u)
        if name == "warpid":
            return (lt // 32).astype(u)
        if name == "nwarpid":
            return np.array(-(-batch.nthreads // 32), u)
        if name.startswith("lanemask_"):
            lane = (lt % 32).astype(u)
            one = u(1)
            masks = {"lanemask_eq": one << lane, "lanemask_lt": (one << lane) - one,
                     "lanemask_le": (one << (lane + one)) - one}
            masks["lanemask_gt"] = u(0xFFFFFFFF) & ~masks["lanemask_le"]
            masks["lanemask_ge"] = u(0xFFFFFFFF) & ~masks["lanemask_lt"]
            return masks[name] & u(0xFFFFFFFF)
        if name in ("clock", "clock64"):
            return np.array(batch.steps, u)
        if name in ("globaltimer", "globaltimer_lo", "globaltimer_hi"):
            return np.array(batch.steps * 1000, u)      # 1 microsecond per step
        if name == "smid":
            return (batch.cta_of % 132).astype(u)
        if name == "nsmid":
            return np.array(132, u)
        if name == "perctamemoryoffset":  # no per-CTA memory area: kernels use their workspace
            return np.array(0, u)
        if name in ("dynamic_smem_size",):
            return np.array(self.dynamic_smem, u)
        if name in ("total_smem_size", "aggr_smem_size"):
            return np.array(self.smem_size, u)
        return np.array(0, u)


def launch(ptx: str, kernel: Optional[str], grid: Any, args: Sequence[Any], *,
           block: Any = None, cluster: Any = None, smem_bytes: int = 0,
           max_steps: int = DEFAULT_MAX_STEPS,
           batch_threads: int = DEFAULT_BATCH_THREADS, traffic: bool = False,
           interleave: Optional[int] = None, host_object: Optional[bytes] = None,
           races: bool = True, burst: bool = False) -> EmulationResult:
    """Emulate ``kernel`` of ``ptx`` over ``grid`` CTAs.

    ``args`` follow the kernel's ``.param`` list: numpy arrays for pointers (allocated in
    global memory; their contents are copied back after the launch), an ``ArrayList`` for
    the table pointer of a list parameter (its arrays placed as array arguments are, then
    the table of their addresses, shapes and strides), numbers for scalars.
    ``block`` defaults to ``.reqntid``; ``cluster`` to ``.reqnctapercluster`` (or 1x1x1).
    For kernels with ``.blocksareclusters``, ``grid`` counts clusters, as cuTile launches it.
    ``traffic``: count global-memory requests and sectors (``EmulationResult.traffic``).
    ``interleave``: a seed; every CTA runs in one batch, one CTA per step in the order the
    seed draws, each with its own weakly ordered view of global memory (``weak.py``), so
    missing acquire/release orderings between CTAs show up as stale reads; with ``burst``,
    the CTA drawn keeps running for ``weak.BURST`` steps on average (CTAs drift apart: a
    cluster's missing cross-CTA ordering of shared memory shows up as early writes).
    ``host_object``: the cubin's ``.nv.host`` section (NVIDIA's x86-64 host code), whose
    callback fills the kernel's hidden tensor-map parameters from ``args``.
    ``races``: run the shared-memory race detector (``races.py``; a race traps with kind
    ``race``).  Asynchronous operations are always modelled (``asynchrony.py``: early
    uses of their results trap with kind ``async``).
    """
    prog = load_program(ptx, kernel)
    block = dim3(block) if block is not None else dim3(prog.reqntid or (1,))
    cluster = dim3(cluster) if cluster is not None else dim3(prog.cluster_dims or (1,))
    grid = dim3(grid)
    if prog.function.directives.get("blocksareclusters"):
        grid = tuple(g * c for g, c in zip(grid, cluster))
    if any(g % c for g, c in zip(grid, cluster)):
        raise ValueError(f"grid {grid} is not a multiple of the cluster shape {cluster}")
    run = Launch(prog, grid, block, cluster, smem_bytes)
    run.check_races = races
    run.allocate_globals()
    run.set_params(args)
    run.fill_hidden_params(host_object)
    result = EmulationResult(prog.function.name, grid, block, cluster)
    if traffic:
        run.traffic = result.traffic = Traffic()
    coords = run.cta_coords()
    per_cluster = int(np.prod(cluster))
    nthreads = int(np.prod(block))
    clusters_per_batch = max(1, batch_threads // max(nthreads * per_cluster, 1))
    step = clusters_per_batch * per_cluster if interleave is None else len(coords)
    issued = np.zeros(len(prog.code), np.int64)
    try:
        for start in range(0, len(coords), step):
            run.batch_coords = coords[start:start + step]
            batch = Batch(prog, run, np.arange(start, min(start + step, len(coords))))
            if interleave is not None:
                batch.weak = WeakMemory(run.gmem.data, batch.ncta, interleave, BURST if burst else 1)
            try:
                with np.errstate(all="ignore"):
                    batch.run(max_steps)
            finally:
                if batch.weak is not None:    # a trap leaves stores unpublished
                    for cta in range(batch.ncta):
                        batch.weak.publish(cta)
                issued += batch.issued
                result.steps += batch.steps
    except KernelTrap as e:
        result.trap = TrapInfo(e.kind, str(e), e.detail)
    except MemoryFault as e:
        result.trap = TrapInfo("memory", str(e))
    except Deadlock as e:
        result.trap = TrapInfo("deadlock", str(e))
    except StepLimit as e:
        result.trap = TrapInfo("step-limit", str(e))
    run.copy_back()
    result.printf = run.printf
    result.asserts = run.asserts
    for pc in np.flatnonzero(issued):
        result.instruction_counts[prog.instructions[pc].opcode] += int(issued[pc])
    return result
