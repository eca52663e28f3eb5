"""``verify.recheck_for_target`` (the driver's target check) reports what a full
``check_module(module, gpu_name=...)`` reports, on every exported kernel and target."""
from __future__ import annotations

from pathlib import Path

import pytest

from tileiras import verify
from tileiras.reader import read_bytecode

TARGETS = ("sm_80", "sm_100", "sm_120")  # fp8 fails on sm_80, classified pointers off sm_100


def outcome(check, module, gpu_name: str) -> str:
    try:
        check(module, gpu_name)
    except verify.VerifyError as err:
        return str(err)
    return "ok"


def full_check(module, gpu_name: str) -> None:
    verify.check_module(module, gpu_name=gpu_name)


def test_recheck_reports_what_a_full_check_reports(tileir_files) -> None:
    compared = failures = 0
    for f in tileir_files:
        module = read_bytecode(f.path.read_bytes())
        verify.check_module(module)  # as the driver does when it reads the file
        for gpu in TARGETS:
            full = outcome(full_check, module, gpu)
            assert outcome(verify.recheck_for_target, module, gpu) == full, (f.path, gpu)
            compared += 1
            failures += full != "ok"
    assert compared > 100
    assert failures > 0  # some kernels (fp8 on sm_80...) do fail a target: both paths were exercised


def test_only_target_rules_read_the_target() -> None:
    """recheck_for_target runs arch.TARGET_RULES only: a rule reading ``gpu_name`` elsewhere
    would be skipped by it."""
    folder = Path(verify.__file__).parent
    assert sorted(p.name for p in folder.glob("*.py") if "ctx.gpu_name" in p.read_text()) == ["arch.py"]


def test_recheck_names_the_target(tileir_store) -> None:
    found = tileir_store.get("fp8_convert.sm_90.13.1")
    if found is None:
        pytest.skip("cuTile cannot export the fp8 kernel")
    module = read_bytecode(found.path.read_bytes())
    with pytest.raises(verify.VerifyError, match="Incompatibility with architecture 'sm_80'"):
        verify.recheck_for_target(module, "sm_80")
    verify.recheck_for_target(module, "sm_90")
