"""tileiras-diffcheck: inputs synthesized from the IR alone, interpreter vs compiled PTX."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.reader import read_bytecode

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vadd.tileir"


def test_synthesized_arguments_follow_the_views():
    fn = read_bytecode(EXAMPLE.read_bytes()).functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(0), extent=37)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    assert len(arrays) == 3 and all(a.shape == (37,) and a.dtype == np.float32 for a in arrays)
    assert args[1] == 37  # the dynamic shape of the first array (its stride is static)


def test_example_agrees(capsys):
    assert diffcheck.main([str(EXAMPLE), "--extent", "300", "--grid", "3"]) == 0
    assert "agree" in capsys.readouterr().out


def test_disagreement_is_reported(monkeypatch, capsys):
    """A compiler bug (here: a wrong PTX add) must show up as a difference."""
    real = diffcheck.compile_ptx
    monkeypatch.setattr(diffcheck, "compile_ptx", lambda m, g: real(m, g).replace("add.rn.f32", "sub.rn.f32"))
    assert diffcheck.main([str(EXAMPLE)]) == 1
    assert "differs" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["row_reductions", "gather_2d", "while_break_continue", "cat_extract"])
def test_kernels_agree(tileir_store, name):
    found = tileir_store.get(f"{name}.sm_90.13.4")
    if found is None:
        pytest.skip(f"cuTile cannot export {name}")
    module = read_bytecode(found.path.read_bytes())
    reports = diffcheck.check_module(module, "sm_90")
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]
