"""Command-line plumbing shared by ``tileiras`` and ``tileirdisasm``.

NVIDIA's tools parse their arguments with LLVM's ``cl`` library; ours use click as the
parser and translate click's exceptions into LLVM's wording (``<prog>: for the -O option:
requires a value!``), so scripts that read stderr (cuTile does) see the same lines.  A
command declares its options once (``Option``); click is imported only for a command line
that is not spelled plainly (``parse_plain``), since importing it costs about 20 ms of
every cold start.

Everything a command does runs inside ``run_guarded``: a ``TileIRError`` becomes its
one-line message and exit code; any other exception is a bug, reported as
``error: internal error: <repr>`` with exit code 5 (traceback only with TILEIRAS_DEBUG=1).
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

from . import hostio
from .errors import EXIT_COMPILE, EXIT_USAGE, TileIRError, UsageError
from .knobs import knobs
from .record import record

if TYPE_CHECKING:  # pragma: no cover
    import click

    from .ir.core import Module

#: The version banner of NVIDIA's tools (cuTile keys its disk cache on this text);
#: the first line names the tool.
VERSION_BANNER_TAIL = (
    "Copyright (c) 2005-2026 NVIDIA Corporation",
    "Built on Mon_Oct_12_19:27:40_PDT_2026",
    "Cuda compilation tools, release 13.5, V13.5.37",
    "Build local.local.39125733_",
)


def format_version(title: str) -> str:
    return "\n".join((title, *VERSION_BANNER_TAIL)) + "\n"


class CommandLineError(UsageError):
    """An argument the parser rejects; printed as ``<prog>: <line>`` lines, exit code 1."""

    def __init__(self, prog: str, *lines: str):
        super().__init__(lines[0])
        self.prog = prog
        self.lines = lines

    def __str__(self) -> str:
        # LLVM prefixes every line with the program name except the "See: ..." follow-up.
        return "\n".join(line if line.startswith("Can specify") else f"{self.prog}: {line}"
                         for line in self.lines)


class InputFileError(TileIRError):
    """The input file cannot be read (missing, a directory, no permission)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


class OutputFileError(TileIRError):
    """The output file cannot be written."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class HelpOption:
    """One option of LLVM's ``--help`` text, with its ``=value`` lines.

    ``hidden`` options show only in ``--help-hidden``/``--help-list-hidden``; ``listed=False``
    drops one from the plain ``--help-list`` (LLVM does that to ``--help-list`` itself).
    """

    __slots__ = ("name", "text", "values", "hidden", "listed")

    def __init__(self, name: str, text: str, values: Sequence[tuple[str, str]] = (),
                 hidden: bool = False, listed: bool = True):
        self.name, self.text, self.values = name, text, tuple(values)
        self.hidden, self.listed = hidden, listed

    @property
    def sort_key(self) -> str:
        """LLVM sorts by the bare option name, byte order (``-O`` first, ``remarks`` before
        ``remarks-analysis``)."""
        return self.name.lstrip("-").split("=", 1)[0].split(" ", 1)[0]


class HelpCategory:
    """An option category: a ``Title:`` heading (and description) in ``--help``."""

    __slots__ = ("title", "options", "description")

    def __init__(self, title: str, options: Sequence[HelpOption], description: str = ""):
        self.title, self.options, self.description = title, tuple(options), description


#: LLVM's own options, in every tool built on its ``cl`` library.
GENERIC_OPTIONS = HelpCategory("Generic Options", (
    HelpOption("-h", "Alias for --help", hidden=True),
    HelpOption("--help", "Display available options (--help-hidden for more)"),
    HelpOption("--help-hidden", "Display all available options", hidden=True),
    HelpOption("--help-list", "Display list of available options (--help-list-hidden for more)",
               listed=False),
    HelpOption("--help-list-hidden", "Display list of all available options", hidden=True),
    HelpOption("--print-all-options", "Print all option values after command line parsing",
               hidden=True),
    HelpOption("--print-options", "Print non-default options after command line parsing",
               hidden=True),
    HelpOption("--version", "Display the version of this program"),
))

#: The flags that print a help text, and how: (categorized, with hidden options).
HELP_FLAGS = {"-h": (True, False), "--help": (True, False), "--help-hidden": (True, True),
              "--help-list": (False, False), "--help-list-hidden": (False, True)}


def format_help(overview: str, usage: str, categories: Sequence[HelpCategory], flag: str = "--help") -> str:
    """The text LLVM's ``cl`` prints for ``flag`` (one of ``HELP_FLAGS``), byte for byte.

    ``--help`` groups the options under their category headings; ``--help-list`` prints
    one sorted list.  Descriptions start in one column, two past the longest option name.
    """
    categorized, hidden = HELP_FLAGS[flag]

    def shown(o: HelpOption) -> bool:
        return (hidden or not o.hidden) and (categorized or hidden or o.listed)

    groups = [(c, sorted((o for o in c.options if shown(o)), key=lambda o: o.sort_key))
              for c in categories]
    every = [o for _, opts in groups for o in opts]
    width = 2 + max(max(len(o.name) for o in every),
                    max((2 + len(v) + 1 for o in every for v, _ in o.values), default=0))

    def option_lines(opts: Sequence[HelpOption]) -> list[str]:
        lines = []
        for o in opts:
            lines.append(f"{('  ' + o.name).ljust(width)} - {o.text}")
            lines.extend(f"{('    =' + v).ljust(width)} -   {t}" for v, t in o.values)
        return lines

    lines = [f"OVERVIEW: {overview}", "", f"USAGE: {usage}", "", "OPTIONS:"]
    if not categorized:
        return "\n".join(lines + option_lines(sorted(every, key=lambda o: o.sort_key))) + "\n"
    for category, opts in groups:
        if opts:
            lines += ["", f"{category.title}:"]
            lines += [category.description] if category.description else []
            lines += [""] + option_lines(opts)
    return "\n".join(lines) + "\n"


def program_name(default: str) -> str:
    """``argv[0]`` as LLVM prints it in ``Try: '<argv0> --help'``."""
    return sys.argv[0] if sys.argv and sys.argv[0] else default


def normalize_argv(argv: Sequence[str], long_names: Iterable[str]) -> list[str]:
    """Accept LLVM's single-dash spelling of long options (``-gpu-name=sm_90``, ``-version``)."""
    names = set(long_names)
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            out.extend(argv[i:])
            break
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
            if arg[1:].split("=", 1)[0] in names:
                arg = "-" + arg
        out.append(arg)
    return out


def find_immediate_flag(argv: Sequence[str], flags: Iterable[str]) -> Optional[int]:
    """Index of the first flag that acts as soon as LLVM parses it (``--version``...)."""
    wanted = set(flags)
    for i, arg in enumerate(argv):
        if arg == "--":
            return None
        if arg in wanted:
            return i
    return None


@record(frozen=True)
class Option:
    """One option of a command: its spellings, the parameter it fills, its value when absent.

    A value option holds the last value given (``default`` without one), a ``multiple``
    one every value in order, a ``flag`` whether it was given."""

    dest: str
    decls: tuple[str, ...]
    default: Optional[str] = None
    flag: bool = False
    multiple: bool = False

    @property
    def absent(self) -> object:
        return False if self.flag else () if self.multiple else self.default


def click_command(prog: str, options: Sequence[Option], positional: str) -> click.Command:
    """The click parser of a command: any number of positionals, then ``options``."""
    import click

    params: list[click.Parameter] = [click.Argument([positional], nargs=-1)]
    for o in options:
        kind = {"is_flag": True} if o.flag else {"multiple": True} if o.multiple else {"default": o.default}
        params.append(click.Option([*o.decls, o.dest], **kind))
    return click.Command(prog, params=params, add_help_option=False)


def parse_command_line(prog: str, options: Sequence[Option], positional: str, argv: Sequence[str]) -> dict:
    """The command's parameters: ``parse_plain``'s reading, else click's (with its errors)."""
    params = parse_plain(options, positional, argv)
    if params is None:
        params = parse_with_click(click_command(prog, options, positional), prog, argv)
    return params


def parse_plain(options: Sequence[Option], positional: str, argv: Sequence[str]) -> Optional[dict]:
    """``argv``'s parameters when every argument is spelled plainly, else None.

    Plain: a positional not starting with ``-``; a flag alone; ``--name=VALUE``, ``-xVALUE``
    (``-O3``), or ``--name VALUE`` / ``-x VALUE`` with a VALUE that does not start with
    ``-`` or ``=``.  Such command lines (every one cuTile writes) mean the same to click;
    anything else (``--``, unknown options, empty values or values that look like options,
    errors) returns None and is left to click.  test_cli_parse compares the two on
    generated command lines."""
    spelled = {decl: o for o in options for decl in o.decls}
    params = {o.dest: o.absent for o in options}
    positionals: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if not arg.startswith("-"):
            positionals.append(arg)
            continue
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            attached = value if equals else None
        else:
            name, attached = arg[:2], arg[2:] or None
        option = spelled.get(name)
        if option is None or (option.flag and attached is not None):
            return None
        if option.flag:
            params[option.dest] = True
            continue
        value = attached if attached is not None else next(rest, None)
        if not value or value.startswith(("-", "=")):
            return None
        params[option.dest] = (*params[option.dest], value) if option.multiple else value
    params[positional] = tuple(positionals)
    return params


def parse_with_click(command: click.Command, prog: str, argv: Sequence[str]) -> dict:
    """Parse ``argv`` with ``command``'s params; click errors become LLVM-worded errors.

    ``prog`` is the tool's name (the prefix of every message); ``argv[0]`` appears in
    the "Try: '<argv0> --help'" hints, as LLVM prints it.
    """
    import click

    try:
        ctx = command.make_context(prog, list(argv), resilient_parsing=False)
    except click.NoSuchOption as e:
        lines = [f"Unknown command line argument '{e.option_name}'.  "
                 f"Try: '{program_name(prog)} --help'"]
        if e.possibilities:
            lines.append(f"Did you mean '{sorted(e.possibilities)[0]}'?")
        raise CommandLineError(prog, *lines) from None
    except click.BadOptionUsage as e:
        if "requires an argument" in e.message:
            raise CommandLineError(prog, f"for the {e.option_name} option: requires a value!") from None
        raise CommandLineError(prog, f"for the {e.option_name} option: {e.message}") from None
    except click.BadParameter as e:
        name = e.param_hint if isinstance(e.param_hint, str) else (e.param.opts[0] if e.param else "?")
        raise CommandLineError(prog, f"for the {name.strip(chr(39) + chr(34))} option: {e.message}") from None
    except click.UsageError as e:
        raise CommandLineError(prog, e.message) from None
    return dict(ctx.params)


PREVIEW_FEATURES = ("simt",)


def parse_preview(prog: str, values: Iterable[str]) -> tuple[str, ...]:
    """``--preview=a,b`` (repeatable) -> the named features, checked against PREVIEW_FEATURES."""
    features: list[str] = []
    for value in values:
        for feature in value.split(","):
            if feature not in PREVIEW_FEATURES:
                raise CommandLineError(
                    prog, f"for the --preview option: unknown preview feature '{feature}'; "
                    f"supported features: {', '.join(PREVIEW_FEATURES)}")
            if feature not in features:
                features.append(feature)
    return tuple(features)


def too_many_positionals(prog: str) -> CommandLineError:
    return CommandLineError(prog, "Too many positional arguments specified!",
                            "Can specify at most 1 positional arguments: "
                            f"See: {program_name(prog)} --help")


def read_input_file(path: str, exit_code: int = EXIT_USAGE) -> bytes:
    """Read the whole input; failures use the real tools' wording (stdin is not supported)."""
    if path == "-":
        raise InputFileError("unable to read input file '-': No such file or directory", exit_code)
    try:
        return hostio.read_file(path)
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        raise InputFileError(f"unable to read input file '{path}': {reason}", exit_code) from None


def write_output(path: str, data: bytes, exit_code: int) -> None:
    """Write ``data`` to ``path`` (``-`` = stdout) as ``hostio.write_file`` does: a regular
    file whole or not at all, a device, FIFO or ``/dev/stdout`` written through."""
    if path == "-":
        stream = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
        if stream is None:
            sys.stdout.write(data.decode("utf-8", errors="surrogateescape"))
        else:
            sys.stdout.flush()
            stream.write(data)
            stream.flush()
        return
    try:
        hostio.write_file(path, data)
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        raise OutputFileError(f"unable to write output file '{path}': {reason}", exit_code) from None


def read_module(data: bytes, preview: tuple[str, ...] = ()) -> "Module":
    """Decode and verify bytecode, as NVIDIA's tools do before anything else (exit code 3).

    NVIDIA's 13.5 tools read a non-entry function only as the SIMT preview's
    ``cuda_tile.preview$func``, and that only as a bodiless extern declaration (its
    body comes from a ``-l`` library): any is refused before verification without
    ``--preview=simt``; with it, the verifier checks the declarations and a function
    with a body is refused after it.  A header advertising preview content (a
    ``preview$call``) also needs a preview feature."""
    from .reader import check_entry_arguments, read_bytecode
    from .verify import check_module

    module = read_bytecode(data, filename=None, preview=preview)  # NVIDIA's messages name no file
    check_entry_arguments(module)
    simt = "simt" in preview
    if not simt:
        _refuse_non_entry(module, "uses preview feature 'simt', which is not enabled")
    check_module(module)
    if simt:
        _refuse_non_entry(module, "'cuda_tile.preview$func' op must be extern when serialized to bytecode",
                          with_body=True)
    return module


def _refuse_non_entry(module: "Module", message: str, with_body: bool = False) -> None:
    """NVIDIA reports the first non-entry function only, without its location (tileiras)."""
    from .verify import Diagnostic, Severity, VerifyError

    if any(not fn.is_entry and not (with_body and fn.is_extern) for fn in module.functions):
        raise VerifyError([Diagnostic(None, Severity.ERROR, message)])


def print_error(err: TileIRError) -> None:
    sys.stdout.flush()
    print(str(err), file=sys.stderr)


def run_guarded(body: Callable[[], int]) -> int:
    """Run a command body; map every exception to (message, exit code). Never a traceback."""
    try:
        return body()
    except TileIRError as err:
        print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        sys.stdout.flush()
        if knobs.debug:
            import traceback

            traceback.print_exc()
        print(f"error: internal error: {exc!r}", file=sys.stderr)
        return EXIT_COMPILE
