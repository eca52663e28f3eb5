"""``tileiras``: the compiler driver, a drop-in for NVIDIA's command line.

    tileiras [options] FILE --gpu-name sm_XX [-o out.cubin] [-O0..3] [--lineinfo | -g]
    tileiras FILE --emit=mlir|bytecode [--bytecode-version=13.x] [-o OUT]

Checks run in the real tool's order: option parse (exit 1) -> read file (1) -> parse
bytecode (3) -> ``--gpu-name`` (2) -> ``-O`` (2) -> ``-g`` (2) -> compile (5) -> write output.
Messages and exit codes follow NVIDIA's tileiras 13.5 (see shared/reference, section 4).
``--emit`` is ours: it stops after reading and prints the module as MLIR text or re-encodes
it as bytecode (optionally at another version), without needing ``--gpu-name``.
"""
from __future__ import annotations

import copy

import os
import sys
from enum import Enum
from typing import Optional, Sequence

from . import cli, hostio
from .errors import EXIT_BAD_OPTION, OptionError, UsageError
from .ir.version import SUPPORTED_VERSIONS, Version, is_supported
from .pipeline import CompileOptions, compile_module
from .record import record

PROG = "tileiras"
TITLE = "tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler"
USAGE = "tileiras [options] <tile bytecode file>"
DEFAULT_OUTPUT = "elf.o"

GPU_NAMES = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
             "sm_107", "sm_110", "sm_120", "sm_121")
HOST_ARCHS = ("x86_64", "aarch64")
HOST_OSES = ("linux", "windows")
REMARK_CATEGORIES = ("none", "all", "memory", "tensorcore")
REMARK_FORMATS = ("command-line", "yaml")
SANITIZERS = ("memcheck",)
OPT_LEVELS = range(0, 4)


class Emit(Enum):
    MLIR = "mlir"
    BYTECODE = "bytecode"
    TILEAA = "tileaa"
    TILEAS = "tileas"
    SCHED = "sched"
    LLVM = "llvm"
    PTX = "ptx"
    CUBIN = "cubin"

    @property
    def needs_target(self) -> bool:
        return self not in (Emit.MLIR, Emit.BYTECODE)


def _remark_option(kind: str) -> cli.HelpOption:
    """``--remarks-<kind>``: the same four categories, worded per remark kind."""
    return cli.HelpOption(f"--remarks-{kind}=<value>", f"Category for {kind} optimization remarks", (
        ("none", f"Disable {kind} remarks"), ("all", f"Show all {kind} remarks"),
        ("memory", f"Show memory-related {kind} remarks"),
        ("tensorcore", f"Show tensor-core {kind} remarks")))


#: ``--help``: NVIDIA's categories and texts, then ours (options NVIDIA's tool lacks).
HELP_CATEGORIES = (cli.GENERIC_OPTIONS, cli.HelpCategory("TileIR Assembler Options", (
    cli.HelpOption("-O", "Alias for --opt-level"),
    cli.HelpOption("--apply-controls=<path>", "Composite ACF file forwarded to libNVVM and, when used, "
                   "direct PTXAS. Paths requiring quoting, including paths with whitespace, are unsupported."),
    cli.HelpOption("--arch", "Alias for --gpu-name"),
    cli.HelpOption("--device-debug", "Generate debug information (if present in the input bytecode)"),
    cli.HelpOption("-g", "Alias for --device-debug"),
    cli.HelpOption("--gpu-name=<value>", "Specify name of NVIDIA GPU to generate code for.",
                   [(n, f"SM {n[3:]}") for n in GPU_NAMES]),
    cli.HelpOption("--host-arch=<value>", "Specify the architecture for the generated host code.",
                   [(a, a) for a in HOST_ARCHS]),
    cli.HelpOption("--host-os=<value>", "Specify the operating system for the generated host code.",
                   [(o, o) for o in HOST_OSES]),
    cli.HelpOption("-l <path>", "Tile libraries to load. Requires the SIMT preview."),
    cli.HelpOption("--lineinfo", "Generate line-number information (if present in the input bytecode)"),
    cli.HelpOption("--list-versions", "List all supported bytecode versions and exit"),
    cli.HelpOption("-o", "Alias for --output-file"),
    cli.HelpOption("--opt-level=<N>", "Specify optimization level. Default Value: 3."),
    cli.HelpOption("--output-file=<file>", "Specify name of output file."),
    cli.HelpOption("--preview=<feature[,feature...]>", "Enable one or more named preview features"),
    cli.HelpOption("--sanitize=<value>", "Enable compiler instrumentation for the sanitizer tool "
                   "specified by the option.", [("memcheck", "Sanitize memory accesses")]),
)), cli.HelpCategory("TileIR Assembler Remark Options", (
    cli.HelpOption("--remark-format=<value>", "Specify the format for remark output", (
        ("command-line", "Print remarks to command-line"), ("yaml", "Write remarks to YAML file"))),
    cli.HelpOption("--remarks=<value>", "Enable all remark types (passed, missed, failed, analysis) "
                   "for the specified category", (
                       ("none", "Disable all remarks"), ("all", "Show all remarks"),
                       ("memory", "Show memory-related remarks"),
                       ("tensorcore", "Show tensor-core remarks"))),
    *(_remark_option(kind) for kind in ("analysis", "failed", "missed", "passed")),
    cli.HelpOption("--remarks-output-file=<string>",
                   "Output file for YAML remark format. Default is tileir_remarks.yaml"),
), "Filter remarks by category."), cli.HelpCategory("Pipeline Options (this tileiras only)", (
    cli.HelpOption("--bytecode-version=<M.m>", "With --emit=bytecode: the version to write"),
    cli.HelpOption("--emit=<value>", "Stop after a stage and write its output instead of the cubin", (
        ("mlir", "MLIR text, as tileirdisasm prints it"),
        ("bytecode", "Tile IR bytecode"),
        ("tileaa", "alias-aware IR: memory dependences and value facts"),
        ("tileas", "scheduled IR: the layout of every tile"),
        ("sched", "modulo schedules of the for loops (not used by codegen yet)"),
        ("llvm", "NVVM LLVM IR"),
        ("ptx", "PTX, as passed to ptxas"),
        ("cubin", "the cubin (the default)"))),
)))

LONG_NAMES = ("help", "help-list", "help-hidden", "help-list-hidden", "print-options",
              "print-all-options", "version", "list-versions", "gpu-name", "arch", "output-file",
              "opt-level", "lineinfo", "device-debug", "host-arch", "host-os", "remarks",
              "remarks-analysis", "remarks-failed", "remarks-missed", "remarks-passed",
              "remark-format", "remarks-output-file", "preview", "sanitize", "apply-controls",
              "emit", "bytecode-version", "preview-create-tile-lib", "preview-interface",
              "preview-implementation")
IMMEDIATE_FLAGS = (*cli.HELP_FLAGS, "--version", "--list-versions")
REMARK_OPTIONS = ("remarks", "remarks_analysis", "remarks_failed", "remarks_missed", "remarks_passed")


@record(frozen=True)
class DriverOptions:
    """The command line after parse-time checks (range checks come later, as in NVIDIA's)."""

    input: str
    output_file: Optional[str]
    gpu_name: Optional[str]
    opt_level: int
    lineinfo: bool
    device_debug: bool
    host_arch: str
    host_os: str
    preview: tuple[str, ...]
    libraries: tuple[str, ...]
    sanitize: Optional[str]
    apply_controls: Optional[str]
    remark_format: str
    remarks: tuple[tuple[str, str], ...]
    remarks_output_file: str
    emit: Optional[Emit]
    bytecode_version: Optional[Version]
    #: NVIDIA's hidden ``--preview-create-tile-lib`` mode and its two inputs (tilelib.py)
    create_tile_lib: bool = False
    interface: Optional[str] = None
    implementations: tuple[str, ...] = ()


#: The command line (``-O`` takes its value attached, as ``-O3``; see ``_parse_argv``).
OPTIONS = (
    cli.Option("output_file", ("-o", "--output-file")),
    cli.Option("gpu_name", ("--gpu-name", "--arch")),
    cli.Option("opt_level", ("-O", "--opt-level"), default="3"),
    cli.Option("lineinfo", ("--lineinfo",), flag=True),
    cli.Option("device_debug", ("-g", "--device-debug"), flag=True),
    cli.Option("host_arch", ("--host-arch",), default="x86_64"),
    cli.Option("host_os", ("--host-os",), default="linux"),
    cli.Option("preview", ("--preview",), multiple=True),
    cli.Option("libraries", ("-l",), multiple=True),
    cli.Option("sanitize", ("--sanitize",)),
    cli.Option("apply_controls", ("--apply-controls",)),
    cli.Option("remark_format", ("--remark-format",), default="command-line"),
    cli.Option("remarks", ("--remarks",)),
    cli.Option("remarks_analysis", ("--remarks-analysis",)),
    cli.Option("remarks_failed", ("--remarks-failed",)),
    cli.Option("remarks_missed", ("--remarks-missed",)),
    cli.Option("remarks_passed", ("--remarks-passed",)),
    cli.Option("remarks_output_file", ("--remarks-output-file",), default="tileir_remarks.yaml"),
    cli.Option("emit", ("--emit",)),
    cli.Option("bytecode_version", ("--bytecode-version",)),
    cli.Option("print_options", ("--print-options",), flag=True),  # accepted; NVIDIA's prints nothing either
    cli.Option("print_all_options", ("--print-all-options",), flag=True),
    cli.Option("create_tile_lib", ("--preview-create-tile-lib",), flag=True),
    cli.Option("interface", ("--preview-interface",)),
    cli.Option("implementations", ("--preview-implementation",), multiple=True),
)


def command(**params: object) -> int:
    """Compile one Tile IR bytecode file (or, hidden as in NVIDIA's tool, make a tile library)."""
    options = parse_options(params)
    if options.create_tile_lib:
        return create_tile_library(options)
    return compile_file(options)


def parse_options(params: dict) -> DriverOptions:
    """Parse-time checks: everything NVIDIA's parser rejects with exit code 1."""
    def choice(option: str, value: Optional[str], allowed: Sequence[str]) -> Optional[str]:
        if value is not None and value not in allowed:
            raise cli.CommandLineError(PROG, f"for the {option} option: Cannot find option named '{value}'!")
        return value

    inputs = params["inputs"]
    if len(inputs) > 1:
        raise cli.too_many_positionals(PROG)
    if not inputs and not params["create_tile_lib"]:  # that mode reads no input file
        raise _NoInput()
    choice("--gpu-name", params["gpu_name"], GPU_NAMES)
    choice("--host-arch", params["host_arch"], HOST_ARCHS)
    choice("--host-os", params["host_os"], HOST_OSES)
    choice("--sanitize", params["sanitize"], SANITIZERS)
    choice("--remark-format", params["remark_format"], REMARK_FORMATS)
    for name in REMARK_OPTIONS:
        choice("--" + name.replace("_", "-"), params[name], REMARK_CATEGORIES)
    preview = cli.parse_preview(PROG, params["preview"])
    emit = Emit(choice("--emit", params["emit"], [e.value for e in Emit])) if params["emit"] else None
    return DriverOptions(
        input=inputs[0] if inputs else "", output_file=params["output_file"], gpu_name=params["gpu_name"],
        opt_level=_parse_int("--opt-level", params["opt_level"]),
        lineinfo=params["lineinfo"], device_debug=params["device_debug"],
        host_arch=params["host_arch"], host_os=params["host_os"], preview=preview,
        libraries=tuple(params["libraries"]), sanitize=params["sanitize"],
        apply_controls=params["apply_controls"], remark_format=params["remark_format"],
        remarks=tuple((n, params[n]) for n in REMARK_OPTIONS if params[n] is not None),
        remarks_output_file=params["remarks_output_file"], emit=emit,
        bytecode_version=_parse_bytecode_version(params["bytecode_version"], emit),
        create_tile_lib=params["create_tile_lib"], interface=params["interface"],
        implementations=tuple(params["implementations"]))


def _parse_int(option: str, text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise cli.CommandLineError(
            PROG, f"for the {option} option: '{text}' value invalid for integer argument!") from None


def _parse_bytecode_version(text: Optional[str], emit: Optional[Emit]) -> Optional[Version]:
    if text is None:
        return None
    if emit is not Emit.BYTECODE:
        raise cli.CommandLineError(PROG, "for the --bytecode-version option: requires --emit=bytecode")
    supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
    try:
        version = Version.parse(text)
    except ValueError:
        version = None
    if version is None or not is_supported(version):
        raise cli.CommandLineError(
            PROG, f"for the --bytecode-version option: unsupported bytecode version '{text}'; "
            f"supported versions: {supported}")
    return version


class _NoInput(UsageError):
    def __str__(self) -> str:
        return "error: no input file provided\n"

    def __init__(self) -> None:
        super().__init__("no input file provided")


def compile_file(options: DriverOptions) -> int:
    from .tile.codes import MAGIC

    data = cli.read_input_file(options.input)
    needs_target = options.emit is None or options.emit.needs_target
    is_bytecode = data.startswith(MAGIC) or options.emit is None
    if needs_target and is_bytecode:  # NVIDIA's order: header, options, then the sections
        from .reader import read_header_version

        check_codegen_options(options, read_header_version(data))
    module = read_input_module(data, options.input, options.bytecode_version, text_ok=options.emit is not None,
                               preview=options.preview)
    if not needs_target:
        output = emit_module(module, options)
        cli.write_output(options.output_file or "-", output, EXIT_BAD_OPTION)
        return 0
    if not is_bytecode:
        check_codegen_options(options, module.version)
    if options.libraries:
        from . import tilelib

        tilelib.link(module, options.libraries, options.preview)
    stage = options.emit.value if options.emit else "cubin"
    # the passes rewrite what they compile (cluster-split divides a block's tiles): the
    # remarks run the passes again, on the program as read
    as_read = copy.deepcopy(module) if options.remarks else None
    result = compile_module(module, CompileOptions(
        gpu_name=options.gpu_name, opt_level=options.opt_level, lineinfo=options.lineinfo,
        device_debug=options.device_debug, host_arch=options.host_arch, host_os=options.host_os,
        sanitize=options.sanitize), stage)
    output = result if isinstance(result, bytes) else result.encode("utf-8")
    default = DEFAULT_OUTPUT if options.emit in (None, Emit.CUBIN) else "-"
    cli.write_output(options.output_file or default, output, EXIT_BAD_OPTION)
    if options.remarks:
        emit_remarks(as_read, options)
    return 0


def create_tile_library(options: DriverOptions) -> int:
    """``--preview-create-tile-lib``: the interface and implementation files in one
    object (``-o``, default ``elf.o``), as NVIDIA's tool writes it."""
    from . import tilelib

    library = tilelib.create(options.interface, options.implementations, options.host_arch, options.host_os)
    path = options.output_file or tilelib.DEFAULT_OUTPUT
    try:
        hostio.write_file(path, library)
    except OSError as e:
        raise OptionError(f"could not open output file {path}: cannot open output file '{path}': "
                          f"{os.strerror(e.errno or 0)}") from None
    return 0


def emit_remarks(module: object, options: DriverOptions) -> None:
    """``--remarks*``: YAML to ``--remarks-output-file`` or text on stdout."""
    from . import remarks

    chosen = remarks.selected(remarks.collect(module, options.gpu_name), remarks.enabled_from_options(options.remarks))
    if options.remark_format == "yaml":
        cli.write_output(options.remarks_output_file, remarks.to_yaml(chosen).encode(), EXIT_BAD_OPTION)
    elif chosen:
        sys.stdout.write(remarks.to_command_line(chosen))


def read_input_module(data: bytes, filename: str, version: Optional[Version], text_ok: bool,
                      preview: tuple[str, ...] = ()) -> object:
    """Bytecode (recognized by its magic) or, with ``--emit`` (ours, not NVIDIA's),
    Tile IR text, read and verified.

    Text is parsed with every op located at its line, so verifier errors read
    ``loc("in.mlir":LINE:COL): error: ...`` (exit code 3); the module targets
    ``version`` (the newest by default).  Without ``--emit`` the tool stays
    NVIDIA's: anything but bytecode is "not Tile IR bytecode"."""
    from .tile.codes import MAGIC

    if data.startswith(MAGIC) or not text_ok or not _looks_like_text(data):
        return cli.read_module(data, preview)
    from .ir.version import NEWEST
    from .text.parser import parse_text_input

    return parse_text_input(data, filename, version or NEWEST)


def _looks_like_text(data: bytes) -> bool:
    return bool(data.strip()) and b"\x00" not in data and not data.startswith(b"\x7f")


def emit_module(module: object, options: DriverOptions) -> bytes:
    if options.emit is Emit.MLIR:
        from .text.printer import print_module

        return print_module(module, debug_info=options.device_debug).encode("utf-8")
    from .writer import write_bytecode

    return write_bytecode(module, version=options.bytecode_version)


def check_codegen_options(options: DriverOptions, file_version: Version) -> None:
    """The checks NVIDIA's tool makes after reading the bytecode header (exit code 2)."""
    if options.gpu_name is None:
        raise OptionError(
            "GPU architecture sm_0 is not supported by this version of tileiras. You may need a "
            "newer toolchain that supports this architecture "
            f"(bytecode in file is version {file_version}).")
    if options.opt_level not in OPT_LEVELS:
        raise OptionError(f"invalid optimization level: {options.opt_level}")
    if options.device_debug and options.opt_level != 0:
        raise OptionError("optimized debugging is currently not supported, change the "
                          "optimization level to 0 or disable full debug info")
    if options.apply_controls:  # NVIDIA's 13.5 refuses every ACF file on Linux and Windows
        raise OptionError("--apply-controls is not supported on this platform")


def help_text(flag: str = "--help") -> str:
    return cli.format_help(TITLE, USAGE, HELP_CATEGORIES, flag)


def immediate_output(flag: str) -> str:
    if flag == "--version":
        return cli.format_version(TITLE)
    if flag == "--list-versions":
        return "".join(f"{v}\n" for v in SUPPORTED_VERSIONS)
    return help_text(flag)


def run(argv: Sequence[str]) -> int:
    argv = cli.normalize_argv(argv, LONG_NAMES)
    stop = cli.find_immediate_flag(argv, IMMEDIATE_FLAGS)
    if stop is not None:
        # NVIDIA's parser acts on these as soon as it meets them: earlier arguments are
        # still diagnosed, later ones are never looked at, and the exit code is 0.
        try:
            _parse_argv(argv[:stop])
        except cli.CommandLineError as err:
            cli.print_error(err)
        sys.stdout.write(immediate_output(argv[stop]))
        return 0

    def body() -> int:
        params = _parse_argv(argv)
        try:
            return command(**params)
        except _NoInput:
            sys.stdout.write(help_text("--help-list"))  # as NVIDIA's: the flat list
            raise

    return cli.run_guarded(body)


def _parse_argv(argv: Sequence[str]) -> dict:
    for arg in argv:
        if arg == "--":
            break
        if arg == "-O":  # -O takes its value attached (-O3), never the next argument
            raise cli.CommandLineError(PROG, "for the -O option: requires a value!")
    return cli.parse_command_line(PROG, OPTIONS, "inputs", argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
