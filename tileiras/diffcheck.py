"""Check a kernel without a GPU: the reference interpreter against our compiled PTX.

    tileiras-diffcheck FILE.tileir [--gpu-name sm_90] [--extent 100] [--budget 1048576] [--grid 2,2,1]
                       [--nvidia NVIDIA.cubin|.ptx] [--interleave SEED [--burst]] [--device=gpu]

For every entry of FILE, inputs are synthesized from the IR: a pointer argument that
``make_tensor_view`` turns into a view gets an array whose shape and strides feed the
view's dynamic shape/stride arguments (``--extent`` elements along each dynamic dim, rounded
up to the divisors the bytecode assumes, fewer where an array would hold more than ``--budget``
elements); a pointer whose loaded words the kernel turns back into pointers (``int_to_ptr``:
a list parameter, grouped GEMM's ``As``) gets an ``ArrayList`` of ``LIST_LENGTH`` arrays shaped
for the views the kernel makes of them; other integer arguments get small values moved up to
the divisors and into the bounds assumed of them (``div_by<16>`` shapes passed as scalars),
floats 1.5.  The Tile IR interpreter
(``tileiras.interp``) gives the expected result; our pipeline compiles the module to
PTX and the PTX emulator (``tileiras.emulate``) runs it.  Integer results must match
exactly, floats within a tolerance (approximate PTX math against exactly rounded
reference math); asserts must fire in both or neither.  With ``--nvidia`` NVIDIA's PTX runs
on the same inputs whatever ours gave (give it NVIDIA's cubin, compiled with ``--lineinfo``,
where its kernels take hidden tensor maps or a tensor-map workspace: the cubin's ``.nv.host``
fills them).  CTAs that differ only along a grid axis the kernel never reads run once
(``distinct_grid``).

With ``--device=gpu`` the same inputs also run on the GPU (``tileiras.gpu``), our cubin
compiled for the device's architecture (``--gpu-name`` defaults to it): each entry reports
the GPU against the interpreter and the GPU against the emulator.  Without a CUDA driver that
is one line, ``error: no CUDA driver ...``, and exit status 1.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import ml_dtypes
import numpy as np

from .interp.arraylist import ArrayList, arrays_of, copy_arguments
from .interp.values import FNV8E5M3FNU
from .ir import types as T
from .ir.core import Function, Module, Value
from .tile import ops_control as CF
from .tile import ops_core as CORE
from .tile import ops_memory as MEM
from .tile.traits import is_pure

_DTYPES = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "tf32": np.float32, "f64": np.float64,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E8M0FNU": ml_dtypes.float8_e8m0fnu, "f4E2M1FN": ml_dtypes.float4_e2m1fn,
    "fnv8E5M3FNU": FNV8E5M3FNU,
}


def numpy_dtype(t: T.Type) -> Any:
    e = T.element_type(t)
    if isinstance(e, T.PointerType):
        e = e.pointee
    return _DTYPES.get(getattr(e, "name", ""), np.float32)


def random_array(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...], order: str = "C") -> np.ndarray:
    """Floats uniform in [-4, 4); integers distinct (gather/scatter indices must not
    repeat), a quarter of them negative."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        out = rng.integers(0, 2, shape).astype(dtype)
    elif dt.kind in "iu":
        n = int(np.prod(shape))
        values = rng.permutation(n) - n // 4
        if dt.kind == "u" or np.iinfo(dt).max < n:
            values = values % min(np.iinfo(dt).max, 100)
        out = values.reshape(shape).astype(dtype)
    elif dtype is ml_dtypes.float8_e8m0fnu:  # scales: powers of two around 1
        out = np.exp2(rng.integers(-4, 5, shape)).astype(dtype)
    elif dt == FNV8E5M3FNU:  # UE5M3 codes (no numpy float type): any code, NaN included
        out = rng.integers(0, 256, shape).astype(np.uint8).view(dt)
    else:
        out = rng.uniform(-4, 4, shape).astype(dtype)
    return np.asfortranarray(out) if order == "F" else out


def _through_assumes(fn: Function) -> dict[Value, Value]:
    """value -> the function argument it is an ``assume`` of."""
    origin: dict[Value, Value] = {a: a for a in fn.entry_block.args}
    for op in fn.walk():
        if isinstance(op, CF.AssumeOp) and op.value in origin:
            origin[op.result] = origin[op.value]
    return origin


#: Default ``budget``: elements an array may hold (4 MiB of f32).
BUDGET = 1 << 20


#: Arrays in a synthesized list parameter (grouped GEMM: groups).
LIST_LENGTH = 3


def synthesize_args(fn: Function, rng: np.random.Generator, extent: int = 100,
                    budget: int = BUDGET) -> list[Any]:
    """Arguments for ``fn`` (arrays for pointers, ``ArrayList``s for the tables of list
    parameters, numbers for scalars).  Dynamic extents honour the bytecode's facts:
    ``extent`` rounded up to the divisor each one is assumed to have (``assume div_by<16>``),
    so strides of C-ordered arrays honour theirs too; arrays larger than ``budget`` elements
    get smaller dynamic extents (``choose_extents``)."""
    from .lower.tileaa import analyze

    origin = _through_assumes(fn)
    facts = analyze(fn)
    lists = list_parameters(fn)
    needs = unpadded_reach(fn, facts, budget)
    args: dict[Value, Any] = {}
    for op in fn.walk():
        if not isinstance(op, MEM.MakeTensorViewOp) or origin.get(op.base) is None:
            continue
        base = origin[op.base]
        t = op.result.type
        if base in lists:
            arr = args.setdefault(base, synthesize_list(rng, lists[base], facts, extent, budget))
            shape, strides = arr.shape, (arr.shape[1], 1)
        else:
            shape = choose_extents(t.shape, view_divisors(op, facts), extent, budget, needs.get(op.result))
            order = "F" if t.rank > 1 and t.strides[0] == 1 and t.strides[-1] != 1 else "C"
            arr = args.get(base)
            if not isinstance(arr, np.ndarray) or arr.shape != shape:
                arr = random_array(rng, numpy_dtype(t), shape, order)
                args[base] = arr
            strides = tuple(x // arr.itemsize for x in arr.strides)
        dyn_shape = iter(op.dynamicShape)
        for d, s in zip(shape, t.shape):
            if s == T.DYNAMIC:
                args.setdefault(origin.get(next(dyn_shape)), d)
        dyn_strides = iter(op.dynamicStrides)
        for st, s in zip(strides, t.strides):
            if s == T.DYNAMIC:
                args.setdefault(origin.get(next(dyn_strides)), int(st))
    out = []
    for a in fn.entry_block.args:
        if a in args:
            out.append(args[a])
        elif a in lists:
            out.append(synthesize_list(rng, lists[a], facts, extent, budget))
        elif isinstance(T.element_type(a.type), T.PointerType):
            out.append(random_array(rng, numpy_dtype(a.type), (min(extent * extent, budget),)))
        else:
            dt = numpy_dtype(a.type)
            out.append(dt(1.5) if np.dtype(dt).kind == "f" else dt(scalar_value(assumed_facts(fn, a, facts))))
    zero_lock_words(fn, out)
    in_range_indices(fn, origin, args, out, rng)
    return out


def index_sources(fn: Function, origin: dict[Value, Value]) -> dict[Value, tuple[MEM.LoadViewTkoOp, int]]:
    """Integer arrays whose elements the kernel loads and uses, through pure ops only, as a
    tile index of a view load (a paged cache's block table: its page ids index the cache's
    first dim): argument -> (such a load, the index position).  Arrays whose values also
    index a store are left out (their indices must stay distinct)."""
    found: dict[Value, tuple[MEM.LoadViewTkoOp, int]] = {}
    stored: set[Value] = set()
    for op in fn.walk():
        if not isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp)):
            continue
        for k, index in enumerate(op.index):
            for arg in _loaded_arguments(index, origin):
                if isinstance(op, MEM.StoreViewTkoOp):
                    stored.add(arg)
                else:
                    found.setdefault(arg, (op, k))
    return {a: use for a, use in found.items() if a not in stored}


def _loaded_arguments(v: Value, origin: dict[Value, Value], limit: int = 16) -> list[Value]:
    """The arguments whose arrays ``v`` is computed from by view loads and then pure ops."""
    out: list[Value] = []
    seen: set[int] = set()
    work = [v]
    while work and len(seen) < limit:
        w = work.pop()
        if w.is_block_argument or id(w.owner) in seen:
            continue
        op = w.owner
        seen.add(id(op))
        if isinstance(op, MEM.LoadViewTkoOp):
            tensor = _tensor_of(op.view)
            arg = origin.get(tensor.base) if tensor is not None else None
            if arg is not None:
                out.append(arg)
        elif is_pure(op) and not op.regions:
            work.extend(op.operands)
    return out


def _tensor_of(view: Value) -> Optional[MEM.MakeTensorViewOp]:
    """The ``make_tensor_view`` a partition view is made of, where the function shows it."""
    made = None if view.is_block_argument else getattr(view.owner, "tensor_view", None)
    tensor = None if made is None or made.is_block_argument else made.owner
    return tensor if isinstance(tensor, MEM.MakeTensorViewOp) else None


def in_range_indices(fn: Function, origin: dict[Value, Value], arrays: dict[Value, Any], out: list[Any],
                     rng: np.random.Generator) -> None:
    """The arrays of ``index_sources`` refilled with indices of the tiles they pick (a
    quarter of each row's range shifted below 0: tiles outside, which padding must handle):
    random ones would mostly point past the indexed tensor, and a kernel would then
    compute on padding only."""
    for arg, (op, k) in index_sources(fn, origin).items():
        pv = op.view.type
        made = _tensor_of(op.view)
        indexed = arrays.get(origin.get(made.base)) if made is not None else None
        target = arrays.get(arg)
        if not isinstance(indexed, np.ndarray) or not isinstance(target, np.ndarray) or target.dtype.kind not in "iu":
            continue
        dim = pv.dim_map[k] if pv.dim_map else k
        tiles = -(-indexed.shape[dim] // pv.tile_shape[k])
        low = 0 if target.dtype.kind == "u" else -(tiles // 4)
        target[...] = rng.integers(low, low + tiles, target.shape).astype(target.dtype)


#: The value of an integer argument that no view gives one, before the facts assumed of it.
SMALL_INT = 3


def assumed_facts(fn: Function, arg: Value, facts: Any) -> Any:
    """What the bytecode assumes of entry argument ``arg``: the facts of the last ``assume``
    of every chain of assumes that starts at it (``div_by``, ``bounded``), combined."""
    from .lower.tileaa import Facts

    origin = _through_assumes(fn)
    chained = {op.value for op in fn.walk() if isinstance(op, CF.AssumeOp)}
    ends = [op.result for op in fn.walk()
            if isinstance(op, CF.AssumeOp) and origin.get(op.result) is arg and op.result not in chained]
    divisor, lower, upper = 1, None, None
    for f in (facts.fact(v) for v in ends):
        divisor = max(divisor, f.divisor)
        lower = f.lower if lower is None or (f.lower is not None and f.lower > lower) else lower
        upper = f.upper if upper is None or (f.upper is not None and f.upper < upper) else upper
    return Facts(divisor, lower, upper)


def scalar_value(f: Any) -> int:
    """``SMALL_INT`` moved into the bounds and up to the divisor the facts ``f`` assume (a
    shape or stride passed as a raw scalar is ``div_by<16>`` in aligned kernels: NVIDIA's
    code relies on it)."""
    value = max(SMALL_INT, f.lower if f.lower is not None else SMALL_INT)
    value = _round_up(value, f.divisor)
    if f.upper is not None and value > f.upper:
        value = f.upper - f.upper % f.divisor
    return value


def unpadded_reach(fn: Function, facts: Any, budget: int = BUDGET) -> dict[Value, list[int]]:
    """tensor view -> the extent each of its dims needs for the loads through partition
    views without a padding value (whose out-of-bounds elements are unspecified) to stay in
    bounds, where the bytecode bounds their tile indices (a loop counter: loop_accumulate
    reads 16 tiles of 256 along a row); indices bounded only by their type (block ids, a
    reach past ``budget``) add nothing."""
    needs: dict[Value, list[int]] = {}
    for op in fn.walk():
        if not isinstance(op, MEM.LoadViewTkoOp) or op.view.is_block_argument:
            continue
        pv = op.view.type
        if not isinstance(pv, T.PartitionViewType) or pv.padding_value is not None:
            continue
        if not isinstance(op.view.owner, MEM.MakePartitionViewOp):
            continue
        tv = op.view.owner.tensor_view
        need = needs.setdefault(tv, [0] * len(pv.tensor_view.shape))
        for index, size, dim in zip(op.index, pv.tile_shape, pv.dim_map or range(len(pv.tile_shape))):
            upper = facts.fact(index).upper
            if upper is not None and (upper + 1) * size <= budget:
                need[dim] = max(need[dim], (upper + 1) * size)
    return needs


def view_divisors(op: MEM.MakeTensorViewOp, facts: Any) -> list[int]:
    """The divisor the bytecode assumes of each dim of ``op``'s view (1 for static dims)."""
    dynamic = iter(op.dynamicShape)
    return [facts.fact(next(dynamic)).divisor if d == T.DYNAMIC else 1 for d in op.result.type.shape]


def list_parameters(fn: Function) -> dict[Value, MEM.MakeTensorViewOp]:
    """The pointer arguments of ``fn`` that are tables of list parameters, each with a view
    the kernel makes of one of the table's arrays: the view's base is an ``int_to_ptr`` of
    an integer computed from what the kernel loaded through that argument."""
    lists: dict[Value, MEM.MakeTensorViewOp] = {}
    for op in fn.walk():
        if not isinstance(op, MEM.MakeTensorViewOp):
            continue
        base = _strip_assumes(op.base)
        if base.is_block_argument or not isinstance(base.owner, CORE.IntToPtrOp):
            continue
        for arg in _arguments_feeding(base.owner.source, fn.entry_block.args):
            if isinstance(T.element_type(arg.type), T.PointerType):
                lists.setdefault(arg, op)
    return lists


def _strip_assumes(v: Value) -> Value:
    while not v.is_block_argument and isinstance(v.owner, CF.AssumeOp):
        v = v.owner.value
    return v


def _arguments_feeding(v: Value, entry_args: Sequence[Value]) -> list[Value]:
    """The entry arguments ``v`` is computed from (through any chain of ops), in order."""
    reached, frontier = {v}, [v]
    while frontier:
        w = frontier.pop()
        if not w.is_block_argument:
            fresh = [o for o in w.owner.operands if o not in reached]
            reached.update(fresh)
            frontier += fresh
    return [a for a in entry_args if a in reached]


def synthesize_list(rng: np.random.Generator, view: MEM.MakeTensorViewOp, facts: Any, extent: int,
                    budget: int) -> ArrayList:
    """``LIST_LENGTH`` arrays shaped for ``view`` (a view the kernel makes of one member),
    as ``synthesize_args`` shapes arrays for views, the ``budget`` shared among them; the
    k-th array's dynamic extents start from ``extent + 16 * k``, so that a kernel mixing up
    its groups' shapes shows.  Every list of a kernel gets the same extents for its k-th
    array (grouped GEMM: ``A[k]``, ``B[k]`` and ``C[k]`` agree)."""
    t = view.result.type
    divisors = view_divisors(view, facts)
    order = "F" if t.rank > 1 and t.strides[0] == 1 and t.strides[-1] != 1 else "C"
    return ArrayList([random_array(rng, numpy_dtype(t),
                                   choose_extents(t.shape, divisors, extent + 16 * k, max(budget // LIST_LENGTH, 1)),
                                   order)
                      for k in range(LIST_LENGTH)])


def choose_extents(shape: Sequence[int], divisors: Sequence[int], extent: int, budget: int,
                   reach: Optional[Sequence[int]] = None) -> tuple[int, ...]:
    """An array shape for a view of ``shape`` (``T.DYNAMIC`` marks dynamic dims): static dims
    as they are; dynamic ones ``extent`` (at least ``reach``, what unpadded loads need)
    rounded up to their ``divisors``, then, while the array holds more than ``budget``
    elements, the largest dynamic one halved (rounded up to its divisor, never below it nor
    below its reach).  A 5-D view of dynamic dims at extent 100 has 10^10 elements; with the
    default budget it gets 16^5."""
    floor = [_round_up(max(r, 1), q) for r, q in zip(reach or [0] * len(shape), divisors)]
    dims = [_round_up(max(extent, f), q) if d == T.DYNAMIC else d for d, q, f in zip(shape, divisors, floor)]
    dynamic = [i for i, d in enumerate(shape) if d == T.DYNAMIC]
    while int(np.prod(dims, dtype=object)) > budget:
        shrinkable = [i for i in dynamic if dims[i] > max(divisors[i], floor[i])]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda k: dims[k])
        dims[i] = max(_round_up(dims[i] // 2, divisors[i]), divisors[i], floor[i])
    return tuple(dims)


def _round_up(n: int, divisor: int) -> int:
    return -(-n // divisor) * divisor


def zero_lock_words(fn: Function, args: list[Any]) -> None:
    """Arrays that an ``atomic_cas`` compares and swaps are zeroed in ``args``, as frameworks
    allocate lock words (``torch.zeros``): random lock words would be taken by no CTA or held
    forever, and the CTAs would then race on the data the lock protects."""
    roots: set[Value] = set()
    todo = [op.pointers for op in fn.walk() if isinstance(op, MEM.AtomicCASTkoOp)]
    while todo:
        v = todo.pop()
        if v in roots:
            continue
        roots.add(v)
        if not v.is_block_argument:
            todo += [o for o in v.owner.operands if isinstance(T.element_type(o.type), T.PointerType)]
    for i, a in enumerate(fn.entry_block.args):
        if a in roots and isinstance(args[i], np.ndarray):
            args[i][...] = 0


def distinct_grid(fn: Function, grid: Sequence[int]) -> tuple[int, ...]:
    """``grid`` with the axes whose block id ``fn`` never reads cut to one block.

    CTAs that differ only along such an axis do the same work on the same memory: a framework
    launches one (TileGym's rotary embedding launches ``(batch * seq,)``), and several of them
    updating a tensor in place race, so the interpreter (one CTA after another: rotated twice)
    and the emulator (in lockstep: once) would both be right and disagree."""
    read = {v for op in fn.walk() for v in op.operands}
    used = [False, False, False]
    for op in fn.walk():
        if isinstance(op, CORE.GetTileBlockIdOp):
            for axis, r in enumerate(op.results):
                used[axis] = used[axis] or r in read
    full = (tuple(grid) + (1, 1, 1))[:3]
    return tuple(g if used[axis] else 1 for axis, g in enumerate(full))


@dataclass
class Outcome:
    arrays: list[np.ndarray]
    failed: bool      # an assert fired / the kernel trapped
    printed: str = ""


def run_interpreter(module: Any, entry: str, grid: tuple, args: Sequence[Any]) -> Outcome:
    from . import interp

    copies = copy_arguments(args)
    printed: list[str] = []
    result = interp.launch(module, entry, grid, copies, printed=printed)
    return Outcome(arrays_of(copies), bool(result.failures), "".join(printed))


def run_ptx(ptx: str, entry: str, grid: tuple, args: Sequence[Any], who: str = "compiled",
            host_object: Optional[bytes] = None, interleave: Optional[int] = None, burst: bool = False) -> Outcome:
    """``host_object``: the cubin's ``.nv.host``, for kernels with hidden tensor maps;
    ``interleave``: run the CTAs interleaved in the order this seed draws, each with a
    weakly ordered view of global memory (``emulate/weak.py``), in bursts with ``burst``."""
    from .emulate import launch

    copies = copy_arguments(args)
    result = launch(ptx, entry, grid, copies, host_object=host_object, interleave=interleave, burst=burst)
    if result.trap is not None and result.trap.kind not in ("trap", "assert"):
        raise AssertionError(f"{who} PTX faulted in the emulator: {result.trap}")
    return Outcome(arrays_of(copies), result.trap is not None, result.output)


def run_both(module: Module, entry: str, grid: tuple, args: Sequence[Any], gpu_name: str = "sm_90",
             ptx: Optional[str] = None, interleave: Optional[int] = None) -> tuple[Outcome, Outcome]:
    """The interpreter's outcome and our PTX's (``ptx``, else compiled for ``gpu_name``) on
    the same arguments: the two sides ``compare`` takes."""
    expected = run_interpreter(module, entry, grid, args)
    host = None
    if ptx is None:
        ptx, host = compile_with_host(module, gpu_name)
    return expected, run_ptx(ptx, entry, grid, args, host_object=host, interleave=interleave)


def compile_ptx(module: Module, gpu_name: str) -> str:
    """Our PTX of a copy of ``module``: the passes rewrite what they compile (``hoist-views``,
    ``cse``), and the interpreter, the oracle, must run the program as it was read."""
    from .pipeline import CompileOptions, compile_module

    return compile_module(copy.deepcopy(module), CompileOptions(gpu_name=gpu_name), "ptx")


def compile_with_host(module: Module, gpu_name: str) -> tuple[str, Optional[bytes]]:
    """Our PTX (``compile_ptx``) and, when a kernel has hidden tensor maps (TMA), our
    ``.nv.host`` object whose callback fills them at launch (None: nothing to fill), from
    one compile of a copy of ``module``."""
    from .pipeline import CompileOptions, run_stages

    c = run_stages(copy.deepcopy(module), CompileOptions(gpu_name=gpu_name), "ptx", only_needed=True)
    return c.ptx, _host_object(c.kernels)


def host_object_for(module: Module, gpu_name: str) -> Optional[bytes]:
    """``compile_with_host``'s ``.nv.host`` object alone (the passes up to TileAS only)."""
    from .codegen.abi import kernel_info_from_function
    from .pipeline import CompileOptions, run_stages

    module = copy.deepcopy(module)
    tas = run_stages(module, CompileOptions(gpu_name=gpu_name), "tileas").tas
    return _host_object([kernel_info_from_function(fn, gpu_name, tas[fn.name].num_threads, tas[fn.name].tensor_maps,
                                                   len(tas[fn.name].device_maps))
                         for fn in module.functions])


def _host_object(kernels: list) -> Optional[bytes]:
    from .codegen.host import build_host_object

    return build_host_object(kernels) if any(k.tensor_maps or k.device_maps for k in kernels) else None


def compare(expected: Outcome, got: Outcome, *, rtol: float = 1e-4, atol: float = 1e-5,
            scale_tol: float = 1e-6) -> Optional[str]:
    """None when equal within tolerance (integers exactly), else a description.

    A float element passes within ``atol + rtol * |expected| + scale_tol * max |expected|``:
    the last term is the array's scale, since a sum summed in another order (a tensor core's
    K order against the interpreter's) differs by a few ulp of its largest terms, which an
    element near zero after cancellation cannot absorb (a GPU's wgmma gave -0.022995 for
    -0.022979 in an array of magnitude 237)."""
    if expected.failed != got.failed:
        return f"assert outcome differs: interpreter {expected.failed}, compiled {got.failed}"
    if expected.failed:  # memory after a failed assert is unspecified
        return None
    for i, (e, g) in enumerate(zip(expected.arrays, got.arrays)):
        if e.dtype == FNV8E5M3FNU:  # codes compared exactly
            e, g = e.view(np.uint8), g.view(np.uint8)
        if np.dtype(e.dtype).kind in "iub":
            bad = np.flatnonzero(e.ravel(order="K") != g.ravel(order="K"))
        else:
            ef, gf = e.astype(np.float64).ravel(order="K"), g.astype(np.float64).ravel(order="K")
            with np.errstate(invalid="ignore"):  # infinities: 0 * inf in the tolerance, inf - inf
                finite = np.abs(ef[np.isfinite(ef)])
                tol = atol + rtol * np.abs(ef) + scale_tol * (finite.max() if finite.size else 0.0)
                if e.dtype in (np.float16, ml_dtypes.bfloat16):
                    tol = 1e-2 + 1e-2 * np.abs(ef)
                close = (ef == gf) | (np.isnan(ef) & np.isnan(gf)) | (np.abs(ef - gf) <= tol)
            bad = np.flatnonzero(~close)
        if bad.size:
            k = bad[0]
            return (f"array {i} differs at {bad.size} of {e.size} elements; first at flat index {k}: "
                    f"interpreter {e.ravel(order='K')[k]!r}, compiled {g.ravel(order='K')[k]!r}")
    return None


@dataclass
class EntryReport:
    entry: str
    problem: Optional[str]
    detail: dict = field(default_factory=dict)


def check_module(module: Module, gpu_name: str = "sm_90", grid: tuple = (2, 2, 1), extent: int = 100,
                 seed: int = 1, device: Any = None, nvidia: Optional["ThirdOpinion"] = None,
                 interleave: Optional[int] = None, budget: int = BUDGET, burst: bool = False) -> list[EntryReport]:
    """Every entry: interpreter vs our PTX in the emulator; with ``device`` (a
    ``tileiras.gpu.Device``) also the GPU against both; with ``nvidia`` (NVIDIA's PTX, from
    a real cubin or a ``.ptx`` file) that PTX too, on the same inputs, against the
    interpreter; ``interleave``: CTAs interleaved by that seed (``run_ptx``), in bursts
    with ``burst``."""
    ptx, host = compile_with_host(module, gpu_name)
    cubin = None
    if device is not None:
        from .gpu import compile_cubin

        cubin = compile_cubin(module, gpu_name)
    reports = []
    for fn in module.functions:
        if not fn.is_entry:
            continue
        args = synthesize_args(fn, np.random.default_rng(seed), extent, budget)
        try:
            run_grid = distinct_grid(fn, grid)
            expected = run_interpreter(module, fn.name, run_grid, args)
        except Exception as err:  # noqa: BLE001 - reported per entry
            reports.append(EntryReport(fn.name, f"{type(err).__name__}: {err}"))
            continue
        try:
            got = run_ptx(ptx, fn.name, run_grid, args, host_object=host, interleave=interleave, burst=burst)
            problem = compare(expected, got)
            if device is not None:
                problem = problem or compare_gpu(device, cubin, fn, run_grid, args, expected, got)
        except Exception as err:  # noqa: BLE001 - reported per entry
            problem = f"{type(err).__name__}: {err}"
        if nvidia is not None:  # a third opinion whatever ours gave
            theirs = nvidia_problem(nvidia, fn.name, run_grid, args, expected, interleave, burst)
            problem = "; ".join(p for p in (problem, theirs) if p) or None
        reports.append(EntryReport(fn.name, problem))
    return reports


def nvidia_problem(nvidia: "ThirdOpinion", entry: str, grid: tuple, args: Sequence[Any], expected: Outcome,
                   interleave: Optional[int], burst: bool = False) -> Optional[str]:
    """NVIDIA's PTX on ``args`` against the interpreter's ``expected``: None when they agree."""
    try:
        theirs = run_ptx(nvidia.ptx, entry, grid, args, who="NVIDIA's", host_object=nvidia.host_object,
                         interleave=interleave, burst=burst)
        problem = compare(expected, theirs)
    except Exception as err:  # noqa: BLE001 - reported per entry
        problem = f"{type(err).__name__}: {err}"
    return None if problem is None else f"NVIDIA's PTX vs interpreter: {problem}"


@dataclass
class ThirdOpinion:
    """NVIDIA's PTX for the same module, and its cubin's ``.nv.host`` (tensor maps)."""

    ptx: str
    host_object: Optional[bytes] = None

    @classmethod
    def read(cls, path: str) -> "ThirdOpinion":
        """From NVIDIA's cubin (its PTX is the ``.nv_debug_ptx_txt`` section) or a ``.ptx`` file."""
        from .cli import read_input_file

        data = read_input_file(path, exit_code=1)
        if not data.startswith(b"\x7fELF"):
            return cls(data.decode("utf-8", "replace"))
        from .codegen.ptxas import nv_host_section
        from .emulate.cubin import ptx_from_cubin
        from .errors import UsageError

        ptx = ptx_from_cubin(data)
        if ptx is None:
            raise UsageError(f"{path} holds no PTX: NVIDIA's tileiras embeds it with --lineinfo")
        return cls(ptx, nv_host_section(data))


def compare_gpu(device: Any, cubin: bytes, fn: Function, grid: tuple, args: Sequence[Any],
                interpreted: Outcome, emulated: Outcome) -> Optional[str]:
    """The GPU's outcome on ``args`` against the interpreter's, then the emulator's."""
    from .gpu import run_cubin, signature_of

    on_gpu = run_cubin(device, cubin, fn.name, signature_of(fn), grid, args)
    for label, other in (("GPU vs interpreter", interpreted), ("GPU vs emulator", emulated)):
        problem = compare(other, on_gpu)
        if problem is not None:
            return f"{label}: {problem}"
    return None


def check_files(files: Sequence[str], gpu_name: Optional[str], grid: tuple, extent: int, device: Any,
                nvidia: Optional[ThirdOpinion] = None, interleave: Optional[int] = None,
                budget: int = BUDGET, burst: bool = False) -> int:
    """Print one line per entry (or per unreadable file, on stderr); the number of problems."""
    from .cli import read_input_file
    from .errors import TileIRError
    from .reader import read_bytecode

    arch = gpu_name or (device.arch if device is not None else "sm_90")
    bad = 0
    for path in files:
        try:
            module = read_bytecode(read_input_file(path, exit_code=1), path)
            reports = check_module(module, arch, grid, extent, device=device, nvidia=nvidia, interleave=interleave,
                                   budget=budget, burst=burst)
        except TileIRError as err:
            sys.stdout.flush()
            print(f"{err}", file=sys.stderr)
            bad += 1
            continue
        for r in reports:
            print(f"{path} @{r.entry}: {'agree' if r.problem is None else r.problem}")
            bad += r.problem is not None
    return bad


def main(argv: Optional[Sequence[str]] = None) -> int:
    import click

    from .errors import TileIRError

    @click.command("tileiras-diffcheck")
    @click.argument("files", nargs=-1, required=True)
    @click.option("--gpu-name", default=None, help="sm_XX to compile for (default sm_90, on a GPU the device's)")
    @click.option("--extent", default=100, type=int, help="elements along each dynamic dim")
    @click.option("--budget", default=BUDGET, type=click.IntRange(min=1), show_default=True,
                  help="elements an array may hold: larger views get smaller dynamic extents")
    @click.option("--grid", default="2,2,1", help="X[,Y,Z] tile blocks")
    @click.option("--device", type=click.Choice(["emulator", "gpu"]), default="emulator",
                  help="gpu: also run on the GPU, against the interpreter and the emulator")
    @click.option("--nvidia", default=None, metavar="CUBIN|PTX",
                  help="NVIDIA's cubin (or PTX) of the same file: its PTX runs on the same inputs too")
    @click.option("--interleave", default=None, type=int, metavar="SEED",
                  help="run CTAs interleaved in this seed's order, each with a weakly ordered view of "
                       "global memory (finds missing acquire/release between CTAs)")
    @click.option("--burst", is_flag=True,
                  help="with --interleave: the CTA drawn runs on for a while, so CTAs drift apart "
                       "(finds a CTA refilling another's shared memory too early)")
    def command(files: tuple[str, ...], gpu_name: Optional[str], extent: int, budget: int, grid: str, device: str,
                nvidia: Optional[str], interleave: Optional[int], burst: bool) -> int:
        g = tuple(int(x) for x in grid.split(",")) + (1, 1)
        if burst and interleave is None:
            raise click.UsageError("--burst goes with --interleave SEED")
        if nvidia is not None and len(files) != 1:
            raise click.UsageError("--nvidia goes with one FILE (the one it was compiled from)")
        third = ThirdOpinion.read(nvidia) if nvidia is not None else None
        gpu = None
        if device == "gpu":
            from .gpu import open_device

            gpu = open_device()
        return 1 if check_files(files, gpu_name, g[:3], extent, gpu, third, interleave, budget, burst) else 0

    try:
        return command.main(args=list(sys.argv[1:] if argv is None else argv), standalone_mode=False) or 0
    except click.ClickException as err:
        err.show()
        return 2
    except TileIRError as err:
        sys.stdout.flush()
        print(f"{err}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
