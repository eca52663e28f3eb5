"""The compilation pipeline: an ordered list of stages, each dumpable.

    bytecode -> verify -> tileaa -> tileas -> sched -> llvm (.ll) -> ptx -> cubin

``compile_module(module, options, stop_after=EXT)`` runs the stages in order and
returns the artifact of the last one it ran (text for dumps, bytes for the
cubin), so every stage can be inspected and tested on its own
(``tileiras --emit=tileaa|tileas|sched|llvm|ptx|cubin``).  A compilation that
reaches ``ptx`` starts LLVM's back end (``codegen.backend``) before its first stage,
so LLVM loads in a child process while the module is lowered.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Optional

from .errors import CompileError, TileIRError
from .ir.core import Module
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
    aa: dict[str, Any] = field(default_factory=dict)      # entry name -> TileAA
    tas: dict[str, Any] = field(default_factory=dict)     # entry name -> TileAS
    schedules: dict[str, Any] = field(default_factory=dict)  # entry name -> [LoopSchedule]
    llvm: Any = None                                      # llvmlite ir.Module
    ptx: str = ""
    kernels: list = field(default_factory=list)           # KernelInfo per entry
    cubin: bytes = b""
    tile_text: str = ""                                   # the module as Tile IR text (line info)
    host: Optional[bytes] = None                          # the .nv.host object (None: no kernels)
    last_stage: str = "cubin"                             # the stage whose result is wanted
    backend: Any = None                                   # codegen.backend.Backend (ptx and cubin)
    host_job: Optional[int] = None                        # the back end's job building ``host``


@record(frozen=True)
class Stage:
    ext: str
    run: Callable[[Compilation], None]
    dump: Callable[[Compilation], Any]
    # False for an analysis no later stage reads yet: it runs only when its dump is asked
    # for, so a cubin compile does not pay for it.
    feeds_later: bool = True


#: NVIDIA's whole message when its tileiras 13.5 meets a ``preview$call`` it cannot resolve
#: (no declaration of a callee passes its verifier, so it resolves none: see tilelib.py).
CALL_UNRESOLVED = "failed to compile Tile IR program"


def _tileaa(c: Compilation) -> None:
    from .lower.tileaa import analyze
    from .tile.ops_control import PreviewCallOp

    for fn in c.module.functions:
        if not fn.is_entry:
            raise CompileError(ENTRY_ONLY)
        if any(isinstance(op, PreviewCallOp) for op in fn.walk()):
            raise CompileError(CALL_UNRESOLVED)
        c.aa[fn.name] = analyze(fn)


def _tileas(c: Compilation) -> None:
    from .codegen.abi import HINT_NUM_WORKER_WARPS, hints_for_arch
    from .lower.tileas import assign_layouts

    for fn in c.module.functions:
        warps = hints_for_arch(fn.hints, c.options.gpu_name).get(HINT_NUM_WORKER_WARPS)
        c.tas[fn.name] = assign_layouts(c.aa[fn.name], warps, c.options.arch)


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
                                           c.tas[fn.name].tensor_maps)
                 for fn in c.module.functions]
    if c.last_stage == "cubin" and c.kernels:  # needs no PTX: the back end builds it meanwhile
        c.host_job = c.backend.submit(_host_object, c.kernels, c.options.host_arch, c.options.host_os)
    lineinfo = c.options.lineinfo or c.options.device_debug
    if lineinfo:
        from .text.printer import print_module_with_positions

        c.tile_text, positions = print_module_with_positions(c.module)
    target = Target(c.options.arch, lineinfo, c.options.device_debug)
    c.llvm = emit_module(c.module, c.tas, target, positions if lineinfo else None)


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


STAGES: tuple[Stage, ...] = (
    Stage("tileaa", _tileaa, _dump_tileaa),
    Stage("tileas", _tileas, _dump_tileas),
    Stage("sched", _sched, _dump_sched, feeds_later=False),  # codegen does not consume schedules yet
    Stage("llvm", _llvm, lambda c: str(c.llvm)),
    Stage("ptx", _ptx, lambda c: c.ptx),
    Stage("cubin", _cubin, lambda c: c.cubin),
)
STAGE_NAMES = tuple(s.ext for s in STAGES)


def _backend(last_stage: str) -> ContextManager[Any]:
    """LLVM's back end for a compilation that reaches ``ptx``, started now (it loads LLVM
    while the first stages run); nothing for one that stops before."""
    if STAGE_NAMES.index(last_stage) < STAGE_NAMES.index("ptx"):
        return nullcontext()
    from .codegen.backend import Backend

    return Backend()


def compile_module(module: Module, options: CompileOptions, stop_after: str = "cubin") -> Any:
    """Run the stages up to ``stop_after``; return that stage's dump."""
    if stop_after not in STAGE_NAMES:
        raise ValueError(f"unknown stage '{stop_after}' (stages: {', '.join(STAGE_NAMES)})")
    with _backend(stop_after) as backend:
        c = Compilation(module, options, last_stage=stop_after, backend=backend)
        for stage in STAGES:
            if stage.feeds_later or stage.ext == stop_after:
                stage.run(c)
            if stage.ext == stop_after:
                return stage.dump(c)
    raise AssertionError("unreachable")


def run_stages(module: Module, options: CompileOptions, stop_after: Optional[str] = None) -> Compilation:
    """Like ``compile_module`` but hands back every stage's result (for tests and tools)."""
    last_stage = stop_after or STAGE_NAMES[-1]
    with _backend(last_stage) as backend:
        c = Compilation(module, options, last_stage=last_stage, backend=backend)
        for stage in STAGES:
            stage.run(c)
            if stage.ext == stop_after:
                break
    return c
