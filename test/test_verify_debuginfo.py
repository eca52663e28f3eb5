"""Debug-info scope rules (``tileiras.verify.debuginfo``) and the parser's checks of
debug-info attributes, each with NVIDIA's exact message: what tileiras 13.5 prints
for the same IR written as bytecode, or cuda-tile's parser for text."""
from __future__ import annotations

import subprocess

import pytest

from tileiras.conformance import diagnose
from tileiras.ir import debug as D
from tileiras.ir.core import Block, Function, Module, Region
from tileiras.ir.types import FunctionType
from tileiras.ir.version import NEWEST
from tileiras.reader import read_bytecode
from tileiras.text.parser import ParseError, parse_chunk, parse_module
from tileiras.tile.ops_control import ReturnOp
from tileiras.verify import verify_module
from tileiras.verify.debuginfo import attr_text, get_di_loc, loc_text, subprogram_of
from tileiras.writer import write_bytecode

SETUP = """\
#file = #cuda_tile.di_file<"foo.py" in "/tmp/">
#compile_unit = #cuda_tile.di_compile_unit<file = #file>
#subprogram = #cuda_tile.di_subprogram<file = #file, line = 1, name = "test", linkageName = "test", compileUnit = #compile_unit, scopeLine = 2>
#block = #cuda_tile.di_lexical_block<scope = #subprogram, file = #file, line = 3, column = 4>
#inner_block = #cuda_tile.di_lexical_block<scope = #block, file = #file, line = 5, column = 6>
#loc_func = loc("/tmp/foo.py":7:8)
#di_loc_func = #cuda_tile.di_loc<loc(#loc_func) in #subprogram>
#di_loc_block = #cuda_tile.di_loc<loc("/tmp/foo.py":9:10) in #block>
#di_loc_inner_block = #cuda_tile.di_loc<loc("/tmp/foo.py":11:12) in #inner_block>
#invalid = #cuda_tile.di_subprogram<file = #file, line = 13, name = "invalid", linkageName = "invalid", compileUnit = #compile_unit, scopeLine = 14>
#di_loc_invalid = #cuda_tile.di_loc<loc("/tmp/foo.py":15:16) in #invalid>
#unknown = loc(unknown)
"""

FILE = '<"foo.py" in "/tmp/">'
CU = f"<file = {FILE}>"
TEST_SP = (f'#cuda_tile.di_subprogram<file = {FILE}, line = 1, name = "test", linkageName = "test", '
           f"compileUnit = {CU}, scopeLine = 2>")
INVALID_SP = (f'#cuda_tile.di_subprogram<file = {FILE}, line = 13, name = "invalid", linkageName = "invalid", '
              f"compileUnit = {CU}, scopeLine = 14>")
BLOCK = f"#cuda_tile.di_lexical_block<scope = {TEST_SP}, file = {FILE}, line = 3, column = 4>"
DI_LOC_FUNC = f'#cuda_tile.di_loc<loc("/tmp/foo.py":7:8) in {TEST_SP}>'

RULE1 = (f"'cuda_tile.entry' op invalid function debug info scope: {BLOCK}. "
         "Function location must have cuda_tile.di_subprogram debug info scope.")
RULE2 = (f"'cuda_tile.entry' op invalid function debug info scope: {TEST_SP}. "
         'Function name "foo" does not match subprogram scope linkage name "test".')
RULE3 = ("invalid operation debug info scope: " + TEST_SP +
         ". Operation has debug info scope, but function debug info scope is undefined.")
RULE4 = (f"invalid operation debug info scope: {TEST_SP}. "
         f"Operation debug info scope does not match function debug info scope: {INVALID_SP}.")


def errors(body: str) -> list[str]:
    return [p.message for p in diagnose(SETUP + body, "t.mlir", 0) if p.severity == "error"]


def entry(name: str, fn_loc: str, body: str = "return loc(#di_loc_func)") -> str:
    return f"cuda_tile.module @kernels {{\n  entry @{name}() {{\n    {body}\n  }} loc({fn_loc})\n}}\n"


def if_yield(loc: str) -> str:
    return ("%c = constant <i1: true> : tile<i1>\n    if %c {\n      yield loc(" + loc + ")\n"
            "    } else {\n      yield\n    }\n    return")


# -- the rules, through every kind of location wrapper ---------------------------------------
@pytest.mark.parametrize("fn_loc", ["#di_loc_block", '"entry_loc"(#di_loc_block)', "fused[#loc_func, #di_loc_block]"])
def test_rule1_function_scope_must_be_a_subprogram(fn_loc):
    assert errors(entry("test", fn_loc)) == [RULE1]


@pytest.mark.parametrize("fn_loc", ["#di_loc_func", '"entry_loc"(#di_loc_func)', "fused[#loc_func, #di_loc_func]"])
def test_rule2_function_name_is_the_linkage_name(fn_loc):
    assert errors(entry("foo", fn_loc)) == [RULE2]


@pytest.mark.parametrize("op_loc", ["#di_loc_func", "#di_loc_block", '"op_loc"(#di_loc_func)',
                                    "fused[#loc_func, #di_loc_block]", "callsite(#loc_func at #di_loc_func)"])
def test_rule3_ops_without_a_function_scope(op_loc):
    assert errors(entry("test", "#unknown", f"return loc({op_loc})")) == ["'cuda_tile.return' op " + RULE3]
    assert errors(entry("test", "#unknown", if_yield(op_loc))) == ["'cuda_tile.yield' op " + RULE3]


def test_rule3_a_text_position_is_no_scope():
    assert errors(entry("test", "#loc_func", "return loc(#di_loc_func)")) == ["'cuda_tile.return' op " + RULE3]
    assert errors(entry("test", "#loc_func", "return loc(#loc_func)")) == []


@pytest.mark.parametrize("op_loc", ["#di_loc_func", "#di_loc_block", "#di_loc_inner_block",
                                    '"op_loc"(#di_loc_inner_block)', "fused[#loc_func, #di_loc_block]",
                                    "callsite(#loc_func at #di_loc_inner_block)"])
@pytest.mark.parametrize("fn_loc", ["#di_loc_invalid", '"f"(#di_loc_invalid)', "fused[#loc_func, #di_loc_invalid]"])
def test_rule4_op_scope_is_the_function_subprogram(fn_loc, op_loc):
    assert errors(entry("invalid", fn_loc, f"return loc({op_loc})")) == [RULE4]


def test_rule5_module_level_ops_and_globals_have_no_scope():
    for loc in ["#di_loc_func", '"global_op"(#di_loc_func)', "fused[#loc_func, #di_loc_func]",
                "callsite(#loc_func at #di_loc_func)"]:
        src = f'cuda_tile.module @kernels {{\n  "some.op"() : () -> () loc({loc})\n}}\n'
        assert errors(src) == [(f"'some.op' op invalid operation debug info scope: {DI_LOC_FUNC}. "
                                "Global variables must not have scope.")]
    src = ('cuda_tile.module @kernels {\n  global @g <f32: [1.0]> : tile<1xf32> loc(#di_loc_func)\n'
           '  "some.op"() : () -> () loc(#loc_func)\n}\n')
    assert errors(src) == [(f"'cuda_tile.global' op invalid operation debug info scope: {DI_LOC_FUNC}. "
                            "Global variables must not have scope.")]


def test_rule6_function_location_is_no_call_site():
    assert errors(entry("test", "callsite(#di_loc_func at #di_loc_func)")) == [(
        f"'cuda_tile.entry' op invalid function debug info location: loc(callsite({DI_LOC_FUNC} at {DI_LOC_FUNC})). "
        "Function location must not be a CallSiteLoc.")]


def test_non_entry_functions_are_checked_as_the_simt_preview_names_them():
    src = "cuda_tile.module @kernels {\n  func @test() {\n    return\n  } loc(#di_loc_block)\n}\n"
    assert errors(src) == [RULE1.replace("'cuda_tile.entry'", "'cuda_tile.preview$func'")]


# -- which errors, in which order -----------------------------------------------------------
def test_a_function_error_stops_its_body_checks_and_bodies_stop_at_their_first_op():
    src = ("#di_loc_x = #cuda_tile.di_loc<loc(\"/tmp/foo.py\":99:99) in #invalid>\n"
           "cuda_tile.module @kernels {\n"
           "  entry @foo() {\n    return loc(#di_loc_invalid)\n  } loc(#di_loc_block)\n"
           "  entry @test() {\n    %c = constant <i1: true> : tile<i1> loc(#di_loc_x)\n"
           "    return loc(#di_loc_invalid)\n  } loc(#di_loc_func)\n}\n")
    module = parse_chunk(SETUP + src).module
    found = [(d.loc, d.message) for d in verify_module(module) if d.is_error]
    assert [m for _, m in found] == [RULE1, RULE4.replace(TEST_SP, "@").replace(INVALID_SP, TEST_SP)
                                     .replace("@", INVALID_SP)]
    assert found[1][0].line == 99  # the constant, the first op with a foreign scope


def test_nested_ops_come_before_their_parent():
    src = ("#di_loc_x = #cuda_tile.di_loc<loc(\"/tmp/foo.py\":99:99) in #invalid>\n" +
           entry("test", "#di_loc_func", "%c = constant <i1: true> : tile<i1>\n    if %c {\n"
                 "      yield loc(#di_loc_invalid)\n    } else {\n      yield\n    } loc(#di_loc_x)\n    return"))
    found = [d for d in verify_module(parse_chunk(SETUP + src).module) if d.is_error]
    assert len(found) == 1 and found[0].loc.line == 15


# -- valid debug info ----------------------------------------------------------------------
def test_lexical_blocks_and_inlined_call_sites_in_the_function_subprogram_verify():
    body = ("%c = constant <i1: true> : tile<i1> loc(#di_loc_inner_block)\n"
            "    %d = constant <i1: true> : tile<i1> loc(callsite(#di_loc_invalid at #di_loc_block))\n"
            "    return loc(callsite(callsite(#di_loc_invalid at #di_loc_invalid) at #di_loc_func))")
    assert errors(entry("test", "#di_loc_func", body)) == []
    assert errors(entry("test", "#unknown", "return loc(callsite(#di_loc_invalid at #loc_func))")) == []


def test_every_rule_holds_after_a_bytecode_round_trip():
    for src, message in [(entry("test", "#di_loc_block"), RULE1), (entry("foo", "#di_loc_func"), RULE2),
                         (entry("invalid", "#di_loc_invalid", "return loc(#di_loc_inner_block)"), RULE4)]:
        module = read_bytecode(write_bytecode(parse_module(SETUP + src)))
        assert [d.message for d in verify_module(module) if d.is_error] == [message]


def test_hand_built_debug_records():
    f = D.DIFile("k.py", "/src")
    sp = D.DISubprogram(f, 1, "k", "k", D.DICompileUnit(f), 0, flags=1)
    other = D.DISubprogram(f, 9, "g", "g", D.DICompileUnit(f), 3)
    block = D.DILexicalBlock(D.DILexicalBlock(sp, f, 2, 0), f, 3, 5)
    ret = ReturnOp()
    ret.loc = D.DICallSite(D.DILoc(other, "k.py", 9, 1), D.DILoc(block, "k.py", 4, 2))
    fn = Function("k", FunctionType((), ()), Region([Block()]), is_entry=True, loc=D.DILoc(sp, "k.py", 1, 0))
    fn.entry_block.append(ret)
    module = Module(NEWEST, functions=[fn])
    assert verify_module(module) == []
    assert subprogram_of(block) is sp and get_di_loc(ret.loc).scope is block
    fn.name = "kk"
    (d,) = verify_module(module)
    assert d.message == ("'cuda_tile.entry' op invalid function debug info scope: #cuda_tile.di_subprogram<file = "
                         '<"k.py" in "/src">, line = 1, name = "k", linkageName = "k", compileUnit = <file = <"k.py" '
                         'in "/src">>, flags = declaration>. Function name "kk" does not match subprogram scope '
                         'linkage name "k".')
    assert attr_text(block).endswith(', file = <"k.py" in "/src">, line = 2>, file = <"k.py" in "/src">, '
                                     'line = 3, column = 5>')
    assert loc_text(None) == "loc(unknown)"


# -- the parser's checks of the attributes --------------------------------------------------
@pytest.mark.parametrize("attr, messages", [
    ("#cuda_tile.di_compile_unit<>", ("expected valid keyword", "expected a parameter name in struct")),
    ('#cuda_tile.di_subprogram<file = #file, line = 1, linkageName = "t", compileUnit = #compile_unit>',
     ("struct is missing required parameter: name",)),
    ('#cuda_tile.di_subprogram<file = #file, line = 1, name = "t", compileUnit = #compile_unit, scopeLine = 2>',
     ("struct is missing required parameter: linkageName",)),
    ("#cuda_tile.di_lexical_block<scope = #subprogram, file = #file>",
     ("struct is missing required parameter: line",)),
    ("#cuda_tile.di_lexical_block<scope = #subprogram, file = #file, line = 1, line = 2>",
     ("duplicate or unknown struct parameter name: line",)),
    ("#cuda_tile.di_lexical_block<scope = #subprogram, file = #file, row = 2>",
     ("duplicate or unknown struct parameter name: row",)),
    ("#cuda_tile.di_lexical_block<scope = #file, file = #file, line = 1>",
     ("invalid kind of attribute specified",
      "failed to parse CudaTile_DILexicalBlockAttr parameter 'scope' which is to be a `DILocalScopeAttr`")),
    ("#cuda_tile.di_compile_unit<file = #subprogram>",
     ("invalid kind of attribute specified",
      "failed to parse CudaTile_DICompileUnitAttr parameter 'file' which is to be a `DIFileAttr`")),
    ("#cuda_tile.di_lexical_block<scope = #subprogram, file = #file, line = 4294967296>",
     ("integer value too large",
      "failed to parse CudaTile_DILexicalBlockAttr parameter 'line' which is to be a `unsigned`")),
    ("#cuda_tile.di_loc<loc(\"a.py\":1:2) in #file>",
     ("invalid kind of attribute specified",
      "failed to parse CudaTile_DILocAttr parameter 'scope' which is to be a `DILocalScopeAttr`")),
    ("#cuda_tile.di_loc<loc(unknown) in #subprogram>",
     ("invalid kind of attribute specified",
      "failed to parse CudaTile_DILocAttr parameter 'sourceLoc' which is to be a `FileLineColLoc`")),
])
def test_attribute_parse_errors(attr, messages):
    with pytest.raises(ParseError) as e:
        parse_chunk(SETUP + f"#bad = {attr}\n")
    assert e.value.messages == messages


def test_attributes_as_nvidia_prints_them_parse():
    """Inline file and compile-unit bodies and 13.5's ``flags = declaration``, as in
    tileiras's messages; parameters in any order, optional ones left out."""
    src = (f"#sp = {TEST_SP[:-1]}, flags = declaration>\n"
           '#b = #cuda_tile.di_lexical_block<line = 3, file = <"foo.py" in "/tmp/">, scope = #sp>\n'
           '#l = #cuda_tile.di_loc<loc("foo.py":3:1) in #b>\n'
           "cuda_tile.module @kernels {\n  entry @test() {\n    return loc(#l)\n  } loc(#l)\n}\n")
    fn = parse_module(src).functions[0]
    assert fn.loc.scope == D.DILexicalBlock(D.DISubprogram(D.DIFile("foo.py", "/tmp/"), 1, "test", "test",
                                                           D.DICompileUnit(D.DIFile("foo.py", "/tmp/")), 2, 1),
                                            D.DIFile("foo.py", "/tmp/"), 3, 0)
    assert attr_text(fn.loc.scope.scope) == TEST_SP[:-1] + ", flags = declaration>"


# -- against NVIDIA's tileiras ----------------------------------------------------------------
def test_same_messages_as_tileiras(real_tileiras, tmp_path):
    cases = [entry("test", "#di_loc_block"), entry("foo", "#di_loc_func"),
             entry("test", "#unknown", if_yield("#di_loc_block")),
             entry("invalid", "#di_loc_invalid", "return loc(callsite(#di_loc_func at #di_loc_inner_block))"),
             entry("test", "callsite(#di_loc_func at #di_loc_func)"),
             entry("test", "#di_loc_func", "return loc(callsite(#di_loc_invalid at #di_loc_block))")]
    for src in cases:
        module = parse_module(SETUP + src)
        path = tmp_path / "k.tileirbc"
        path.write_bytes(write_bytecode(module))
        run = subprocess.run([real_tileiras, "--gpu-name=sm_100", "-o", str(tmp_path / "k.cubin"), str(path)],
                             capture_output=True, text=True, check=False)
        theirs = [line.removeprefix("error: ") for line in run.stderr.splitlines()
                  if line.startswith("error: ") and "verification failed" not in line
                  and "does not correspond" not in line]
        assert [d.message for d in verify_module(module) if d.is_error] == theirs, src
