"""The kernel ABI of NVIDIA's tileiras: what a Tile IR entry becomes in PTX and in the cubin.

Pure functions and one frozen record, ``KernelInfo``, which describes an entry to the
back end (``codegen.ptx`` patches the PTX from it, ``codegen.host`` builds the host object).
Every rule here was measured on tileiras 13.5.37 (see the tests for the observed values):

* parameters: one PTX ``.param`` per entry argument, ``<entry>_param_<i>``;
* threads per CTA: 128, or ``num_worker_warps_per_cta * 32`` for a power-of-two warp count;
* ``occupancy=k`` becomes ``.maxnreg``: 65536 registers shared by k CTAs, rounded down to a
  multiple of 8, with a per-CTA-size floor (``maxnreg_for_occupancy``);
* ``num_cta_in_cga=c > 1`` becomes a cluster of c CTAs, on sm_90 and newer only;
* hints: the ``default`` dictionary, overridden key by key by the one for the target.
"""
from __future__ import annotations

import re
from typing import Optional

from ..errors import CompileError
from ..ir.attrs import Attribute, DictAttr, IntegerAttr, OptimizationHintsAttr
from ..ir.types import PointerType, ScalarType, TileType, Type
from ..record import record
from ..target import HINT_NUM_CTA_IN_CGA, HINT_NUM_WORKER_WARPS, HINT_OCCUPANCY, hints_for_arch

#: The PTX ISA version the real tool writes (``.language`` needs 9.2 or newer).
PTX_VERSION = "9.5"
#: EIATTR_LANGUAGE value of Tile IR kernels (``.language 7``).
LANGUAGE_TILEIR = 7
#: The 64-byte global every non-empty module declares (used by the driver, never by code).
LAUNCH_METADATA_NAME = "___NV_TILE_LAUNCH_META_DATA___"

DEFAULT_THREADS_PER_CTA = 128
WARP_SIZE = 32
MAX_WARPS_PER_CTA = 32
REGISTERS_PER_SM = 65536
REGISTER_GRANULE = 8


_GPU_NAME = re.compile(r"sm_(\d+)$")


@record(frozen=True)
class KernelInfo:
    """One kernel entry as the back end sees it.

    ``param_types`` are the Tile IR argument types (``tile<ptr<f32>>``, ``tile<i32>``...: a
    rank-0 tile stands for its element); ``arch`` is the ``--gpu-name`` (``sm_90``).
    """

    name: str
    param_types: tuple[Type, ...]
    threads_per_cta: int = DEFAULT_THREADS_PER_CTA
    maxnreg: Optional[int] = None
    num_cta_in_cga: int = 1
    arch: str = "sm_90"
    #: the hidden tensor-map parameters after the user's (``lower.tma.TensorMapSpec``)
    tensor_maps: tuple = ()
    #: how many tensor maps the kernel builds itself (``TileAS.device_maps``): the hidden
    #: workspace pointer after the maps, and the workspace the host object asks for
    device_maps: int = 0

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(param_name(self.name, i) for i in range(len(self.param_types)))

    @property
    def tensor_map_names(self) -> tuple[str, ...]:
        first = len(self.param_types)
        return tuple(param_name(self.name, first + i) for i in range(len(self.tensor_maps)))

    @property
    def workspace_name(self) -> Optional[str]:
        """The hidden ``.u64`` parameter that points at the workspace, if the kernel has one."""
        if not self.device_maps:
            return None
        return param_name(self.name, len(self.param_types) + len(self.tensor_maps))

    @property
    def workspace_bytes(self) -> int:
        """Global memory the driver gives the kernel for the maps it builds: a slot of
        ``TENSOR_MAP_BYTES`` per map, per warp an SM holds, per SM (``device_map_slot``)."""
        return self.device_maps * WORKSPACE_SMS * WORKSPACE_SM_BYTES

    @property
    def is_cluster(self) -> bool:
        return self.num_cta_in_cga > 1 and has_clusters(self.arch)


# --------------------------------------------------------------------------- architectures

def sm_number(gpu_name: str) -> int:
    """``sm_90`` -> 90."""
    m = _GPU_NAME.match(gpu_name)
    if m is None:
        raise ValueError(f"not a GPU name: {gpu_name!r}")
    return int(m.group(1))


def is_arch_specific(gpu_name: str) -> bool:
    """sm_90 and newer compile for the arch-specific ``sm_XXa`` variant."""
    return sm_number(gpu_name) >= 90


def ptx_target(gpu_name: str) -> str:
    """The ``.target`` / ``ptxas -arch`` name: ``sm_90a`` for sm_90+, ``sm_86`` below."""
    return f"{gpu_name}a" if is_arch_specific(gpu_name) else gpu_name


def has_clusters(gpu_name: str) -> bool:
    return sm_number(gpu_name) >= 90


def param_cbank_base(gpu_name: str) -> int:
    """Offset of the first kernel parameter in constant bank 0 (the driver area before it)."""
    sm = sm_number(gpu_name)
    if sm >= 100:
        return 0x380
    if sm >= 90:
        return 0x210
    return 0x160


def host_param_offset_base(gpu_name: str) -> int:
    """Where the host object's parameter-offset computation starts (0x218 on sm_90, else 8)."""
    return 0x218 if sm_number(gpu_name) == 90 else 0x8


# --------------------------------------------------------------------------- parameters

def param_name(kernel: str, index: int) -> str:
    return f"{kernel}_param_{index}"


def param_scalar_type(t: Type) -> Type:
    """The type a kernel argument is passed as: a rank-0 tile passes its element."""
    if isinstance(t, TileType) and not t.shape:
        return t.element
    return t


#: PTX ``.param`` spelling of each scalar argument type, as the real tool writes it.
_SCALAR_PARAM = {
    "i1": ".u8", "i8": ".u8", "i16": ".u16", "i32": ".u32", "i64": ".u64",
    "f32": ".f32", "f64": ".f64",
}
#: Types passed as an aligned byte array (``.param .align 2 .b8 NAME[2]``).
_BYTE_ARRAY_PARAM = {"f16": 2, "bf16": 2}
#: (size, alignment) in the parameter buffer.
_SCALAR_LAYOUT = {
    "i1": (1, 1), "i8": (1, 1), "i16": (2, 2), "f16": (2, 2), "bf16": (2, 2),
    "i32": (4, 4), "f32": (4, 4), "i64": (8, 8), "f64": (8, 8),
}


def _unsupported(t: Type) -> CompileError:
    return CompileError(f"unsupported kernel parameter type '{t}'")


def param_decl(t: Type, name: str) -> str:
    """The PTX declaration of one entry parameter, without the leading tab or comma."""
    t = param_scalar_type(t)
    if isinstance(t, PointerType):
        return f".param .u64 .ptr .global .align 1 {name}"
    if isinstance(t, ScalarType):
        if t.name in _SCALAR_PARAM:
            return f".param {_SCALAR_PARAM[t.name]} {name}"
        if t.name in _BYTE_ARRAY_PARAM:
            size = _BYTE_ARRAY_PARAM[t.name]
            return f".param .align {size} .b8 {name}[{size}]"
    raise _unsupported(t)


#: The parameter kind of every pointer argument (whatever it points at).
POINTER_KIND = "ptr"


def param_kind(t: Type) -> str:
    """How the parameter buffer sees an argument type: ``ptr`` or the scalar's name (``i32``).

    The kind is all a launcher needs to lay the argument out, so the GPU runner can pack
    parameters from a manifest of kinds without the IR (and without the compiler).
    """
    t = param_scalar_type(t)
    if isinstance(t, PointerType):
        return POINTER_KIND
    if isinstance(t, ScalarType) and t.name in _SCALAR_LAYOUT:
        return t.name
    raise _unsupported(t)


def kind_layout(kind: str) -> tuple[int, int]:
    """(size, alignment) of a parameter of ``kind`` (see ``param_kind``) in the buffer."""
    if kind == POINTER_KIND:
        return (8, 8)
    if kind in _SCALAR_LAYOUT:
        return _SCALAR_LAYOUT[kind]
    raise CompileError(f"unsupported kernel parameter kind '{kind}'")


def param_layout(t: Type) -> tuple[int, int]:
    """(size, alignment) of one argument in the kernel parameter buffer."""
    return kind_layout(param_kind(t))


def kind_offsets(kinds: tuple[str, ...]) -> tuple[int, ...]:
    """Offset of each parameter of ``kinds`` from the start of the buffer (natural alignment)."""
    offsets, offset = [], 0
    for kind in kinds:
        size, align = kind_layout(kind)
        offset = (offset + align - 1) // align * align
        offsets.append(offset)
        offset += size
    return tuple(offsets)


def param_offsets(param_types: tuple[Type, ...]) -> tuple[int, ...]:
    """Offset of each argument from the start of the parameter buffer (natural alignment)."""
    return kind_offsets(tuple(param_kind(t) for t in param_types))


#: A hidden tensor-map parameter: 128 bytes, 64-aligned (``CUtensorMap``).
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64


def tensor_map_decl(name: str) -> str:
    """The declaration of a hidden tensor-map parameter, as NVIDIA's tool writes it."""
    return f".hidden\t.param .align {TENSOR_MAP_ALIGN} .b8 {name}[{TENSOR_MAP_BYTES}]"


#: The workspace of maps a kernel builds (NVIDIA's sm_90 grouped GEMM, measured: its host
#: object asks for 0x540000 bytes for 3 maps): map ``k`` of the warp ``%warpid`` on SM
#: ``%smid`` at ``(%smid + k %nsmid) * WORKSPACE_SM_BYTES + %warpid * TENSOR_MAP_BYTES``;
#: 64 warps an SM, at most 224 SMs.
WORKSPACE_SM_BYTES = 64 * 128
WORKSPACE_SMS = 224


def workspace_decl(name: str) -> str:
    """The declaration of the hidden workspace pointer, as NVIDIA's tool writes it."""
    return f".hidden\t.param .u64 .ptr .global .align 1 {name}"


def workspace_offset(info: KernelInfo) -> int:
    """Offset of the hidden workspace pointer in the host callback's buffer (after the
    maps, 8-aligned in constant-bank addresses)."""
    maps = tensor_map_offsets(info)
    end = maps[-1] + TENSOR_MAP_BYTES if maps else _user_params_end(info)
    base = param_cbank_base(info.arch)
    return -(-(base + end) // 8) * 8 - base


def _user_params_end(info: KernelInfo) -> int:
    """Bytes the user parameters take in the callback's buffer."""
    kinds = tuple(param_kind(t) for t in info.param_types)
    return kind_offsets(kinds)[-1] + kind_layout(kinds[-1])[0] if kinds else 0


def tensor_map_offsets(info: KernelInfo) -> tuple[int, ...]:
    """Offsets of the hidden maps in the parameter buffer the host callback gets (from the
    first parameter on), aligned in constant-bank addresses as ptxas lays them out: on
    sm_90 (bank base 0x210) the first map after 0x38 bytes of user parameters is at 0x70."""
    base = param_cbank_base(info.arch)
    out, at = [], base + _user_params_end(info)
    for _ in info.tensor_maps:
        at = -(-at // TENSOR_MAP_ALIGN) * TENSOR_MAP_ALIGN
        out.append(at - base)
        at += TENSOR_MAP_BYTES
    return tuple(out)


# --------------------------------------------------------------------------- launch shape

def threads_per_cta(num_worker_warps: Optional[int] = None) -> int:
    """128 threads, or 32 per worker warp when the hint asks for a power of two up to 32.

    Observed: 1, 2, 4, 8, 16, 32 warps give 32...1024 threads; 3, 6 and 12 give 128.
    """
    w = num_worker_warps
    if w is None or w < 1 or w > MAX_WARPS_PER_CTA or w & (w - 1):
        return DEFAULT_THREADS_PER_CTA
    return w * WARP_SIZE


def maxnreg_floor(threads: int) -> int:
    """The smallest ``.maxnreg`` an occupancy hint yields: 64, 48, 40 for 128, 256, 512 threads."""
    return 32 + 4096 // max(threads, DEFAULT_THREADS_PER_CTA)


def maxnreg_for_occupancy(occupancy: Optional[int], threads: int) -> Optional[int]:
    """``.maxnreg`` for ``occupancy`` CTAs per SM of ``threads`` threads, None for no limit.

    ``floor8(65536 / (k * max(threads, 128)))``, raised to ``maxnreg_floor``.  No limit for
    k <= 1 or for 1024-thread CTAs (the register file holds only one of those anyway).
    Reproduces every value measured on tileiras 13.5 (k = 2..32, 32..1024 threads).
    """
    if occupancy is None or occupancy <= 1 or threads >= 1024:
        return None
    per_cta = REGISTERS_PER_SM // (occupancy * max(threads, DEFAULT_THREADS_PER_CTA))
    regs = per_cta // REGISTER_GRANULE * REGISTER_GRANULE
    return max(regs, maxnreg_floor(threads))


# --------------------------------------------------------------------------- hints

def kernel_info_from_function(fn, gpu_name: str, threads: Optional[int] = None,
                              tensor_maps: tuple = (), device_maps: int = 0) -> KernelInfo:
    """The ``KernelInfo`` of entry ``fn`` (a ``tileiras.ir.core.Function``) on ``gpu_name``.

    ``threads`` overrides the hint-derived CTA size when the lowering picks its own (the real
    tool adds producer warps to some warp-specialized kernels); ``.maxnreg`` follows it.
    """
    hints = hints_for_arch(fn.hints, gpu_name)
    if threads is None:
        threads = threads_per_cta(hints.get(HINT_NUM_WORKER_WARPS))
    cga = hints.get(HINT_NUM_CTA_IN_CGA, 1) if has_clusters(gpu_name) else 1
    return KernelInfo(
        name=fn.name,
        param_types=tuple(param_scalar_type(t) for t in fn.type.inputs),
        threads_per_cta=threads,
        maxnreg=maxnreg_for_occupancy(hints.get(HINT_OCCUPANCY), threads),
        num_cta_in_cga=max(cga, 1),
        arch=gpu_name,
        tensor_maps=tensor_maps,
        device_maps=device_maps,
    )


def entry_directives(info: KernelInfo) -> list[str]:
    """The performance directives after an entry's parameter list, in the real tool's order."""
    lines = [f".reqntid {info.threads_per_cta}", ".minnctapersm 1"]
    if info.device_maps:
        # the per-CTA memory the driver may give the maps the kernel builds (%perctamemoryoffset)
        lines.append(f".minperctamemory {TENSOR_MAP_BYTES * info.device_maps}")
    if info.maxnreg is not None:
        lines.append(f".maxnreg {info.maxnreg}")
    if info.is_cluster:
        lines += [f".reqnctapercluster {info.num_cta_in_cga}", ".blocksareclusters"]
    lines.append(f".language {LANGUAGE_TILEIR}")
    return lines
