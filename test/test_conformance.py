"""NVIDIA's cuda-tile dialect and bytecode tests, run by ``tileiras.conformance`` when the
suite is checked out beside the repository (``../shared/peer/cuda-tile-tests``).

The three numbers below are the rates reached so far: raise them as they improve, never
lower them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

#: Fraction of ``expected-error`` annotations matched (same line, message contains the text).
MIN_ERROR_RATE = 0.99
#: Fraction of positive-test chunks that parse, verify and round-trip (text and bytecode).
MIN_ROUND_TRIP_RATE = 1.0
#: Fraction of CHECK lines of ``not TOOL ... | FileCheck`` files matched by an error we give
#: (96/97: the miss is cuda-tile-translate's own command-line message for --bytecode-version).
MIN_CHECKED_ERROR_RATE = 0.98

SUITE = Path(__file__).resolve().parents[2] / "shared" / "peer" / "cuda-tile-tests"


@pytest.fixture(scope="module")
def results():
    if not SUITE.is_dir():
        pytest.skip(f"cuda-tile test suite not found at {SUITE}")
    from tileiras import conformance

    return conformance.run_suite(SUITE)


def test_expected_error_rate(results):
    from tileiras import conformance

    total = conformance.rates(results)
    assert total.expected > 0
    assert total.error_rate >= MIN_ERROR_RATE, conformance.table(results, verbose=True)


def test_round_trip_rate(results):
    from tileiras import conformance

    total = conformance.rates(results)
    assert total.round_trips > 0
    assert total.round_trip_rate >= MIN_ROUND_TRIP_RATE, conformance.table(results, verbose=True)


def test_checked_error_rate(results):
    from tileiras import conformance

    total = conformance.rates(results)
    assert total.checks > 0
    assert total.checked_error_rate >= MIN_CHECKED_ERROR_RATE, conformance.table(results, verbose=True)


def test_cli_table_and_exit_code(tmp_path, capsys):
    from tileiras import conformance

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "bad_invalid.mlir").write_text(
        "// RUN: cuda-tile-opt %s -verify-diagnostics -split-input-file\n"
        "entry @k() {\n  // expected-error @below{{expected '<'}}\n  %0 = constant 1 : tile<i32>\n}\n"
        "// -----\n"
        "entry @k() {\n  // expected-error @+1 {{custom op 'nope' is unknown}}\n  nope\n}\n"
        "// -----\n"
        "entry @k() {\n  // expected-error @below{{something else}}\n  %0 = make_token : token\n}\n")
    (suite / "good.mlir").write_text("// RUN: %round_trip_test %s %t\n"
                                     "entry @k() {\n  %0 = make_token : token\n}\n")
    assert conformance.main([str(suite)]) == 0
    out = capsys.readouterr().out
    assert "bad_invalid.mlir" in out and "2/3" in out and "1/1" in out
    assert conformance.main([str(suite), "--min-pass-rate", "0.9"]) == 1


def test_hint_flags_of_run_lines():
    from tileiras.conformance import hint_mode

    assert hint_mode(["cuda-tile-opt %s -verify-diagnostics"]) is None
    assert hint_mode(["cuda-tile-opt %s -Wunsupported-hints -verify-diagnostics"]) == "warn"
    assert hint_mode(["cuda-tile-opt %s -Wunsupported-hints -Werr-hints -verify-diagnostics"]) == "error"


def test_writer_checks_and_bytecode_version(tmp_path):
    from tileiras import conformance

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "to_bc.mlir").write_text(
        "// RUN: cuda-tile-translate -mlir-to-cudatilebc -no-implicit-module -bytecode-version=13.1 "
        "-split-input-file -verify-diagnostics -allow-unregistered-dialect %s\n"
        "// expected-error @below{{only ops from the 'cuda_tile' dialect are allowed}}\n"
        "cuda_tile.module @m {\n  entry @k() {\n    \"test.op\"() : () -> ()\n  }\n}\n"
        "// -----\n"
        "// expected-error @below{{only function and global ops are allowed in the body}}\n"
        "cuda_tile.module @m {\n  constant <f32: 5.0> : tile<f32>\n}\n"
        "// -----\n"
        "// expected-error @unknown{{type 'Float8E8M0FNU' requires bytecode version 13.2+, targeting 13.1}}\n"
        "cuda_tile.module @m {\n  entry @k(%p: tile<f8E8M0FNU>) {\n  }\n}\n")
    (suite / "evolution.mlir").write_text(
        "// RUN: cuda-tile-translate -test-cudatile-roundtrip -bytecode-version=250.1 %s\n"
        "entry @k() {\n  testing$bytecode_test_new_attribute\n}\n")
    results = conformance.run_suite(suite)
    by_name = {r.path: r for r in results}
    assert (by_name["to_bc.mlir"].matched, by_name["to_bc.mlir"].expected) == (3, 3), by_name["to_bc.mlir"].failures
    assert by_name["evolution.mlir"].kind == "not run" and "test-only" in by_name["evolution.mlir"].reason


def test_filecheck_files_count_their_checked_errors(tmp_path):
    from tileiras import conformance

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "bad_type.mlir").write_text(
        "// RUN: not cuda-tile-translate -mlir-to-cudatilebc %s -no-implicit-module 2>&1 | FileCheck %s\n"
        "// CHECK: unsupported type in bytecode writer\n"
        "// CHECK-NOT: something we never say\n"
        "cuda_tile.module @m {\n  entry @k(%a : tensor<2xi16>) {\n  }\n}\n")
    (suite / "wrong.mlir").write_text(
        "// RUN: not cuda-tile-opt %s 2>&1 | FileCheck %s\n"
        "// CHECK: error: {{.*}}a message we do not give\n"
        "entry @k() {\n}\n")
    results = {r.path: r for r in conformance.run_suite(suite)}
    assert (results["bad_type.mlir"].kind, results["bad_type.mlir"].checks_ok, results["bad_type.mlir"].checks) \
        == ("checks", 1, 1)
    assert (results["wrong.mlir"].checks_ok, results["wrong.mlir"].checks) == (0, 1)
    total = conformance.rates(list(results.values()))
    assert (total.checks_ok, total.checks, total.expected) == (1, 2, 0)
    assert "CHECKed errors" in conformance.table(list(results.values()))
