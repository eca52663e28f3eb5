"""``tileirdisasm``: print Tile IR bytecode as MLIR text, like NVIDIA's tool.

    tileirdisasm [-g|--print-debug-info] [--preview=F] FILE

Exit codes (as NVIDIA's): 0 ok, 1 bad command line, 2 no/unreadable input, 3 bad bytecode.
"""
from __future__ import annotations

import sys
from typing import Optional, Sequence

from . import cli
from .errors import EXIT_BAD_OPTION, BytecodeError, TileIRError, VersionError
from .ir.version import SUPPORTED_VERSIONS

PROG = "tileirdisasm"
TITLE = "tileirdisasm: NVIDIA (R) Cuda Tile IR disassembler"
USAGE = "tileirdisasm [options] <tile bytecode file>"

HELP_CATEGORIES = (cli.GENERIC_OPTIONS, cli.HelpCategory("TileIR Disassembler Options", (
    cli.HelpOption("-g", "Alias for --print-debug-info"),
    cli.HelpOption("--preview=<feature[,feature...]>", "Enable one or more named preview features"),
    cli.HelpOption("--print-debug-info", "Annotate disassembly with debugging information, if present."),
)))

HEADER_SIZE = 12  # magic (8), major, minor, tag (u16)
LONG_NAMES = ("help", "help-list", "help-hidden", "help-list-hidden", "print-options",
              "print-all-options", "version", "preview", "print-debug-info")
IMMEDIATE_FLAGS = (*cli.HELP_FLAGS, "--version")


class NoInputError(TileIRError):
    exit_code = EXIT_BAD_OPTION

    def __str__(self) -> str:
        return "error: no input file provided\n"


OPTIONS = (
    cli.Option("debug_info", ("-g", "--print-debug-info"), flag=True),
    cli.Option("preview", ("--preview",), multiple=True),
    cli.Option("print_options", ("--print-options",), flag=True),  # accepted; NVIDIA's prints nothing either
    cli.Option("print_all_options", ("--print-all-options",), flag=True),
)


def command(inputs: tuple[str, ...], debug_info: bool, preview: tuple[str, ...], **_: bool) -> int:
    """Disassemble one bytecode file to stdout."""
    features = cli.parse_preview(PROG, preview)
    if len(inputs) > 1:
        raise cli.too_many_positionals(PROG)
    if not inputs:
        sys.stdout.write(help_text("--help-list"))  # as NVIDIA's: the flat list
        raise NoInputError("no input file provided")
    text = disassemble_file(inputs[0], debug_info=debug_info, preview=features)
    sys.stdout.write(text)
    return 0


def disassemble_file(path: str, *, debug_info: bool = False, preview: tuple[str, ...] = ()) -> str:
    """Read ``path`` and return its MLIR text (what the tool prints)."""
    try:
        data = cli.read_input_file(path, exit_code=EXIT_BAD_OPTION)
    except cli.InputFileError as err:
        # NVIDIA's disassembler doubles the prefix and adds an empty line.
        raise cli.InputFileError(f"{err}\n", exit_code=EXIT_BAD_OPTION) from None
    try:
        module = cli.read_module(data, preview)
    except VersionError as err:
        raise reword_version_error(err, data) from None
    from .text.printer import print_module

    return print_module(module, debug_info=debug_info)


def reword_version_error(err: VersionError, data: bytes) -> BytecodeError:
    """tileirdisasm words version errors differently from tileiras (same reader underneath)."""
    if len(data) < HEADER_SIZE:
        return BytecodeError("failed to parse bytecode header", offset=len(data))
    major, minor, tag = data[8], data[9], int.from_bytes(data[10:12], "little")
    supported = f"[{SUPPORTED_VERSIONS[0]} - {SUPPORTED_VERSIONS[-1]}]"
    return VersionError(f"unsupported Tile version {major}.{minor}.{tag}, this reader supports "
                        f"versions {supported}", offset=HEADER_SIZE)


def help_text(flag: str = "--help") -> str:
    return cli.format_help(TITLE, USAGE, HELP_CATEGORIES, flag)


def run(argv: Sequence[str]) -> int:
    argv = cli.normalize_argv(argv, LONG_NAMES)
    stop = cli.find_immediate_flag(argv, IMMEDIATE_FLAGS)
    if stop is not None:
        try:
            cli.parse_command_line(PROG, OPTIONS, "inputs", argv[:stop])
        except cli.CommandLineError as err:
            cli.print_error(err)
        sys.stdout.write(cli.format_version(TITLE) if argv[stop] == "--version" else help_text(argv[stop]))
        return 0

    def body() -> int:
        return command(**cli.parse_command_line(PROG, OPTIONS, "inputs", argv))

    return cli.run_guarded(body)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
