"""ptxas invocation and the cubins it makes (tileiras.codegen.ptxas).

A tiny kernel written as LLVM IR goes through llvmlite's NVPTX back end, ``finalize_ptx``,
the host object and NVIDIA's ptxas (from the ``nvidia-cuda-nvcc`` wheel of the test extra)
for sm_80/90/100/120.  The cubin must carry what the real tool's cubins carry: ``.nv.host``,
``.nv.info.<kernel>`` with LANGUAGE=7 and REQNTID, and the launch metadata symbol.
"""
from __future__ import annotations

import os
import subprocess

import pytest
from llvmlite import binding as llvm

from tileiras.codegen import ptxas as P
from tileiras.codegen.abi import LAUNCH_METADATA_NAME, KernelInfo, ptx_target
from tileiras.codegen.host import build_host_object
from tileiras.codegen.ptx import finalize_ptx
from tileiras.errors import CompileError
from tileiras.ir.types import F16, F32, I32, I64, PointerType
from tileiras.tools import find_ptxas, find_tileiras

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")

KERNEL_LL = """\
@___NV_TILE_LAUNCH_META_DATA___ = addrspace(1) global [64 x i8] zeroinitializer, align 8

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()

define ptx_kernel void @scale(ptr addrspace(1) %x, i32 %n, half %h, i64 %unused, float %a) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = mul i32 %bid, 128
  %i = add i32 %base, %tid
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %exit
body:
  %idx = sext i32 %i to i64
  %p = getelementptr float, ptr addrspace(1) %x, i64 %idx
  %v = load float, ptr addrspace(1) %p, align 4
  %hf = fpext half %h to float
  %w = fmul float %v, %a
  %r = fadd float %w, %hf
  store float %r, ptr addrspace(1) %p, align 4
  br label %exit
exit:
  ret void
}
"""

SCALE_TYPES = (PointerType(F32), I32, F16, I64, F32)


def llvm_ptx(gpu: str, source: str = KERNEL_LL) -> str:
    """PTX for ``source`` from LLVM's NVPTX back end, as codegen.nvvm produces it."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(source)
    module.triple = "nvptx64-nvidia-cuda"
    tm = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu=ptx_target(gpu), features="+ptx87", opt=3)
    return tm.emit_assembly(module)


def compile_kernels(gpu: str, kernels: list[KernelInfo], source: str = KERNEL_LL, **kwargs) -> P.PtxasResult:
    return P.build_cubin(llvm_ptx(gpu, source), kernels, gpu, 3, **kwargs)


def kernel_attrs(cubin: bytes, kernel: str) -> dict[int, list[bytes]]:
    attrs: dict[int, list[bytes]] = {}
    for a in P.nv_info_attributes(cubin):
        if a.kernel == kernel:
            attrs.setdefault(a.code, []).append(a.data)
    return attrs


def u32s(data: bytes) -> tuple[int, ...]:
    return tuple(int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4))


# --------------------------------------------------------------------------- command line

def test_command_is_the_real_tools() -> None:
    argv = P.ptxas_command("ptxas", "/t/k.ptx", "/t/k.bin", "sm_90", 3, "/t/host.o")
    assert argv == ["ptxas", "-arch", "sm_90a", "/t/k.ptx", "-o", "/t/k.bin", "--opt-level", "3",
                    "--enable-extended-smem=true", "--nv-host=/t/host.o", "-uumn"]


def test_command_variants() -> None:
    assert P.ptxas_command("ptxas", "a", "b", "sm_86", 0)[1:3] == ["-arch", "sm_86"]
    assert "--nv-host" not in " ".join(P.ptxas_command("ptxas", "a", "b", "sm_120", 1))
    sanitized = P.ptxas_command("ptxas", "a", "b", "sm_100", 2, "h.o", sanitize="memcheck")
    assert sanitized[-3:] == ["-uumn", "-sanitize=memcheck", "-g-tmem-access-check"]
    assert P.ptxas_command("ptxas", "a", "b", "sm_100", 2, verbose=True)[-1] == "-v"


def test_parse_verbose_log() -> None:
    log = ("ptxas info    : 64 bytes gmem\n"
           "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n"
           "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem\n")
    assert P.parse_verbose_log(log) == {"k": P.KernelStats(40, 1024, 8, 4, 12, 1)}


# --------------------------------------------------------------------------- with ptxas

@needs_ptxas
@pytest.mark.parametrize("gpu", ARCHS)
def test_cubin_carries_tileir_abi(gpu: str) -> None:
    info = KernelInfo("scale", SCALE_TYPES, 128, None, 1, gpu)
    host = build_host_object([info])
    result = P.invoke_ptxas(finalize_ptx(llvm_ptx(gpu), [info], gpu), gpu, 3, host)
    cubin = result.cubin
    names = [s.name for s in P.read_sections(cubin)]
    assert cubin[:4] == b"\x7fELF" and cubin[7] == 0x41                  # OSABI CUDA
    assert int.from_bytes(cubin[0x12:0x14], "little") == 190                # EM_CUDA
    assert int.from_bytes(cubin[0x30:0x34], "little") >> 8 & 0xFF == int(gpu[3:])  # e_flags SM
    assert ".nv.host" in names and ".text.scale" in names and ".nv.info.scale" in names
    assert ".nv.global" in names and ".nv.constant0.scale" in names
    assert P.nv_host_section(cubin) == host
    attrs = kernel_attrs(cubin, "scale")
    assert u32s(attrs[P.EIATTR_LANGUAGE][0]) == (7,)
    assert u32s(attrs[P.EIATTR_REQNTID][0]) == (128, 1, 1)
    symbols = {s[0]: s for s in P.read_symbols(cubin, P.read_sections(cubin))}
    assert symbols[LAUNCH_METADATA_NAME][2] == 64
    assert result.stats["scale"].registers > 0


@needs_ptxas
def test_nv_host_section_type() -> None:
    cubin = compile_kernels("sm_90", [KernelInfo("scale", SCALE_TYPES)]).cubin
    host = next(s for s in P.read_sections(cubin) if s.name == ".nv.host")
    assert (host.type, host.align) == (0x70000087, 8)


@needs_ptxas
@pytest.mark.parametrize("gpu", ("sm_80", "sm_90", "sm_120"))
def test_cluster_and_maxnreg_reach_the_cubin(gpu: str) -> None:
    info = KernelInfo("scale", SCALE_TYPES, 256, 64, 2, gpu)
    attrs = kernel_attrs(compile_kernels(gpu, [info]).cubin, "scale")
    assert u32s(attrs[P.EIATTR_REQNTID][0]) == (256, 1, 1)
    assert attrs[0x1B] == [(64).to_bytes(2, "little")]  # EIATTR_MAXREG_COUNT
    if gpu == "sm_80":
        assert 0x3D not in attrs and 0x5B not in attrs
    else:
        assert u32s(attrs[0x3D][0]) == (2, 1, 1)  # EIATTR_CTA_PER_CLUSTER
        assert 0x5B in attrs                     # EIATTR_BLOCKS_ARE_CLUSTERS


@needs_ptxas
def test_same_input_same_cubin() -> None:
    info = KernelInfo("scale", SCALE_TYPES, arch="sm_100")
    assert compile_kernels("sm_100", [info]).cubin == compile_kernels("sm_100", [info]).cubin


@needs_ptxas
def test_verbose_stats_agree_with_cubin() -> None:
    info = KernelInfo("scale", SCALE_TYPES, arch="sm_90")
    quiet = compile_kernels("sm_90", [info])
    loud = compile_kernels("sm_90", [info], verbose=True)
    assert "Compiling entry function 'scale'" in loud.log
    assert loud.stats["scale"].registers == quiet.stats["scale"].registers


@needs_ptxas
def test_module_without_functions() -> None:
    # cuTile's version probe: an empty module for sm_120 (byte-identical to the real tool's cubin)
    result = P.build_cubin(llvm_ptx("sm_120", ""), [], "sm_120")
    assert not any(a.startswith("--nv-host") for a in result.command)
    assert ".nv.host" not in [s.name for s in P.read_sections(result.cubin)]


@needs_ptxas
def test_failure_is_the_real_tools_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILEIRAS_DEBUG", raising=False)
    with pytest.raises(P.PtxasError) as info:
        P.invoke_ptxas(".version 9.5\n.target sm_90a\n.address_size 64\nbogus;\n", "sm_90")
    err = info.value
    assert isinstance(err, CompileError) and err.exit_code == 5
    assert str(err) == "error: failed to compile Tile IR program"
    assert "ptxas" in err.log and "-arch sm_90a" in err.repro_cmd and "-uumn" in err.repro_cmd
    monkeypatch.setenv("TILEIRAS_DEBUG", "1")
    loud = str(err)
    assert loud.endswith("error: failed to compile Tile IR program") and err.log.strip() in loud
    assert err.repro_cmd in loud


def test_missing_ptxas() -> None:
    with pytest.raises(P.PtxasError) as info:
        P.invoke_ptxas(".version 9.5\n", "sm_90", ptxas="/nonexistent/ptxas")
    assert "cannot run ptxas" in info.value.log


@needs_ptxas
@pytest.mark.skipif(find_tileiras() is None, reason="NVIDIA's tileiras not installed")
@pytest.mark.parametrize("gpu", ARCHS)
def test_empty_module_is_byte_identical_to_nvidia(tmp_path, gpu: str) -> None:
    from tileiras.ir.core import Module
    from tileiras.ir.version import Version
    from tileiras.writer import write_bytecode

    src, out = tmp_path / "empty.tileir", tmp_path / "empty.cubin"
    src.write_bytes(write_bytecode(Module(Version(13, 1))))
    subprocess.run([find_tileiras(), f"--gpu-name={gpu}", str(src), "-o", str(out)], check=True)
    assert P.build_cubin(llvm_ptx(gpu, ""), [], gpu).cubin == out.read_bytes()


@needs_ptxas
@pytest.mark.parametrize("gpu_name", __import__("tileiras.driver", fromlist=["GPU_NAMES"]).GPU_NAMES)
def test_every_gpu_name_compiles_the_example(gpu_name, tmp_path):
    """Every --gpu-name the driver accepts gives PTX for that target (LLVM stand-ins included:
    sm_107 is unknown to LLVM's NVPTX) with the tile block id read from %clusterid on sm_90+,
    and a cubin ptxas accepts."""
    from pathlib import Path

    from tileiras import driver

    example = Path(__file__).resolve().parent.parent / "examples" / "vadd.tileir"
    ptx_path, cubin_path = tmp_path / "k.ptx", tmp_path / "k.cubin"
    assert driver.main([str(example), f"--gpu-name={gpu_name}", "--emit=ptx", "-o", str(ptx_path)]) == 0
    ptx = ptx_path.read_text()
    assert f".target {ptx_target(gpu_name)}\n" in ptx
    block_id = "%clusterid.x" if int(gpu_name[3:]) >= 90 else "%ctaid.x"
    assert block_id in ptx
    assert driver.main([str(example), f"--gpu-name={gpu_name}", "-o", str(cubin_path)]) == 0
    assert cubin_path.read_bytes()[:4] == b"\x7fELF"


def test_an_interrupt_inside_popen_kills_the_child(monkeypatch, tmp_path):
    """A signal that lands while ``Popen`` is still starting ptxas (after the fork, before it
    returns: a loaded machine widens that window) is raised once the child is known, and
    the child's process group is killed, not left running (``launch.held_interrupts``)."""
    import signal as _signal

    from tileiras.launch import Interrupted, interrupt

    started = []
    real_popen = subprocess.Popen

    def popen_then_signal(*args, **kwargs):
        proc = real_popen(["sh", "-c", f"echo $$ > {tmp_path}/pid; exec sleep 30"], **{
            k: v for k, v in kwargs.items() if k != "text" and k != "errors"})
        started.append(proc)
        while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text().strip():
            pass
        interrupt(_signal.SIGTERM)          # as the handler would, inside Popen
        return proc

    monkeypatch.setattr(P.subprocess, "Popen", popen_then_signal)
    with pytest.raises(Interrupted) as caught:
        P._run_ptxas(["ptxas", "--whatever"])
    assert caught.value.signum == _signal.SIGTERM
    (proc,) = started
    assert proc.returncode == -_signal.SIGKILL           # killed and reaped
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_held_interrupts_raise_when_the_block_ends():
    from tileiras.launch import Interrupted, held_interrupts, interrupt

    ran = []
    with pytest.raises(Interrupted) as caught:
        with held_interrupts():
            interrupt(2)
            ran.append("after the signal")
    assert ran == ["after the signal"] and caught.value.signum == 2
    with pytest.raises(Interrupted):
        interrupt(15)                        # outside a held block: raised where it lands
