"""The host object ptxas embeds as ``.nv.host``: the ``__CUDA_TILEIR_*`` callback table.

NVIDIA's tileiras compiles a small LLVM module (``LLVMDialectModule``) for the host, large
code model, position independent, and passes the object to ``ptxas --nv-host``.  The CUDA
driver reads it when it loads a Tile IR cubin.  Its contents (reference ABI notes, section 2a):

* ``__CUDA_TILEIR_FUNC_NAME_i``: kernel i's symbol name, NUL-terminated (``.lrodata``);
* ``__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_i(?, ?, ?, param_buf) -> i32``: fills hidden
  parameters (tensor maps) from the user arguments; returns 0.  Here each map of
  ``KernelInfo.tensor_maps`` is written at its offset (``abi.tensor_map_offsets``) as
  ``tensormap.encode`` writes it, from the base pointer, shapes and strides read at their
  offsets in the buffer; a kernel without maps returns 0 at once;
  A kernel that builds tensor maps itself (``KernelInfo.device_maps``) also gets the
  address of the workspace the driver allocated for it (the 64-bit word at the second
  argument + 8) in its hidden ``.u64`` parameter (``abi.workspace_offset``);
* ``__CUDA_TILEIR_FUNC_CALLBACKS``: 64 bytes per kernel, name at +0, callback at +0x28;
* ``__CUDA_TILEIR_CALLBACKS`` (global): ``{2, 0, W, 0, 64, &FUNC_CALLBACKS, #kernels, 2,
  &ON_PRE_LOAD}``, W the bytes of device workspace the kernels need (0 for most);
* ``__CUDA_TILEIR_ON_PRE_LOAD(tbl, h, ver, out) -> i32`` (global): 1 for ``ver == 0``;
  for ``ver < 2`` first asks the driver ``(*(tbl + 0x30))(h, 16, &int)``; then copies
  CALLBACKS into ``__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD`` (``.lbss``) with slot 2 zeroed,
  stores its address to ``*out`` and returns 0.

The module is written as LLVM IR text and compiled with llvmlite's X86 back end; the same
input gives the same bytes.  ``--host-os=windows`` keeps ELF but uses the Microsoft x64
calling convention.  ``--host-arch=aarch64`` needs an LLVM with the AArch64 target.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..errors import CompileError
from ..record import record
from ..lower.tma import MapField
from . import tensormap
from .abi import WORKSPACE_SMS, KernelInfo, kind_layout, param_offsets, tensor_map_offsets, workspace_offset
from .llvm_targets import init_llvm

if TYPE_CHECKING:  # pragma: no cover
    from llvmlite import binding as llvm

MODULE_NAME = "LLVMDialectModule"
CALLBACK_TABLE_VERSION = 2
FUNC_CALLBACKS_ENTRY_SIZE = 64
PRE_LOAD_VERSION = 2
DEVICE_ATTRIBUTE_QUERY = 16  # passed to the driver callback at tbl+0x30 (likely the SM count)
WORKSPACE_AT = 8  # ON_ARGUMENTS_CHANGE's second argument: the workspace's address at +8

HOST_ARCHS = ("x86_64", "aarch64")
HOST_OSES = ("linux", "windows")


@record(frozen=True)
class HostTarget:
    """Where the host object runs: ``--host-arch`` and ``--host-os``."""

    arch: str = "x86_64"
    os: str = "linux"

    @property
    def triple(self) -> str:
        if self.os == "windows":
            return f"{self.arch}-pc-windows-elf"
        return f"{self.arch}-unknown-linux-gnu"

    @property
    def code_model(self) -> str:
        # Large on both: x86-64 puts everything in .ltext/.lrodata/.lbss; AArch64 keeps the
        # usual section names but writes 8-byte .eh_frame pointers (R_AARCH64_PREL64).
        return "large"

    @property
    def calling_convention(self) -> str:
        return "win64cc " if self.os == "windows" and self.arch == "x86_64" else ""


def _c_string(name: str) -> tuple[str, int]:
    """LLVM ``c"..."`` body and byte length (with the NUL) of ``name``."""
    data = name.encode("utf-8") + b"\0"
    body = "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\{b:02X}"
                   for b in data)
    return body, len(data)


_TYPES = """\
%CallbackTable = type { i64, i64, i64, i64, i64, ptr, i64, i64, ptr }
%FuncCallbacks = type { ptr, i64, i64, i64, i64, ptr, i64, i64 }
"""


def _workspace_bytes(kernels: Sequence[KernelInfo]) -> int:
    """Slot 2 of the callback table: the device workspace the driver allocates for the
    kernels that build tensor maps (the largest any of them needs)."""
    return max((k.workspace_bytes for k in kernels), default=0)


def _globals_ir(kernels: Sequence[KernelInfo]) -> str:
    lines = ["@__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD = internal global %CallbackTable zeroinitializer"]
    for i, k in enumerate(kernels):
        body, size = _c_string(k.name)
        lines.append(f'@__CUDA_TILEIR_FUNC_NAME_{i} = internal constant [{size} x i8] c"{body}"')
    entries = ", ".join(
        f"%FuncCallbacks {{ ptr @__CUDA_TILEIR_FUNC_NAME_{i}, i64 0, i64 0, i64 0, i64 0, "
        f"ptr @__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_{i}, i64 0, i64 0 }}"
        for i in range(len(kernels)))
    lines.append(f"@__CUDA_TILEIR_FUNC_CALLBACKS = internal constant "
                 f"[{len(kernels)} x %FuncCallbacks] [{entries}]")
    lines.append(
        f"@__CUDA_TILEIR_CALLBACKS = constant %CallbackTable {{ i64 {CALLBACK_TABLE_VERSION}, "
        f"i64 0, i64 {_workspace_bytes(kernels)}, i64 0, i64 {FUNC_CALLBACKS_ENTRY_SIZE}, ptr @__CUDA_TILEIR_FUNC_CALLBACKS, "
        f"i64 {len(kernels)}, i64 {PRE_LOAD_VERSION}, ptr @__CUDA_TILEIR_ON_PRE_LOAD }}")
    return "\n".join(lines) + "\n"


def _on_arguments_change_ir(index: int, cc: str, kernel: KernelInfo) -> str:
    # Emitted last kernel first, as the real tool does (its symbols come out in that order).
    body = "".join(_fill_map_ir(kernel, k, at) for k, at in enumerate(tensor_map_offsets(kernel)))
    if kernel.workspace_name:
        body += _workspace_ir(workspace_offset(kernel))
    return (f"define internal {cc}i32 @__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_{index}"
            f"(ptr %0, ptr %launch, ptr %2, ptr %param_buf) {{\n{body}  ret i32 0\n}}\n")


def _workspace_ir(at: int) -> str:
    """The workspace the driver allocated (its address at ``launch + 8``) stored in the
    kernel's hidden ``.u64`` parameter at ``at``."""
    return (f"  %ws.from = getelementptr inbounds i8, ptr %launch, i64 {WORKSPACE_AT}\n"
            f"  %ws = load i64, ptr %ws.from, align 8\n"
            f"  %ws.to = getelementptr inbounds i8, ptr %param_buf, i64 {at}\n"
            f"  store i64 %ws, ptr %ws.to, align 1\n")


def _read_field_ir(kernel: KernelInfo, field: MapField, name: str) -> tuple[str, str]:
    """(IR, i64 operand) of one map field: a constant, or the parameter zero-extended."""
    if field.param is None:
        return "", str(field.value)
    at = param_offsets(kernel.param_types)[field.param]
    bits = 8 * kind_layout(field.kind)[0]
    ir = (f"  %{name}.at = getelementptr inbounds i8, ptr %param_buf, i64 {at}\n"
          f"  %{name}.raw = load i{bits}, ptr %{name}.at, align 1\n")
    if bits == 64:
        return ir, f"%{name}.raw"
    return ir + f"  %{name} = zext i{bits} %{name}.raw to i64\n", f"%{name}"


def _store_ir(name: str, ty: str, value: str, at: int) -> str:
    """Store into the map whose fields are named ``m<k>.*`` (the map is ``%m<k>.map``)."""
    base = name.split(".")[0]
    return (f"  %{name}.to = getelementptr inbounds i8, ptr %{base}.map, i64 {at}\n"
            f"  store {ty} {value}, ptr %{name}.to, align 1\n")


def _fill_map_ir(kernel: KernelInfo, k: int, at: int) -> str:
    """Map ``k`` written at ``at`` in the buffer from the user arguments, as
    ``tensormap.encode`` writes it: address, flags word (bit 21 from the span), byte strides
    / 16, dims - 1, box - 1, zeros elsewhere."""
    spec = kernel.tensor_maps[k]
    p = f"m{k}"
    out = [f"  %{p}.map = getelementptr inbounds i8, ptr %param_buf, i64 {at}\n"]
    out += [f"  %{p}.z{i}.to = getelementptr inbounds i8, ptr %{p}.map, i64 {8 * i}\n"
            f"  store i64 0, ptr %{p}.z{i}.to, align 1\n" for i in range(tensormap.MAP_BYTES // 8)]
    ir, address = _read_field_ir(kernel, spec.base, f"{p}.base")
    out += [ir, f"  store i64 {address}, ptr %{p}.map, align 1\n"]
    dims, strides = [], []
    for i, field in enumerate(spec.dims):
        ir, value = _read_field_ir(kernel, field, f"{p}.d{i}")
        dims.append(value)
        out.append(ir)
    for i, field in enumerate(spec.strides):
        ir, value = _read_field_ir(kernel, field, f"{p}.s{i}")
        out += [ir, f"  %{p}.sb{i} = mul i64 {value}, {spec.element_bytes}\n"]
        strides.append(f"%{p}.sb{i}")
    out.append(f"  %{p}.span0 = mul i64 {dims[0]}, {spec.element_bytes}\n")
    for i, stride in enumerate(strides):
        out += [f"  %{p}.dm{i} = sub i64 {dims[i + 1]}, 1\n",
                f"  %{p}.ext{i} = mul i64 %{p}.dm{i}, {stride}\n",
                f"  %{p}.span{i + 1} = add i64 %{p}.span{i}, %{p}.ext{i}\n"]
    word = (tensormap.FIXED_BITS | (len(dims) - 1) << tensormap.RANK_SHIFT
            | spec.element_type << tensormap.TYPE_SHIFT | spec.swizzle << tensormap.SWIZZLE_SHIFT)
    out += [f"  %{p}.large = icmp uge i64 %{p}.span{len(strides)}, {tensormap.LARGE_SPAN}\n",
            f"  %{p}.word = select i1 %{p}.large, i32 {word | tensormap.LARGE_BIT}, i32 {word}\n",
            _store_ir(f"{p}.w", "i32", f"%{p}.word", 8)]
    for i, stride in enumerate(strides):
        out += [f"  %{p}.sh{i} = lshr i64 {stride}, 4\n", f"  %{p}.st{i} = trunc i64 %{p}.sh{i} to i32\n",
                _store_ir(f"{p}.s{i}", "i32", f"%{p}.st{i}", tensormap.STRIDES_AT + 4 * i)]
    for i, dim in enumerate(dims):
        out += [f"  %{p}.dd{i} = sub i64 {dim}, 1\n", f"  %{p}.dt{i} = trunc i64 %{p}.dd{i} to i32\n",
                _store_ir(f"{p}.dim{i}", "i32", f"%{p}.dt{i}", tensormap.DIMS_AT + 4 * i)]
    for i, box in enumerate(spec.box):
        out.append(_store_ir(f"{p}.b{i}", "i8", str(box - 1), tensormap.BOX_AT + i))
    return "".join(out)


def _publish_ir(label: str, workspace: str = "0") -> str:
    """Copy CALLBACKS (slot 2 set to ``workspace``) to the static copy and hand out its address."""
    return f"""\
{label}:
  %callbacks.{label} = load %CallbackTable, ptr @__CUDA_TILEIR_CALLBACKS, align 16
  %copy.{label} = insertvalue %CallbackTable %callbacks.{label}, i64 {workspace}, 2
  store %CallbackTable %copy.{label}, ptr @__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD, align 16
  store ptr @__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD, ptr %out, align 8
  ret i32 0
"""


def _on_pre_load_ir(cc: str, kernels: Sequence[KernelInfo]) -> str:
    # The copy is written out on both paths, as in the real object (two copies, 5 relocations).
    # Callers of version 2 get slot 2 zeroed; older ones the workspace for the SM count the
    # driver reports (NVIDIA's grouped GEMM, measured: 3 maps, 132 SMs -> 132 * 3 * 8192).
    per_sm = max((k.workspace_bytes for k in kernels), default=0) // WORKSPACE_SMS
    workspace, sized = "0", ""
    if per_sm:
        workspace = "%workspace"
        sized = ("  %sms = load i32, ptr %value, align 4\n  %sms.wide = sext i32 %sms to i64\n"
                 f"  %workspace = mul i64 %sms.wide, {per_sm}\n")
    return f"""\
define {cc}i32 @__CUDA_TILEIR_ON_PRE_LOAD(ptr %table, ptr %handle, i32 %version, ptr %out) {{
entry:
  %value = alloca i32, align 4
  %unsupported = icmp eq i32 %version, 0
  br i1 %unsupported, label %refuse, label %check
check:
  %current_version = icmp sgt i32 %version, {PRE_LOAD_VERSION - 1}
  br i1 %current_version, label %current, label %query
{_publish_ir("current")}refuse:
  ret i32 1
query:
  %slot = getelementptr inbounds i8, ptr %table, i64 48
  %query_fn = load ptr, ptr %slot, align 8
  %ignored = call {cc}i32 %query_fn(ptr %handle, i32 {DEVICE_ATTRIBUTE_QUERY}, ptr %value)
{sized}  br label %queried
{_publish_ir("queried", workspace)}}}
"""


def host_module_ir(kernels: Sequence[KernelInfo], target: HostTarget = HostTarget()) -> str:
    """The LLVM IR text of the host module for ``kernels`` (in entry order)."""
    cc = target.calling_convention
    parts = [f"; ModuleID = '{MODULE_NAME}'\n", f'source_filename = "{MODULE_NAME}"\n',
             f'target triple = "{target.triple}"\n\n', _TYPES, "\n", _globals_ir(kernels), "\n"]
    parts += [_on_arguments_change_ir(i, cc, kernels[i]) + "\n" for i in reversed(range(len(kernels)))]
    parts.append(_on_pre_load_ir(cc, kernels))
    return "".join(parts)


def _target_machine(target: HostTarget) -> llvm.TargetMachine:
    from llvmlite import binding as llvm

    init_llvm()
    try:
        llvm_target = llvm.Target.from_triple(target.triple)
    except RuntimeError:
        raise CompileError(f"host architecture '{target.arch}' is not supported: this LLVM "
                           f"(llvmlite) lacks its back end") from None
    return llvm_target.create_target_machine(opt=2, reloc="pic", codemodel=target.code_model)


def check_host_target(arch: str, os: str) -> HostTarget:
    if arch not in HOST_ARCHS:
        raise CompileError(f"unsupported host architecture '{arch}'")
    if os not in HOST_OSES:
        raise CompileError(f"unsupported host OS '{os}'")
    return HostTarget(arch, os)


def build_host_object(kernels: Sequence[KernelInfo], target: HostTarget = HostTarget()) -> bytes:
    """The ELF relocatable ptxas embeds as ``.nv.host`` (only for modules with kernels)."""
    from llvmlite import binding as llvm

    tm = _target_machine(target)
    module = llvm.parse_assembly(host_module_ir(kernels, target))
    module.triple = target.triple
    module.data_layout = str(tm.target_data)
    module.verify()
    return tm.emit_object(module)
