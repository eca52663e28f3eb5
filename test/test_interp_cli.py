"""tileiras-run: load .npy inputs, run, write .npy outputs."""
from __future__ import annotations

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras.interp.cli import main  # noqa: E402
from tileiras.interp.testing import array, export  # noqa: E402


@ct.kernel
def saxpy(x, y, out, a):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(16,)) * a + ct.load(y, index=(i,), shape=(16,))
    ct.printf("block %d\n", i)
    ct.assert_(t < 1000.0, "too big")
    ct.store(out, index=(i,), tile=t)


@pytest.fixture
def kernel_file(tmp_path):
    from tileiras.interp.testing import scalar
    path = tmp_path / "saxpy.tileir"
    path.write_bytes(export(saxpy, array(ct.float32), array(ct.float32), array(ct.float32),
                            scalar(ct.float32)))
    return path


def test_run_writes_outputs(tmp_path, kernel_file, capsys):
    x, y = np.arange(48, dtype=np.float32), np.ones(48, np.float32)
    for name, a in (("x", x), ("y", y), ("out", np.zeros(48, np.float32))):
        np.save(tmp_path / f"{name}.npy", a)
    rc = main([str(kernel_file), "--grid", "3", "--cutile", "--arg", str(tmp_path / "x.npy"),
               "--arg", str(tmp_path / "y.npy"), "--arg", str(tmp_path / "out.npy"), "--arg", "2.5",
               "--out-dir", str(tmp_path / "res")])
    assert rc == 0
    np.testing.assert_array_equal(np.load(tmp_path / "res" / "out.npy"), x * np.float32(2.5) + y)
    np.testing.assert_array_equal(np.load(tmp_path / "res" / "x.npy"), x)
    assert capsys.readouterr().out == "block 0\nblock 1\nblock 2\n"


def test_failed_assert_exits_nonzero(tmp_path, kernel_file, capsys):
    for name in ("x", "y", "out"):
        np.save(tmp_path / f"{name}.npy", np.full(16, 500, np.float32))
    rc = main([str(kernel_file), "--cutile", "--arg", str(tmp_path / "x.npy"),
               "--arg", str(tmp_path / "y.npy"), "--arg", str(tmp_path / "out.npy"), "--arg", "3"])
    assert rc == 1
    assert "too big" in capsys.readouterr().err


def test_wrong_argument_count_is_an_error(kernel_file, capsys):
    assert main([str(kernel_file), "--arg", "1"]) == 1
    assert "takes 10 arguments" in capsys.readouterr().err
