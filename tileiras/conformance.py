"""Run NVIDIA's cuda-tile dialect tests against our parser, verifier and writer.

    python -m tileiras.conformance SUITE_DIR [--min-pass-rate X] [--min-round-trip-rate Y]
                                   [--min-checked-rate Z] [-v]

The suite is cuda-tile's ``test/`` layout: ``*.mlir`` files with ``// RUN:``
lines, ``// -----`` split inputs and ``// expected-error @below {{...}}``
annotations.  Each file is classified by its RUN lines:

* ``-verify-diagnostics``: every chunk is parsed and verified; each
  ``expected-error`` passes when an error on its line contains its text
  (MLIR's rule: substring of the message, same line; ``@unknown``: an error
  without a location).  The RUN line's ``-bytecode-version=X.Y`` is the version
  targeted, ``-Wunsupported-hints``/``-Werr-hints`` the verifier's hint checks,
  and with ``-mlir-to-cudatilebc`` a module that verifies is also written, for
  the bytecode writer's own errors.  Files checking what a test-only pass
  reports (``--test-...``) are not run.
* files with no ``not`` and no ``-verify-diagnostics`` (``%round_trip_test``,
  ``cuda-tile-opt %s | cuda-tile-opt``...): every chunk must parse and verify
  clean, print(parse(print(m))) must equal print(m), and writing then reading
  bytecode must print the same text.
* ``not TOOL %s ... 2>&1 | FileCheck`` files (no pass, no bytecode input):
  each CHECK line is an error we must give for its chunk, counted apart
  ("CHECKed errors"; matched anywhere in the chunk, ``{{re}}`` as regexes).
* the rest (bytecode inputs, pass pipelines, --list-versions) are listed as
  not run, and so are files using the test-only ops of cuda-tile's
  testing build (``testing$bytecode_test_*``, made-up versions 250.x), with
  that reason printed by ``-v``.

The table gives, per file, the expected errors matched and the round trips
passed; the exit code is 1 when a rate is under its minimum.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .errors import TileIRError
from .ir.version import NEWEST, Version

_EXPECTED = re.compile(r"expected-(error|warning|note|remark)\s*(?:@\s*(below|above|unknown|[+-]\d+))?\s*\{\{(.*?)\}\}")


@dataclass(frozen=True)
class Expected:
    severity: str
    line: Optional[int]  # 1-based line in the file; None for @unknown
    text: str
    comment_line: int


@dataclass(frozen=True)
class Produced:
    severity: str
    line: Optional[int]
    message: str


@dataclass
class FileResult:
    path: str
    kind: str  # "diagnostics", "round-trip", "not run"
    expected: int = 0
    matched: int = 0
    round_trips: int = 0
    round_trips_ok: int = 0
    failures: list[str] = field(default_factory=list)
    reason: str = ""  # why a file is not run, when it is not for the usual reasons
    checks: int = 0  # ``not TOOL ... | FileCheck`` files: CHECK lines, each an error message expected
    checks_ok: int = 0


# ---------------------------------------------------------------------------
# expectations


def expectations(text: str, line_offset: int) -> list[Expected]:
    """``expected-*`` annotations of a chunk, with the file line each refers to."""
    lines = text.split("\n")
    out: list[Expected] = []
    for i, line in enumerate(lines):
        for m in _EXPECTED.finditer(line):
            severity, where, message = m.group(1), m.group(2), m.group(3)
            target: Optional[int]
            if where is None:
                target = i
            elif where == "unknown":
                target = None
            elif where == "below":
                target = i + 1
                while target < len(lines) and _EXPECTED.search(lines[target]) and "//" in lines[target].lstrip()[:2]:
                    target += 1
            elif where == "above":
                target = i - 1
                while target > 0 and _EXPECTED.search(lines[target]) and lines[target].lstrip().startswith("//"):
                    target -= 1
            else:
                target = i + int(where)
            out.append(Expected(severity, None if target is None else target + 1 + line_offset, message,
                                i + 1 + line_offset))
    return out


# ---------------------------------------------------------------------------
# running one chunk


def diagnose(text: str, filename: str, line_offset: int, hints: Optional[str] = None,
             version: Optional[Version] = None, to_bytecode: bool = False) -> list[Produced]:
    """Parse and verify a chunk; return every error/warning with its line.  ``hints``
    is the verifier's optimization-hint mode (``hint_mode`` of the RUN lines);
    ``version`` the bytecode version targeted; ``to_bytecode`` also writes the
    module, as ``cuda-tile-translate -mlir-to-cudatilebc`` does, when it verifies."""
    from .text.parser import parse_chunk
    from .text.parser_locs import TextLoc
    from .text.parser_scan import ParseError
    from .verify import verify_module

    try:
        parsed = parse_chunk(text, filename, version=version or NEWEST, line_offset=line_offset)
    except ParseError as e:
        return [Produced("error", e.line, m) for m in e.messages]
    except TileIRError as e:
        return [Produced("error", None, e.message)]
    module = parsed.module
    if parsed.loose_ops:  # ops written outside any function: verify them in a function of their own
        from .ir.core import Block, Function, Region
        from .ir.types import FunctionType
        from .tile.ops_control import ReturnOp
        from .verify.debuginfo import StandIn

        block = Block()
        for op in parsed.loose_ops:
            block.append(op)
        block.append(ReturnOp())
        module.functions.append(Function("", FunctionType((), ()), Region([block]),
                                         loc=StandIn(tuple(parsed.ops_in_module_body))))
    out = []
    for d in verify_module(module, hints=hints):
        line = d.loc.line if isinstance(d.loc, TextLoc) and d.loc.filename == filename else None
        out.append(Produced(d.severity.value, line, d.message))
    if to_bytecode and not any(p.severity == "error" for p in out):
        out += _write_problems(parsed, version or NEWEST)
    return out


def _values(module):  # noqa: ANN001, ANN202 - every value of a module
    for fn in module.functions:
        for block in fn.body.blocks:
            yield from block.args
        for op in fn.walk():
            yield from op.results
            for region in op.regions:
                for block in region.blocks:
                    yield from block.args


def _write_problems(parsed, version: Version) -> list[Produced]:  # noqa: ANN001 - a ParsedText
    """What the bytecode writer says about a verified module: it takes only
    functions and globals in a module's body, only cuda_tile ops, and nothing newer
    than ``version``; the writer's errors carry no location."""
    from .text.parser_body import is_unregistered
    from .text.parser_locs import strip_text_locations
    from .writer import write_bytecode

    from .text.parser_attrs import UnknownType

    where = parsed.module_loc.line if parsed.module_loc is not None else None
    if any(isinstance(v.type, UnknownType) for v in _values(parsed.module)):
        return [Produced("error", None, "unsupported type in bytecode writer")]
    if parsed.ops_in_module_body:
        return [Produced("error", where, "'cuda_tile.module' op only function and global ops are allowed in the body")]
    if any(is_unregistered(op) for op in parsed.module.walk()):
        return [Produced("error", where, "'cuda_tile.module' op only ops from the 'cuda_tile' dialect are allowed")]
    if parsed.loose_ops:
        return []
    try:
        strip_text_locations(parsed.module)
        write_bytecode(parsed.module, version=version)
    except TileIRError as e:
        return [Produced("error", None, e.message)]
    return []


def round_trip(text: str, filename: str, line_offset: int) -> Optional[str]:
    """None when the chunk parses, verifies and round-trips; else what went wrong."""
    from .reader import read_bytecode
    from .text.parser import parse_chunk, parse_module, strip_text_locations
    from .text.printer import print_module
    from .verify import verify_module
    from .writer import write_bytecode

    try:
        parsed = parse_chunk(text, filename, line_offset=line_offset)
        if parsed.loose_ops:
            return f"op '{parsed.loose_ops[0].definition.name}' outside a function"
        errors = [d for d in verify_module(parsed.module) if d.is_error]
        if errors:
            return f"verifier: {errors[0]}"
        module = parsed.module
        strip_text_locations(module)
        printed = print_module(module, debug_info=True)
        again = print_module(parse_module(printed, filename), debug_info=True)
        if again != printed:
            return "print(parse(print(m))) != print(m)"
        data = write_bytecode(module, version=NEWEST)
        if print_module(read_bytecode(data), debug_info=True) != printed:
            return "bytecode round trip prints differently"
    except TileIRError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - a crash is a failure to report, not to raise
        return f"internal error: {e!r}"
    return None


# ---------------------------------------------------------------------------
# files


def run_lines(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"//\s*RUN:\s*(.*)", text)]


def hint_mode(runs: list[str]) -> Optional[str]:
    """cuda-tile-opt's hint flags as the verifier's mode: -Werr-hints "error",
    -Wunsupported-hints "warn", neither None."""
    joined = " ".join(runs)
    if "-Werr-hints" in joined:
        return "error"
    return "warn" if "-Wunsupported-hints" in joined else None


def target_version(runs: list[str]) -> Optional[Version]:
    """The ``-bytecode-version=X.Y`` a RUN line targets, if any."""
    from .ir.version import Version as V

    m = re.search(r"-bytecode-version[= ](\d+)\.(\d+)", " ".join(runs))
    return V(int(m.group(1)), int(m.group(2))) if m else None


def writes_bytecode(runs: list[str]) -> bool:
    return "-mlir-to-cudatilebc" in " ".join(runs)


#: Ops registered only by cuda-tile's testing build, to test bytecode versioning with
#: made-up versions (250.0, 250.1); neither tileiras nor this package knows them.
TEST_ONLY_OPS = "testing$bytecode_test_"

#: Test-only passes of cuda-tile-opt (a file checking their errors is not run; a
#: round-trip file still round-trips its input).
TEST_PASSES = ("--test-", "-test-debuginfo")


def _checks_errors(runs: list[str], joined: str) -> bool:
    """``not TOOL %s ... 2>&1 | FileCheck``: the CHECK lines are the tool's errors."""
    return (bool(runs) and all(r.lstrip().startswith("not ") for r in runs) and "FileCheck" in joined
            and "%S" not in joined and "-cudatilebc-to-mlir" not in joined and "--list-versions" not in joined
            and "pass-pipeline" not in joined
            and not any(p in joined.replace("-test-cudatile-roundtrip", "") for p in TEST_PASSES))


def classify(runs: list[str]) -> str:
    joined = " ".join(runs)
    if "-verify-diagnostics" in joined:
        # errors a test pass reports (not the parser or verifier) are not ours to match
        test_pass = any(p in joined for p in TEST_PASSES) and "-test-cudatile-roundtrip" not in joined
        return "not run" if test_pass else "diagnostics"
    if _checks_errors(runs, joined):
        return "checks"
    if not runs or any(r.lstrip().startswith("not ") for r in runs) or "--list-versions" in joined:
        return "not run"
    if "pass-pipeline" in joined or "--canonicalize" in joined or "cudatilebc-to-mlir %S" in joined:
        return "not run"
    return "round-trip"


def run_file(path: Path, root: Path) -> FileResult:
    from .text.parser import split_input

    text = path.read_text()
    runs = run_lines(text)
    kind = classify(runs)
    result = FileResult(str(path.relative_to(root)), kind)
    if kind != "not run" and TEST_ONLY_OPS in text:
        result.kind = kind = "not run"
        result.reason = ("uses cuda-tile's test-only bytecode-evolution ops (testing$bytecode_test_*, "
                         "bytecode versions 250.x), which exist only in its testing build")
    if kind == "not run":
        return result
    split = any("split-input-file" in r for r in runs)
    chunks = split_input(text) if split else [(text, 0)]
    for chunk, offset in chunks:
        if kind == "diagnostics":
            _check_diagnostics(result, chunk, path.name, offset, hint_mode(runs), target_version(runs),
                               writes_bytecode(runs))
        elif kind == "checks":
            _check_file_checks(result, chunk, path.name, offset, runs)
        elif chunk.strip() and not _only_comments(chunk):
            result.round_trips += 1
            problem = round_trip(chunk, path.name, offset)
            if problem is None:
                result.round_trips_ok += 1
            else:
                result.failures.append(f"chunk at line {offset + 1}: {problem}")
    return result


def _only_comments(chunk: str) -> bool:
    return all(not line.strip() or line.strip().startswith("//") for line in chunk.splitlines())


#: Words NVIDIA's 13.5 messages have that the suite's (older) dialect did not: fnv8E5M3FNU
#: came with bytecode 13.4, after the suite was written, and 13.5 names it in every list of
#: element types.  Our messages are NVIDIA's; they are compared without these words.
NEWER_THAN_SUITE = (" or fnv8E5M3FNU",)


def suite_wording(message: str) -> str:
    """``message`` as the suite's older dialect would word it."""
    for words in NEWER_THAN_SUITE:
        message = message.replace(words, "")
    return message


def _check_diagnostics(result: FileResult, chunk: str, filename: str, offset: int, hints: Optional[str] = None,
                       version: Optional[Version] = None, to_bytecode: bool = False) -> None:
    wanted = [e for e in expectations(chunk, offset) if e.severity == "error"]
    if not wanted:
        return
    produced = diagnose(chunk, filename, offset, hints, version, to_bytecode)
    for e in wanted:
        result.expected += 1
        if any(p.severity == "error" and p.line == e.line and e.text in suite_wording(p.message) for p in produced):
            result.matched += 1
        else:
            got = [f"{p.line}: {p.message}" for p in produced if p.severity == "error"][:2]
            result.failures.append(f"line {e.line}: expected '{e.text}', got {got or 'no error'}")


_CHECK_LINE = re.compile(r"//\s*([A-Za-z0-9_]+?)(-NEXT|-SAME|-DAG|-LABEL|-NOT)?:\s*(.*?)\s*$", re.MULTILINE)


def _check_pattern(text: str) -> re.Pattern:
    """A CHECK line as a regular expression (``{{...}}`` parts are regexes already)."""
    parts = re.split(r"\{\{(.*?)\}\}", text.removeprefix("error: "))
    return re.compile("".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def _check_file_checks(result: FileResult, chunk: str, filename: str, offset: int, runs: list[str]) -> None:
    """Each CHECK line of the chunk must match one of the errors we give for it."""
    joined = " ".join(runs)
    prefixes = {x for group in re.findall(r"--?check-prefix(?:es)?[= ](\S+)", joined) for x in group.split(",")}
    prefixes = prefixes or {"CHECK"}
    wanted = [m.group(3) for m in _CHECK_LINE.finditer(chunk) if m.group(1) in prefixes and m.group(2) != "-NOT"]
    if not wanted:
        return
    produced = [suite_wording(p.message) for p in diagnose(chunk, filename, offset, hint_mode(runs), target_version(runs),
                                            writes_bytecode(runs)) if p.severity == "error"]
    for text in wanted:
        result.checks += 1
        if any(_check_pattern(text).search(m) for m in produced):
            result.checks_ok += 1
        else:
            result.failures.append(f"CHECK '{text}': got {produced[:2] or 'no error'}")


def run_suite(root: Path) -> list[FileResult]:
    files = sorted(p for p in root.rglob("*.mlir") if "Inputs" not in p.parts)
    return [run_file(p, root) for p in files]


@dataclass(frozen=True)
class Rates:
    expected: int
    matched: int
    round_trips: int
    round_trips_ok: int
    checks: int = 0
    checks_ok: int = 0

    @property
    def error_rate(self) -> float:
        return self.matched / self.expected if self.expected else 1.0

    @property
    def round_trip_rate(self) -> float:
        return self.round_trips_ok / self.round_trips if self.round_trips else 1.0

    @property
    def checked_error_rate(self) -> float:
        return self.checks_ok / self.checks if self.checks else 1.0


def rates(results: list[FileResult]) -> Rates:
    return Rates(sum(r.expected for r in results), sum(r.matched for r in results),
                 sum(r.round_trips for r in results), sum(r.round_trips_ok for r in results),
                 sum(r.checks for r in results), sum(r.checks_ok for r in results))


def table(results: list[FileResult], verbose: bool = False) -> str:
    width = max(len(r.path) for r in results) if results else 10
    lines = [f"{'file'.ljust(width)}  {'kind':<12} {'expected errors':>16} {'round trips':>12} "
             f"{'CHECKed errors':>15}"]
    for r in results:
        errs = f"{r.matched}/{r.expected} {_pct(r.matched, r.expected)}" if r.expected else "-"
        trips = f"{r.round_trips_ok}/{r.round_trips}" if r.round_trips else "-"
        checks = f"{r.checks_ok}/{r.checks}" if r.checks else "-"
        lines.append(f"{r.path.ljust(width)}  {r.kind:<12} {errs:>16} {trips:>12} {checks:>15}")
        if verbose:
            lines += [f"    {f}" for f in r.failures]
            if r.reason:
                lines.append(f"    not run: {r.reason}")
    total = rates(results)
    lines.append(f"{'TOTAL'.ljust(width)}  {'':<12} "
                 f"{f'{total.matched}/{total.expected} {_pct(total.matched, total.expected)}':>16} "
                 f"{f'{total.round_trips_ok}/{total.round_trips}':>12} "
                 f"{f'{total.checks_ok}/{total.checks}':>15}")
    return "\n".join(lines) + "\n"


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f}%" if b else "  -  "


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tileiras.conformance", description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("--min-pass-rate", type=float, default=0.0,
                    help="minimum fraction of expected errors matched (0-1)")
    ap.add_argument("--min-round-trip-rate", type=float, default=0.0,
                    help="minimum fraction of positive chunks that round-trip (0-1)")
    ap.add_argument("--min-checked-rate", type=float, default=0.0,
                    help="minimum fraction of CHECK lines of 'not TOOL | FileCheck' files matched (0-1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every failure")
    args = ap.parse_args(argv)
    results = run_suite(args.suite)
    sys.stdout.write(table(results, args.verbose))
    total = rates(results)
    ok = (total.error_rate >= args.min_pass_rate and total.round_trip_rate >= args.min_round_trip_rate
          and total.checked_error_rate >= args.min_checked_rate)
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
