"""Command-line parsing: ``cli.parse_plain`` (no click import) agrees with click.

Both commands declare their options once (``driver.OPTIONS``, ``disasm.OPTIONS``); click
parses any command line, and ``parse_plain`` reads the plainly spelled ones without
importing click.  Where ``parse_plain`` answers, click must give the same parameters.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tileiras import cli, disasm, driver

TOOLS = {"tileiras": driver.OPTIONS, "tileirdisasm": disasm.OPTIONS}
CLICK_ERROR = "click refused it"

#: Every spelling of every option, attached and separate values, values that look like
#: options, unknown options, ``-``/``--`` and combined short flags.
TOKENS = sorted({decl for options in TOOLS.values() for o in options for decl in o.decls} | {
    "in.tileir", "other.tileir", "", "sm_90", "out.cubin", "3", "x", "-", "--", "-x", "=v", "-O3", "-O=3",
    "-Ox", "-o=out", "-oout", "-gO3", "-g3", "-lfoo", "--gpu-name=sm_90", "--gpu-name=", "--lineinfo=1",
    "--opt-level=2", "--emit=ptx", "--preview=simt", "--remarks=all", "--unknown", "--gpu", "-z", "-gz",
    "--print-debug-info=1"})


def click_params(prog: str, argv: list[str]) -> object:
    try:
        return cli.parse_with_click(cli.click_command(prog, TOOLS[prog], "inputs"), prog, argv)
    except cli.CommandLineError:
        return CLICK_ERROR


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(sorted(TOOLS)), st.lists(st.sampled_from(TOKENS), max_size=7))
def test_plain_parse_agrees_with_click(prog: str, argv: list[str]) -> None:
    plain = cli.parse_plain(TOOLS[prog], "inputs", argv)
    if plain is not None:
        assert plain == click_params(prog, argv)


CUTILE_LINES = [  # what cuTile's compile_cubin passes, and the bench's command line
    ["k.bytecode", "-o", "k.cubin", "--gpu-name", "sm_90", "-O3", "--lineinfo"],
    ["k.bytecode", "-o", "k.cubin", "--gpu-name", "sm_100", "-O0", "--preview=simt", "-l", "lib.tileir",
     "--device-debug", "--remark-format=yaml", "--remarks=all", "--remarks-output-file=k.remarks.yaml"],
    ["k.tileir", "--gpu-name", "sm_80", "-o", "out.cubin"],
]


@pytest.mark.parametrize("argv", CUTILE_LINES)
def test_cutile_command_lines_are_plain(argv: list[str]) -> None:
    plain = cli.parse_plain(driver.OPTIONS, "inputs", argv)
    assert plain is not None
    assert plain == click_params("tileiras", argv)
    assert plain["gpu_name"] == argv[argv.index("--gpu-name") + 1]


def test_plain_parse_values() -> None:
    params = cli.parse_plain(driver.OPTIONS, "inputs", ["a", "-O2", "--arch=sm_90", "-l", "x", "-l", "y", "-g", "b"])
    assert params is not None
    assert (params["inputs"], params["opt_level"], params["gpu_name"]) == (("a", "b"), "2", "sm_90")
    assert (params["libraries"], params["device_debug"], params["lineinfo"]) == (("x", "y"), True, False)
    assert (params["output_file"], params["host_os"], params["preview"]) == (None, "linux", ())


@pytest.mark.parametrize("argv", [["--", "a"], ["-o"], ["-o", "-x"], ["--lineinfo=1"], ["-gO3"], ["--nope"],
                                  ["-"], ["-o=out"], ["--gpu-name="]])
def test_unusual_lines_are_left_to_click(argv: list[str]) -> None:
    assert cli.parse_plain(driver.OPTIONS, "inputs", argv) is None
