"""The ``.nv.host`` host object (tileiras.codegen.host).

Its structure (sections, symbols, relocation kinds) must equal the object NVIDIA's tileiras
embeds: a table taken from the real tool is checked here without any NVIDIA tool, and when
the real ``tileiras`` is installed (test extra) it compiles ``examples/vadd.tileir`` and the
object is pulled out of its cubin and compared directly.  Function bodies may differ in size:
``ON_ARGUMENTS_CHANGE_i`` is ``return 0`` here, where the real one keeps dead offset arithmetic.
"""
from __future__ import annotations

import io
import struct
import subprocess
from pathlib import Path

import pytest

from tileiras.codegen.abi import KernelInfo, kernel_info_from_function
from tileiras.codegen.host import HostTarget, build_host_object, check_host_target, host_module_ir
from tileiras.codegen.ptxas import nv_host_section
from tileiras.errors import CompileError
from tileiras.reader import read_bytecode
from tileiras.tools import find_tileiras

elftools = pytest.importorskip("elftools")
from elftools.elf.elffile import ELFFile  # noqa: E402
from elftools.elf.relocation import RelocationSection  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VADD = ROOT / "examples" / "vadd.tileir"

THREE = [KernelInfo(n, ()) for n in ("k_f32", "k_f16", "k_i64_with_a_longer_name")]

#: Structure of the real x86-64 object for a three-kernel module (tileiras 13.5.37, sm_90);
#: a None addend depends on name lengths or code size.
REAL_X86_64_SECTIONS = [
    ("", "SHT_NULL", 0), (".strtab", "SHT_STRTAB", 1), (".text", "SHT_PROGBITS", 4),
    (".ltext", "SHT_PROGBITS", 16), (".rela.ltext", "SHT_RELA", 8), (".lbss", "SHT_NOBITS", 16),
    (".lrodata", "SHT_PROGBITS", 16), (".data.rel.ro", "SHT_PROGBITS", 16),
    (".rela.data.rel.ro", "SHT_RELA", 8), (".note.GNU-stack", "SHT_PROGBITS", 1),
    (".eh_frame", "SHT_AMD64_UNWIND", 8), (".rela.eh_frame", "SHT_RELA", 8), (".symtab", "SHT_SYMTAB", 8),
]
REAL_X86_64_SYMBOLS = [
    ("", "STT_NOTYPE", "STB_LOCAL", None),
    ("LLVMDialectModule", "STT_FILE", "STB_LOCAL", None),
    (".ltext", "STT_SECTION", "STB_LOCAL", ".ltext"),
    ("__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_2", "STT_FUNC", "STB_LOCAL", ".ltext"),
    ("__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_1", "STT_FUNC", "STB_LOCAL", ".ltext"),
    ("__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_0", "STT_FUNC", "STB_LOCAL", ".ltext"),
    ("__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD", "STT_OBJECT", "STB_LOCAL", ".lbss"),
    (".lbss", "STT_SECTION", "STB_LOCAL", ".lbss"),
    ("__CUDA_TILEIR_FUNC_NAME_0", "STT_OBJECT", "STB_LOCAL", ".lrodata"),
    (".lrodata", "STT_SECTION", "STB_LOCAL", ".lrodata"),
    ("__CUDA_TILEIR_FUNC_NAME_1", "STT_OBJECT", "STB_LOCAL", ".lrodata"),
    ("__CUDA_TILEIR_FUNC_NAME_2", "STT_OBJECT", "STB_LOCAL", ".lrodata"),
    ("__CUDA_TILEIR_FUNC_CALLBACKS", "STT_OBJECT", "STB_LOCAL", ".data.rel.ro"),
    (".data.rel.ro", "STT_SECTION", "STB_LOCAL", ".data.rel.ro"),
    ("__CUDA_TILEIR_ON_PRE_LOAD", "STT_FUNC", "STB_GLOBAL", ".ltext"),
    ("_GLOBAL_OFFSET_TABLE_", "STT_NOTYPE", "STB_GLOBAL", None),
    ("__CUDA_TILEIR_CALLBACKS", "STT_OBJECT", "STB_GLOBAL", ".data.rel.ro"),
]
REAL_X86_64_RELOCATIONS = {
    ".rela.ltext": [("R_X86_64_GOTPC64", "_GLOBAL_OFFSET_TABLE_", 9),
                    ("R_X86_64_GOT64", "__CUDA_TILEIR_CALLBACKS", 0), ("R_X86_64_GOTOFF64", ".lbss", 0),
                    ("R_X86_64_GOT64", "__CUDA_TILEIR_CALLBACKS", 0), ("R_X86_64_GOTOFF64", ".lbss", 0)],
    ".rela.data.rel.ro": [("R_X86_64_64", ".lrodata", 0x00), ("R_X86_64_64", ".ltext", None),
                          ("R_X86_64_64", ".lrodata", None), ("R_X86_64_64", ".ltext", None),
                          ("R_X86_64_64", ".lrodata", None), ("R_X86_64_64", ".ltext", 0),
                          ("R_X86_64_64", ".data.rel.ro", 0),
                          ("R_X86_64_64", "__CUDA_TILEIR_ON_PRE_LOAD", 0)],
    ".rela.eh_frame": [("R_X86_64_PC64", ".ltext", None)] * 4,
}


def elf(data: bytes) -> ELFFile:
    return ELFFile(io.BytesIO(data))


def section_table(e: ELFFile) -> list[tuple]:
    return [(s.name, s["sh_type"], s["sh_addralign"]) for s in e.iter_sections()]


def symbol_table(e: ELFFile) -> list[tuple]:
    names = [s.name for s in e.iter_sections()]
    out = []
    for sym in e.get_section_by_name(".symtab").iter_symbols():
        ndx = sym["st_shndx"]
        section = names[ndx] if isinstance(ndx, int) and ndx else None
        name = section if sym["st_info"]["type"] == "STT_SECTION" else sym.name
        out.append((name, sym["st_info"]["type"], sym["st_info"]["bind"], section))
    return out


def relocation_table(e: ELFFile, with_addends: bool = True) -> dict[str, list[tuple]]:
    from elftools.elf.descriptions import describe_reloc_type

    symtab = e.get_section_by_name(".symtab")
    out = {}
    for s in e.iter_sections():
        if isinstance(s, RelocationSection):
            out[s.name] = [(describe_reloc_type(r["r_info_type"], e), symtab.get_symbol(r["r_info_sym"]).name
                            or e.get_section(symtab.get_symbol(r["r_info_sym"])["st_shndx"]).name,
                            r["r_addend"] if with_addends else None) for r in s.iter_relocations()]
    return out


def structure(data: bytes) -> tuple:
    """Everything but code bytes and function sizes."""
    e = elf(data)
    relocs = {k: [(t, s) for t, s, _ in v] for k, v in relocation_table(e).items()}
    return e["e_machine"], e["e_type"], section_table(e), symbol_table(e), relocs


def test_structure_equals_real_x86_64() -> None:
    e = elf(build_host_object(THREE))
    assert (e["e_machine"], e["e_type"], e.elfclass) == ("EM_X86_64", "ET_REL", 64)
    assert section_table(e) == REAL_X86_64_SECTIONS
    assert symbol_table(e) == REAL_X86_64_SYMBOLS
    relocs = relocation_table(e)
    assert relocs.keys() == REAL_X86_64_RELOCATIONS.keys()
    for name, expected in REAL_X86_64_RELOCATIONS.items():
        assert [(t, s) for t, s, _ in relocs[name]] == [(t, s) for t, s, _ in expected], name
        assert [a for _, _, a in relocs[name]] == [a if a is not None else b
                                                   for (_, _, a), (_, _, b) in zip(expected, relocs[name])]


def test_section_flags() -> None:
    e = elf(build_host_object(THREE))
    large = 0x10000000  # SHF_X86_64_LARGE
    assert e.get_section_by_name(".ltext")["sh_flags"] == 0x6 | large      # AX + large
    assert e.get_section_by_name(".lbss")["sh_flags"] == 0x3 | large       # WA + large
    assert e.get_section_by_name(".lrodata")["sh_flags"] == 0x2 | large    # A + large
    assert e.get_section_by_name(".data.rel.ro")["sh_flags"] == 0x3
    assert e.get_section_by_name(".lbss")["sh_size"] == 72


def qwords_with_relocations(e: ELFFile, section: str) -> list:
    """The section as 8-byte slots; relocated slots become ``(symbol or section, addend)``."""
    data = e.get_section_by_name(section).data()
    slots: list = list(struct.unpack(f"<{len(data) // 8}Q", data))
    symtab = e.get_section_by_name(".symtab")
    for r in e.get_section_by_name(f".rela{section}").iter_relocations():
        sym = symtab.get_symbol(r["r_info_sym"])
        name = sym.name or e.get_section(sym["st_shndx"]).name
        slots[r["r_offset"] // 8] = (name, r["r_addend"])
    return slots


def test_callback_tables() -> None:
    e = elf(build_host_object(THREE))
    symbols = {s.name: s for s in e.get_section_by_name(".symtab").iter_symbols()}
    slots = qwords_with_relocations(e, ".data.rel.ro")
    cb = symbols["__CUDA_TILEIR_CALLBACKS"]
    func_cb = symbols["__CUDA_TILEIR_FUNC_CALLBACKS"]
    assert (cb["st_size"], func_cb["st_size"]) == (72, 3 * 64)
    table = slots[cb["st_value"] // 8:cb["st_value"] // 8 + 9]
    assert table == [2, 0, 0, 0, 0x40, (".data.rel.ro", func_cb["st_value"]), 3, 2,
                     ("__CUDA_TILEIR_ON_PRE_LOAD", 0)]
    names = e.get_section_by_name(".lrodata").data()
    for i, info in enumerate(THREE):
        entry = slots[func_cb["st_value"] // 8 + 8 * i:func_cb["st_value"] // 8 + 8 * (i + 1)]
        name_sym, cb_sym = symbols[f"__CUDA_TILEIR_FUNC_NAME_{i}"], symbols[f"__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_{i}"]
        assert entry == [(".lrodata", name_sym["st_value"]), 0, 0, 0, 0, (".ltext", cb_sym["st_value"]), 0, 0]
        start = name_sym["st_value"]
        assert names[start:start + name_sym["st_size"]] == info.name.encode() + b"\0"


def test_deterministic() -> None:
    assert build_host_object(THREE) == build_host_object(list(THREE))


def test_names_are_escaped() -> None:
    ir = host_module_ir([KernelInfo('odd"\\name', ())])
    assert 'c"odd\\22\\5Cname\\00"' in ir
    assert build_host_object([KernelInfo('odd"\\name', ())])


def test_windows_uses_the_microsoft_calling_convention() -> None:
    linux, windows = build_host_object(THREE), build_host_object(THREE, HostTarget("x86_64", "windows"))
    assert "win64cc" in host_module_ir(THREE, HostTarget("x86_64", "windows"))
    assert linux != windows
    assert section_table(elf(windows)) == REAL_X86_64_SECTIONS
    # dso-local on Windows: CALLBACKS is addressed directly, as in the real object
    assert [t for t, _, _ in relocation_table(elf(windows))[".rela.ltext"]] == [
        "R_X86_64_GOTPC64", "R_X86_64_64", "R_X86_64_GOTOFF64", "R_X86_64_64", "R_X86_64_GOTOFF64"]


def test_aarch64() -> None:
    try:
        data = build_host_object(THREE, HostTarget("aarch64", "linux"))
    except CompileError as err:  # an llvmlite built without the AArch64 back end
        pytest.skip(str(err))
    e = elf(data)
    assert e["e_machine"] == "EM_AARCH64"
    assert [s.name for s in e.iter_sections()][2:7] == [".text", ".rela.text", ".bss", ".rodata", ".data.rel.ro"]
    assert {t for t, _, _ in relocation_table(e)[".rela.eh_frame"]} == {"R_AARCH64_PREL64"}


def test_bad_host_target() -> None:
    with pytest.raises(CompileError):
        check_host_target("riscv64", "linux")
    with pytest.raises(CompileError):
        check_host_target("x86_64", "macos")
    assert check_host_target("aarch64", "linux") == HostTarget("aarch64", "linux")


# --------------------------------------------------------------------------- against NVIDIA's tileiras

REAL_VARIANTS = [([], HostTarget()), (["--host-os=windows"], HostTarget("x86_64", "windows")),
                 (["--host-arch=aarch64"], HostTarget("aarch64", "linux"))]


@pytest.mark.skipif(find_tileiras() is None, reason="NVIDIA's tileiras not installed")
@pytest.mark.parametrize("gpu", ("sm_80", "sm_90", "sm_100"))
@pytest.mark.parametrize("flags,target", REAL_VARIANTS, ids=["linux", "windows", "aarch64"])
def test_structure_equals_nvidia_tileiras(tmp_path: Path, gpu: str, flags: list, target: HostTarget) -> None:
    out = tmp_path / "vadd.cubin"
    subprocess.run([find_tileiras(), f"--gpu-name={gpu}", *flags, str(VADD), "-o", str(out)], check=True)
    real = nv_host_section(out.read_bytes())
    assert real is not None
    module = read_bytecode(VADD.read_bytes())
    kernels = [kernel_info_from_function(f, gpu) for f in module.functions if f.is_entry]
    try:
        ours = build_host_object(kernels, target)
    except CompileError as err:
        pytest.skip(str(err))
    assert structure(ours) == structure(real)
    assert elf(ours).get_section_by_name(".lrodata" if target.arch == "x86_64" else ".rodata").data() == \
        elf(real).get_section_by_name(".lrodata" if target.arch == "x86_64" else ".rodata").data()
