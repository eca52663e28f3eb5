"""The compilation pipeline: a flat list of named passes per target (``passes_for``).

    verify-target, hoist-views, tileaa | cta-size, tensor-core-forms, access-facts, assign-layouts,
    plan-chunks, vector-widths, [tma: sm_90+], allocate-shared-memory | sched |
    codegen | llvm | ptxas

Each pass is one entry point that reads what earlier passes recorded on the
``Compilation`` and records its own results; the differences between targets are the
lists themselves.  ``compile_module(module, options, stop_after=STOP)`` runs the passes
until the one that completes ``STOP`` (``tileiras --emit=tileaa|tileas|sched|llvm|ptx|
cubin``) and returns that stop's output (text for dumps, bytes for the cubin), so every
stage can be inspected and tested on its own.  A compilation that reaches ``ptx``
starts LLVM's back end (``codegen.backend``) before its first pass, so LLVM loads in a
child process while the module is lowered.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Optional

from .errors import CompileError, TileIRError
from .ir.core import Module
from .knobs import knobs
from .record import field, record

ENTRY_ONLY = "non-entry functions need the SIMT preview (--preview=simt), which is not supported"


@record(frozen=True)
class CompileOptions:
    gpu_name: str
    opt_level: int = 3
    lineinfo: bool = False
    device_debug: bool = False
    host_arch: str = "x86_64"
    host_os: str = "linux"
    sanitize: Optional[str] = None   # --sanitize=memcheck: passed on to ptxas
    #: check the TileAS invariants after every pass (``lower.tileas_verify``): the output is
    #: the same, so not part of ``key``; TILEIRAS_VERIFY_EACH=1 sets it (the tests do)
    verify_each: bool = field(default_factory=lambda: bool(knobs.verify_each))

    @property
    def arch(self) -> int:
        return int(self.gpu_name[3:])

    def key(self) -> tuple:
        """Everything that can change the output (for caches)."""
        return (self.gpu_name, self.opt_level, self.lineinfo, self.device_debug, self.host_arch, self.host_os,
                self.sanitize)


@record
class Compilation:
    """What the stages produce, one field per stage."""

    module: Module
    options: CompileOptions
    cluster_splits: dict[str, Any] = field(default_factory=dict)  # entry name -> ClusterSplit
    aa: dict[str, Any] = field(default_factory=dict)      # entry name -> TileAA
    tas: dict[str, Any] = field(default_factory=dict)     # entry name -> TileAS
    schedules: dict[str, Any] = field(default_factory=dict)  # entry name -> [LoopSchedule]
    llvm: Any = None                                      # llvmlite ir.Module
    ptx: str = ""
    kernels: list = field(default_factory=list)           # KernelInfo per entry
    cubin: bytes = b""
    tile_text: str = ""                                   # the module as read, as Tile IR text (line info)
    tile_positions: dict = field(default_factory=dict)    # op -> (line, depth) in ``tile_text``
    host: Optional[bytes] = None                          # the .nv.host object (None: no kernels)
    last_stage: str = "cubin"                             # the stage whose result is wanted
    backend: Any = None                                   # codegen.backend.Backend (ptx and cubin)
    host_job: Optional[int] = None                        # the back end's job building ``host``


@record(frozen=True)
class Pass:
    """One step of the compilation: ``run`` reads what earlier passes recorded on the
    ``Compilation`` and records its own results there."""

    name: str
    run: Callable[[Compilation], None]
    #: the ``--emit`` stop whose output is complete once this pass has run
    stop: Optional[str] = None
    #: False for an analysis no later pass reads yet: it runs only when its stop is asked
    #: for, so a cubin compile does not pay for it.
    feeds_later: bool = True


#: NVIDIA's whole message when its tileiras 13.5 meets a ``preview$call`` it cannot resolve
#: (no declaration of a callee passes its verifier, so it resolves none: see tilelib.py).
CALL_UNRESOLVED = "failed to compile Tile IR program"


class TargetError(CompileError):
    """The module uses something the target architecture lacks (NVIDIA: exit code 5)."""

    def __str__(self) -> str:
        return f"{self.message}\nerror: failed to compile Tile IR program"


def _verify_target(c: Compilation) -> None:
    """Architecture-specific verification; the rest was verified when the module was read."""
    from .verify import VerifyError, recheck_for_target

    try:
        recheck_for_target(c.module, c.options.gpu_name)
    except VerifyError as err:
        raise TargetError(str(err)) from None


def _hoist_views(c: Compilation) -> None:
    from .lower.hoist import hoist_views

    for fn in c.module.functions:
        hoist_views(fn)


def _cse(c: Compilation) -> None:
    from .lower.cse import eliminate_common_subexpressions

    for fn in c.module.functions:
        eliminate_common_subexpressions(fn)


def _cluster_split(c: Compilation) -> None:
    """Each tile block of a kernel launched in clusters (``num_cta_in_cga`` > 1, sm_90+)
    divided among the cluster's CTAs, where it can be (``lower/cluster_split.py``)."""
    from .lower.cluster_split import split_cluster
    from .lower.cta_size import TCGEN05_ARCHS
    from .lower.mma_forms import WGMMA_ARCHS, WGMMA_ROWS
    from .target import HINT_NUM_CTA_IN_CGA, hints_for_arch

    # the fewest rows a CTA's multiply keeps: wgmma's 64, and tcgen05's smallest M
    tensor_rows = c.options.arch in WGMMA_ARCHS or (c.options.arch in TCGEN05_ARCHS and knobs.tcgen05)
    for fn in c.module.functions:
        ctas = hints_for_arch(fn.hints, c.options.gpu_name).get(HINT_NUM_CTA_IN_CGA, 1)
        if fn.is_entry and ctas > 1:
            c.cluster_splits[fn.name] = split_cluster(fn, ctas, WGMMA_ROWS if tensor_rows else 1)


def _tileaa(c: Compilation) -> None:
    from .lower.tileaa import analyze
    from .tile.ops_control import PreviewCallOp

    for fn in c.module.functions:
        if not fn.is_entry:
            raise CompileError(ENTRY_ONLY)
        if any(isinstance(op, PreviewCallOp) for op in fn.walk()):
            raise CompileError(CALL_UNRESOLVED)
        c.aa[fn.name] = analyze(fn)


def _cta_size(c: Compilation) -> None:
    """The CTA size of each kernel (its hint, else NVIDIA's fitted rules), a TileAS for it."""
    from .target import HINT_NUM_WORKER_WARPS, hints_for_arch
    from .lower.tileas import new_tileas

    for fn in c.module.functions:
        warps = hints_for_arch(fn.hints, c.options.gpu_name).get(HINT_NUM_WORKER_WARPS)
        c.tas[fn.name] = new_tileas(c.aa[fn.name], warps, c.options.arch)
        split = c.cluster_splits.get(fn.name)
        if split is not None and split.ctas:
            c.tas[fn.name].cluster_split = split.ctas
            c.tas[fn.name].cluster_whole = frozenset(split.whole)


def _each(c: Compilation, entry: Callable[..., None], *args: Any) -> None:
    """``entry(tas, *args)`` on every function's TileAS."""
    for tas in c.tas.values():
        entry(tas, *args)


def _tensor_core_forms(c: Compilation) -> None:
    from .lower.tileas import choose_tensor_cores

    _each(c, choose_tensor_cores, c.options.arch)


def _access_facts(c: Compilation) -> None:
    from .lower.tileas import access_facts

    _each(c, access_facts)


def _assign_layouts(c: Compilation) -> None:
    from .lower.tileas import assign_layouts

    _each(c, assign_layouts)


def _plan_chunks(c: Compilation) -> None:
    from .lower.chunks import plan_chunks

    _each(c, plan_chunks)


def _forward_loads(c: Compilation) -> None:
    from .lower.forwarding import plan_forwarding

    _each(c, plan_forwarding)


def _vector_widths(c: Compilation) -> None:
    from .lower.tileas import vector_widths

    _each(c, vector_widths)


def _tma(c: Compilation) -> None:
    from .lower.tileas import choose_tma

    _each(c, choose_tma, c.options.arch)


def _stream_loops(c: Compilation) -> None:
    from .lower.stream_pipeline import record_streams
    from .lower.tma_stream import record_tma_streams

    if c.options.arch:
        _each(c, record_streams, c.options.arch)        # cp.async rings: sm_80-89, sm_120
        _each(c, record_tma_streams, c.options.arch)    # TMA streams: sm_90, sm_100


def _software_pipeline(c: Compilation) -> None:
    from .lower.software_pipeline import record_plans

    if c.options.arch:
        _each(c, record_plans, c.options.arch)


def _warp_owned_loads(c: Compilation) -> None:
    from .lower.staged_loads import record_warp_owned_loads

    _each(c, record_warp_owned_loads)


def _order_ops(c: Compilation) -> None:
    from .lower.emission_order import record_emission_order
    from .lower.tma_stream import place_tma_prologues

    _each(c, record_emission_order)
    _each(c, place_tma_prologues)       # where streamed loops' first copies go: in that order


def _allocate_shared_memory(c: Compilation) -> None:
    from .lower.tileas import allocate_shared_memory

    _each(c, allocate_shared_memory)


def _sched(c: Compilation) -> None:
    """Modulo schedules of every for loop (not used by code generation yet)."""
    from .sched.latency import model_for
    from .sched.loops import schedule_loops

    model = model_for(c.options.arch)
    for fn in c.module.functions:
        c.schedules[fn.name] = schedule_loops(fn, c.aa[fn.name], model, c.tas[fn.name].layout_threads)


def _llvm(c: Compilation) -> None:
    from .codegen.abi import kernel_info_from_function
    from .codegen.nvvm import Target, emit_module

    c.kernels = [kernel_info_from_function(fn, c.options.gpu_name, c.tas[fn.name].num_threads,
                                           c.tas[fn.name].tensor_maps, len(c.tas[fn.name].device_maps))
                 for fn in c.module.functions]
    if c.last_stage == "cubin" and c.kernels:  # needs no PTX: the back end builds it meanwhile
        c.host_job = c.backend.submit(_host_object, c.kernels, c.options.host_arch, c.options.host_os)
    lineinfo = c.options.lineinfo or c.options.device_debug
    target = Target(c.options.arch, lineinfo, c.options.device_debug)
    c.llvm = emit_module(c.module, c.tas, target, c.tile_positions if lineinfo else None)


def _host_object(kernels: list, host_arch: str, host_os: str) -> bytes:
    """The .nv.host object, built in the back end (its errors are raised by ``_ptx``)."""
    from .codegen.host import build_host_object, check_host_target

    return build_host_object(kernels, check_host_target(host_arch, host_os))


def _ptx(c: Compilation) -> None:
    from .codegen.llvm_targets import nvptx_assembly
    from .codegen.nvvm import llvm_cpu, nvptx_ir
    from .codegen.ptx import finalize_ptx

    job = c.backend.submit(nvptx_assembly, nvptx_ir(c.llvm), llvm_cpu(c.options.arch), c.options.opt_level)
    try:
        ptx = c.backend.result(job)
    except TileIRError:  # the back end died: LLVM's own message
        raise
    except Exception as exc:  # noqa: BLE001 - llvmlite's errors (IR that does not parse...)
        raise CompileError(f"LLVM failed: {type(exc).__name__}: {exc}") from None
    c.ptx = finalize_ptx(ptx, c.kernels, c.options.gpu_name)
    if c.host_job is not None:  # its errors after LLVM's own, as when the stages ran in turn
        c.host = c.backend.result(c.host_job)
    info = getattr(c.llvm, "_tileiras_lineinfo", None)
    if info is not None:
        from .codegen.ptx import attach_intermediate_source, drop_line_table_labels

        c.ptx = attach_intermediate_source(c.ptx, c.tile_text, info.sources)
        if not info.full:
            c.ptx = drop_line_table_labels(c.ptx)


def _cubin(c: Compilation) -> None:
    """ptxas on the PTX, with the .nv.host object ``_ptx`` built alongside it."""
    from .codegen.ptxas import run_ptxas
    from .codegen.smem_limit import check_shared_memory

    check_shared_memory(c.ptx, c.options.gpu_name)
    c.cubin = run_ptxas(c.ptx, c.options.gpu_name, c.options.opt_level, c.host, sanitize=c.options.sanitize)


def _dump_tileaa(c: Compilation) -> str:
    from .lower.tileaa import format_tileaa

    return "".join(format_tileaa(aa) for aa in c.aa.values())


def _dump_tileas(c: Compilation) -> str:
    from .lower.tileas_format import format_tileas

    return "".join(format_tileas(t) for t in c.tas.values())


def _dump_sched(c: Compilation) -> str:
    from .sched.format import format_function_schedules

    return "".join(format_function_schedules(fn, c.schedules[fn.name]) for fn in c.module.functions)


#: What ``--emit=STOP`` writes, once the pass that completes it has run; in pass order.
DUMPS: dict[str, Callable[[Compilation], Any]] = {
    "tileaa": _dump_tileaa,
    "tileas": _dump_tileas,
    "sched": _dump_sched,
    "llvm": lambda c: str(c.llvm),
    "ptx": lambda c: c.ptx,
    "cubin": lambda c: c.cubin,
}
STAGE_NAMES = tuple(DUMPS)

#: The passes over the program as read, every target alike.
FRONT: tuple[Pass, ...] = (
    Pass("verify-target", _verify_target),
    Pass("hoist-views", _hoist_views),
    Pass("cse", _cse),
)
#: Tile blocks divided among the CTAs of a cluster (sm_90+: clusters).
CLUSTER_SPLIT = Pass("cluster-split", _cluster_split)
#: From TileAA to TileAS's layouts, every target alike.
LAYOUTS: tuple[Pass, ...] = (
    Pass("tileaa", _tileaa, stop="tileaa"),
    Pass("cta-size", _cta_size),
    Pass("tensor-core-forms", _tensor_core_forms),
    Pass("access-facts", _access_facts),
    Pass("assign-layouts", _assign_layouts),
    Pass("plan-chunks", _plan_chunks),
    Pass("vector-widths", _vector_widths),
)
#: TMA decisions: loads and stores staged through the tensor memory accelerator (sm_90+).
TMA = Pass("tma", _tma)
#: Software pipelining of tensor-core K loops: rings of cp.async stages (after TMA, which
#: it leaves alone: a kernel with TMA keeps its loops as they are).
PIPELINE = Pass("software-pipeline", _software_pipeline)
#: Loads of a constant-trip loop that read the tiles an earlier one loaded (after TMA and
#: pipelining, whose loads it leaves alone).
FORWARD = Pass("forward-loads", _forward_loads)
#: SIMT loops streaming view tiles through cp.async rings, or on sm_90/sm_100 their TMA
#: loads issued trips ahead (after forwarding: a loop whose tiles are kept for a later
#: loop, or read from an earlier one's, is not streamed).
STREAM = Pass("stream-loops", _stream_loops)
#: From the CTA's shared memory to the cubin, every target alike.
BACK: tuple[Pass, ...] = (
    Pass("warp-owned-loads", _warp_owned_loads),
    Pass("order-ops", _order_ops),
    Pass("allocate-shared-memory", _allocate_shared_memory, stop="tileas"),
    Pass("sched", _sched, stop="sched", feeds_later=False),  # codegen does not read schedules yet
    Pass("codegen", _llvm, stop="llvm"),
    Pass("llvm", _ptx, stop="ptx"),
    Pass("ptxas", _cubin, stop="cubin"),
)
#: The passes of each target, in order (``passes_for``): sm_8x has no clusters and no TMA.
PASSES_SM80: tuple[Pass, ...] = FRONT + LAYOUTS + (PIPELINE, FORWARD, STREAM) + BACK
PASSES_TMA: tuple[Pass, ...] = FRONT + (CLUSTER_SPLIT,) + LAYOUTS + (TMA, PIPELINE, FORWARD, STREAM) + BACK


def passes_for(arch: int) -> tuple[Pass, ...]:
    """The flat list of passes that compiles for ``sm_<arch>``."""
    from .lower.tma import MIN_ARCH

    return PASSES_TMA if arch >= MIN_ARCH else PASSES_SM80


def _backend(last_stage: str) -> ContextManager[Any]:
    """LLVM's back end for a compilation that reaches ``ptx``, started now (it loads LLVM
    while the first stages run); nothing for one that stops before."""
    if STAGE_NAMES.index(last_stage) < STAGE_NAMES.index("ptx"):
        return nullcontext()
    from .codegen.backend import Backend

    return Backend()


def compile_module(module: Module, options: CompileOptions, stop_after: str = "cubin") -> Any:
    """Run the passes up to ``stop_after``; return that stop's output."""
    if stop_after not in STAGE_NAMES:
        raise ValueError(f"unknown stage '{stop_after}' (stages: {', '.join(STAGE_NAMES)})")
    return DUMPS[stop_after](run_stages(module, options, stop_after, only_needed=True))


def run_stages(module: Module, options: CompileOptions, stop_after: Optional[str] = None,
               only_needed: bool = False) -> Compilation:
    """Run the passes up to ``stop_after`` (all by default) and hand back every result (for
    tests and tools).  ``only_needed``: skip the analyses nothing before the stop reads.

    ``module`` is compiled in place: ``hoist-views`` moves the view-making ops of loop
    bodies before their loops (the same program: views are pure; compiling it again gives
    the same output), so a caller that prints or writes ``module`` afterwards sees them
    moved.  Read the bytecode again for the module as it came."""
    last_stage = stop_after or STAGE_NAMES[-1]
    with _backend(last_stage) as backend:
        c = Compilation(module, options, last_stage=last_stage, backend=backend)
        if (options.lineinfo or options.device_debug) and STAGE_NAMES.index(last_stage) >= STAGE_NAMES.index("llvm"):
            # line info points into the program as it was read, before ``hoist-views`` and
            # ``cse`` rewrite it (the text the PTX embeds, as NVIDIA's tool embeds its input)
            from .text.printer import print_module_with_positions

            c.tile_text, c.tile_positions = print_module_with_positions(module)
        done: set[str] = set()
        for p in passes_for(options.arch):
            if p.feeds_later or p.stop == last_stage or not only_needed:
                p.run(c)
                done.add(p.name)
                if options.verify_each and c.tas and p.stop not in BACKEND_STOPS:
                    _verify_tileas(c, frozenset(done), p.name)
            if p.stop == last_stage:
                break
    return c


#: stops after which the TileAS no longer changes (nothing to verify again)
BACKEND_STOPS = ("sched", "llvm", "ptx", "cubin")


def _verify_tileas(c: Compilation, done: frozenset, last: str) -> None:
    """``tileas_verify`` on every function's TileAS after the passes ``done``, the last
    ``last`` (``verify_each``)."""
    from .lower.tileas_verify import TileASVerifyError, verify_tileas

    for tas in c.tas.values():
        try:
            verify_tileas(tas, c.options.arch, done)
        except TileASVerifyError as err:
            raise TileASVerifyError(f"{err.message} (after pass {last})") from None
