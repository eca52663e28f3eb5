"""The Tile IR text parser: print(parse(text)) == text, text -> bytecode -> NVIDIA's
tileirdisasm == text, generic form, split files, locations and located errors."""
from __future__ import annotations

import subprocess
import sys

import pytest
from _compare import run_tool, text_diff

from tileiras.ir import debug as D
from tileiras.ir import types as T
from tileiras.reader import read_bytecode
from tileiras.text.parser import ParseError, TextLoc, parse_chunk, parse_module, split_input
from tileiras.text.printer import print_module
from tileiras.writer import write_bytecode


@pytest.mark.parametrize("debug_info", [False, True], ids=["plain", "g"])
def test_print_parse_print(tileir_file, debug_info):
    text = print_module(read_bytecode(tileir_file.read_bytes()), debug_info=debug_info)
    again = print_module(parse_module(text, "t.mlir"), debug_info=debug_info)
    if again != text:
        pytest.fail(f"{tileir_file.id}: print(parse(text)) differs:\n{text_diff(text, again)}", pytrace=False)


@pytest.mark.parametrize("debug_info", [False, True], ids=["plain", "g"])
def test_text_to_bytecode_matches_tileirdisasm(tileir_files, real_tileirdisasm, tmp_path, debug_info):
    """A sample of every kernel (one arch/version each): NVIDIA's text, parsed and
    written by us, disassembles to the same text."""
    flags = ["-g"] if debug_info else []
    seen: set[str] = set()
    for f in tileir_files:
        if f.kernel in seen:
            continue
        seen.add(f.kernel)
        text = run_tool([real_tileirdisasm, *flags, str(f.path)]).stdout.decode()
        out = tmp_path / "out.tileir"
        out.write_bytes(write_bytecode(parse_module(text, "t.mlir")))
        again = run_tool([real_tileirdisasm, *flags, str(out)]).stdout.decode()
        if again != text:
            pytest.fail(f"{f.id}: text -> bytecode -> tileirdisasm differs:\n{text_diff(text, again)}",
                        pytrace=False)


def test_oldest_version_target(tileir_files, real_tileirdisasm, tmp_path):
    """Text from a 13.1 file written back at 13.1 disassembles to the same text."""
    from tileiras.ir.version import V13_1

    for f in [f for f in tileir_files if f.version == "13.1"][::7]:
        text = run_tool([real_tileirdisasm, str(f.path)]).stdout.decode()
        out = tmp_path / "out.tileir"
        out.write_bytes(write_bytecode(parse_module(text, "t.mlir", version=V13_1)))
        assert run_tool([real_tileirdisasm, str(out)]).stdout.decode() == text, f.id


SOURCE = """\
cuda_tile.module @kernels {
  cuda_tile.global private constant @g <f32: [1.0, 2.0]> : !cuda_tile.tile<2xf32>
  cuda_tile.entry @k(%a: !cuda_tile.tile<ptr<f32>>, %n: !cuda_tile.tile<i32>) {
    %c = cuda_tile.constant <f32: 1.5> : !cuda_tile.tile<4xf32>
    %d = cuda_tile.addf %c, %c rounding<zero> : !cuda_tile.tile<4xf32>
    %i = cuda_tile.iota : tile<4xi32>
    %e = cuda_tile.addi %i, %i overflow<no_signed_wrap> : tile<4xi32>
    %t = make_token : token
    %r = for %iv in (%n to %n, step %n) : tile<i32> iter_values(%acc = %d) -> (tile<4xf32>) {
      %s = mulf %acc, %acc : tile<4xf32>
      continue %s : tile<4xf32>
    }
  }
}
"""

EXPECTED = """\
global private  constant @g <f32: [1.000000e+00, 2.000000e+00]> : tile<2xf32>
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) {
  %cst_f32 = constant <f32: 1.500000e+00> : tile<4xf32>
  %0 = addf %cst_f32, %cst_f32 rounding<zero> : tile<4xf32>
  %1 = iota : tile<4xi32>
  %2 = addi %1, %1 overflow<no_signed_wrap> : tile<4xi32>
  %3 = make_token : token
  %for = for %loopIdx in (%arg1 to %arg1, step %arg1) : tile<i32> iter_values(%iterArg0 = %0) -> (tile<4xf32>) {
    %4 = mulf %iterArg0, %iterArg0  : tile<4xf32>
    continue %4 : tile<4xf32>
  }
  return
}
"""


def test_cuda_tile_source_form():
    assert print_module(parse_module(SOURCE)) == EXPECTED


def test_generic_form_equals_custom_form():
    generic = """
"cuda_tile.module"() <{sym_name = "m"}> ({
  "cuda_tile.testing$func"() <{function_type = (!cuda_tile.tile<2xf32>, !cuda_tile.tile<2xf32>) -> (),
                                sym_name = "f"}> ({
  ^bb0(%a: !cuda_tile.tile<2xf32>, %b: !cuda_tile.tile<2xf32>):
    %0 = "cuda_tile.addf"(%a, %b) <{rounding_mode = #cuda_tile.rounding<zero>}>
         : (!cuda_tile.tile<2xf32>, !cuda_tile.tile<2xf32>) -> !cuda_tile.tile<2xf32>
    %1 = "cuda_tile.cmpf"(%0, %b) {comparison_predicate = #cuda_tile.comparison_predicate<less_than>,
         comparison_ordering = #cuda_tile.comparison_ordering<ordered>}
         : (!cuda_tile.tile<2xf32>, !cuda_tile.tile<2xf32>) -> !cuda_tile.tile<2xi1>
    "cuda_tile.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
"""
    custom = """
testing$func @f(%a: tile<2xf32>, %b: tile<2xf32>) {
  %0 = addf %a, %b rounding<zero> : tile<2xf32>
  %1 = cmpf less_than ordered %0, %b : tile<2xf32> -> tile<2xi1>
  return
}
"""
    assert print_module(parse_module(generic)) == print_module(parse_module(custom))


def test_split_input_keeps_line_numbers():
    text = "a\n// -----\nb\nc\n// -----\n\nd\n"
    chunks = split_input(text)
    assert [c.strip() for c, _ in chunks] == ["a", "b\nc", "d"]
    bad = "entry @k() {\n}\n// -----\nentry @k() {\n  %0 = constant 1 : tile<i32>\n}\n"
    chunk, offset = split_input(bad)[1]
    with pytest.raises(ParseError) as err:
        parse_chunk(chunk, "s.mlir", line_offset=offset)
    assert str(err.value) == "loc(\"s.mlir\":5:17): error: custom op 'cuda_tile.constant' expected '<'"


def test_locations_become_debug_records():
    text = """entry @k() {
  %0 = make_token : token loc("f.py":3:4)
  %1 = make_token : token loc(#l)
  %2 = make_token : token
  return
} loc(#l)
#f = #cuda_tile.di_file<"f.py" in "/src">
#cu = #cuda_tile.di_compile_unit<file = #f>
#sp = #cuda_tile.di_subprogram<file = #f, line = 1, name = "k", linkageName = "k", compileUnit = #cu, scopeLine = 1>
#l0 = loc("f.py":7:2)
#l = #cuda_tile.di_loc<#l0 in #sp>
"""
    kept = parse_module(text, "k.mlir", keep_positions=True)
    ops = kept.functions[0].entry_block.ops
    assert ops[0].loc == TextLoc(None, "f.py", 3, 4)
    assert isinstance(ops[1].loc, D.DILoc) and (ops[1].loc.line, ops[1].loc.column) == (7, 2)
    assert ops[1].loc.scope.name == "k"
    assert ops[2].loc == TextLoc(None, "k.mlir", 4, 3)
    plain = parse_module(text, "k.mlir")
    assert [op.loc for op in plain.functions[0].entry_block.ops][::2] == [None, None]
    assert plain.functions[0].loc == ops[1].loc
    assert "loc(#loc" in print_module(plain, debug_info=True)


def test_types_with_and_without_prefix():
    text = ("testing$func @f(%a: !cuda_tile.partition_view<tile=(2), padding_value = nan, "
            "!cuda_tile.tensor_view<16xf32, strides=[1]>>, %b: tensor_view<?x2xf32, strides=[1,?]>) {\n}\n")
    fn = parse_module(text).functions[0]
    a, b = fn.type.inputs
    assert isinstance(a, T.PartitionViewType) and a.padding_value is T.PaddingValue.NAN
    assert b.shape == (T.DYNAMIC, 2) and b.strides == (1, T.DYNAMIC)


@pytest.mark.parametrize("text, message", [
    ("entry @k() {\n  %0 = constant \"foo\" : tile<i8>\n}\n",
     "2:17): error: custom op 'cuda_tile.constant' expected '<'"),
    ("entry @k() {\n  %0 = constant <i8: true> : tile<i8>\n}\n",
     "2:22): error: custom op 'cuda_tile.constant' expected integer value"),
    ("entry @k() {\n  %0 = constant <i8: [1, 2]> : tile<4xi8>\n}\n",
     "2:22): error: custom op 'cuda_tile.constant' inferred shape of elements literal ([2]) does not match "
     "type ([4])"),
    ("entry @k() {\n  %0 = constant <i8: 300> : tile<i8>\n}\n",
     "2:22): error: custom op 'cuda_tile.constant' integer constant out of range for type"),
    ("entry @k() {\n  %0 = divi %a, %a : tile<i8>\n}\n",
     "2:20): error: custom op 'cuda_tile.divi' expected valid keyword\n"
     "loc(\"bad.mlir\":2:20): error: custom op 'cuda_tile.divi' expected signedness to be one of: "
     "{'signed', 'unsigned'}"),
    ("entry @k() {\n  %0 = frobnicate : tile<i8>\n}\n", "2:8): error: custom op 'frobnicate' is unknown"),
    ("entry @k() {\n  %0 = addi %x, %x : tile<i8>\n}\n", "2:13): error: use of undeclared SSA value name"),
    ("testing$func @k(%a: tile<2xi32>, %b: tile<4xi32>) {\n  %0 = addi %a, %b : tile<2xi32>\n}\n",
     "2:17): error: use of value '%b' expects different type than prior uses: "
     "'!cuda_tile.tile<2xi32>' vs '!cuda_tile.tile<4xi32>'"),
    ("entry @k() {\n  %0 = make_token : token\n  %0 = make_token : token\n}\n",
     "3:3): error: redefinition of SSA value '%0'"),
    ("entry @k() {\n  %0, %1 = make_token : token\n}\n",
     "2:3): error: operation defines 1 results but was provided 2 to bind"),
    ("entry @k() {\n  %0 = make_token : token\n", "3:1): error: expected '}' to end the region"),
])
def test_invalid_text_messages(text, message):
    with pytest.raises(ParseError) as err:
        parse_module(text, "bad.mlir")
    assert str(err.value) == 'loc("bad.mlir":' + message


def test_cli_text_to_bytecode(tmp_path, tileir_files):
    from tileiras.ir.version import V13_3

    source = tmp_path / "in.mlir"
    source.write_text(EXPECTED)
    out = tmp_path / "out.tileir"
    r = subprocess.run([sys.executable, "-m", "tileiras.driver", str(source), "--emit=bytecode",
                        "--bytecode-version=13.3", "-o", str(out)], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (0, "")
    module = read_bytecode(out.read_bytes())
    assert module.version == V13_3
    r = subprocess.run([sys.executable, "-m", "tileiras.driver", str(source), "--emit=mlir"],
                       capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, EXPECTED)


@pytest.mark.parametrize("text, message", [
    ("entry @k() {\n  %0 = constant <i32: 1> : tile<2xi32>\n  %1 = addf %0, %0 : tile<2xi32>\n}\n",
     "loc(\"{path}\":3:3): error: 'cuda_tile.addf' op operand #0 must be tile of f16 or bf16 or f32 or f64 "
     "values, but got '!cuda_tile.tile<2xi32>'"),
    ("entry @k() {\n  %0 = constant <i32: 1> : tile<2xi32>\n  %1 = addi %0, %0 : tile<2xi32>\n",
     "loc(\"{path}\":4:1): error: expected '}' to end the region"),
    ("entry @k() {\n  \"test.op\"() : () -> ()\n}\n", None),
])
def test_cli_invalid_text_is_located(tmp_path, text, message):
    source = tmp_path / "bad.mlir"
    source.write_text(text)
    r = subprocess.run([sys.executable, "-m", "tileiras.driver", str(source), "--emit=bytecode", "-o",
                        str(tmp_path / "o.tileir")], capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f'loc("{source}":'), first
    if message is not None:
        assert first == message.replace("{path}", str(source))
