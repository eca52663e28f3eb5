"""List-of-array parameters (grouped GEMM): the interpreter and the emulator build cuTile's
table of (address, shape, strides) rows from an ``ArrayList``, and tileiras-diffcheck
synthesizes lists for the kernels that take them."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.lists import GROUPED_AXPY, GROUPED_MATMUL  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.emulate import launch  # noqa: E402
from tileiras.interp import ArrayList  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

ARCHS = ("sm_80", "sm_90")
_modules: dict = {}


def module(case, arch):
    if (case.name, arch) not in _modules:
        _modules[case.name, arch] = read_bytecode(export(case, arch))
    return _modules[case.name, arch]


def axpy_inputs():
    """Three groups of different lengths (a tile of 64 covers 100 only with padding)."""
    rng = np.random.default_rng(3)
    xs = ArrayList([rng.uniform(-4, 4, n).astype(np.float32) for n in (100, 64, 130)])
    ys = ArrayList([rng.uniform(-4, 4, n).astype(np.float32) for n in (100, 64, 130)])
    return xs, ys


def test_the_table_holds_address_shape_and_strides_in_elements():
    a = np.zeros((3, 5), np.float16)
    f = np.asfortranarray(np.zeros((4, 6), np.float16))
    table = ArrayList([a, f]).table([0x1000, 0x2000])
    np.testing.assert_array_equal(table, [[0x1000, 3, 5, 5, 1], [0x2000, 4, 6, 1, 4]])
    assert table.dtype == np.int64
    with pytest.raises(ValueError, match="one rank"):
        ArrayList([a, np.zeros(3)])


@pytest.mark.parametrize("arch", ARCHS)
def test_grouped_axpy_updates_every_group_in_place(arch):
    """Interpreter and our PTX in the emulator against numpy: each group's own length holds
    (the tail of group 0 and 2 is padded), nothing outside a group's array is touched."""
    xs, ys = axpy_inputs()
    expected = [y + np.float32(0.5) * x for x, y in zip(xs.arrays, ys.arrays)]
    grid = (3, 3, 1)
    entry = module(GROUPED_AXPY, arch).functions[0].name
    got_interp = ys.copy()
    interp.run(module(GROUPED_AXPY, arch), entry, grid, [xs, 3, got_interp, 3, np.float32(0.5)])
    ptx = diffcheck.compile_ptx(module(GROUPED_AXPY, arch), arch)
    got_ptx = ys.copy()
    result = launch(ptx, entry, grid, [xs, 3, got_ptx, 3, np.float32(0.5)])
    assert result.ok, result.trap
    for e, i, p in zip(expected, got_interp.arrays, got_ptx.arrays):
        np.testing.assert_allclose(i, e, rtol=1e-6)
        np.testing.assert_allclose(p, e, rtol=1e-6)


def test_diffcheck_synthesizes_lists_with_shapes_per_group():
    fn = module(GROUPED_MATMUL, "sm_90").functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(0), extent=40)
    lists = [a for a in args if isinstance(a, ArrayList)]
    assert len(lists) == 3 and args[1::2] == [diffcheck.LIST_LENGTH] * 3
    for lst in lists:
        assert [a.shape for a in lst.arrays] == [(48, 48), (64, 64), (80, 80)]  # div_by<16>
        assert all(a.dtype == np.float16 for a in lst.arrays)


@pytest.mark.parametrize("arch", ARCHS)
def test_grouped_matmul_agrees_on_every_group(arch):
    """A 2x2 grid of tiles in each of the three groups: all three C arrays are compared."""
    reports = diffcheck.check_module(module(GROUPED_MATMUL, arch), arch, grid=(2, 2, 3), extent=40)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_a_wrong_group_shows(monkeypatch):
    """A table whose rows all name group 0's array must be caught: diffcheck compares the
    members of a list, not only top-level arrays."""
    real = ArrayList.table
    m = module(GROUPED_MATMUL, "sm_80")
    expected = diffcheck.run_interpreter(m, m.functions[0].name, (2, 2, 3),
                                         args := diffcheck.synthesize_args(m.functions[0], np.random.default_rng(0), 40))
    monkeypatch.setattr(ArrayList, "table", lambda self, addrs: real(self, [addrs[0]] * len(addrs)))
    got = diffcheck.run_ptx(diffcheck.compile_ptx(m, "sm_80"), m.functions[0].name, (2, 2, 3), args)
    assert diffcheck.compare(expected, got) is not None


def nvidia_opinion(real_tileiras: str, arch: str, tmp_path) -> diffcheck.ThirdOpinion:
    import subprocess

    src, out = tmp_path / f"g.{arch}.tileir", tmp_path / f"g.{arch}.cubin"
    src.write_bytes(export(GROUPED_MATMUL, arch))
    subprocess.run([real_tileiras, "--gpu-name", arch, "--lineinfo", "-o", str(out), str(src)], check=True)
    return diffcheck.ThirdOpinion.read(str(out))


def test_nvidia_grouped_matmul_agrees_on_sm80(real_tileiras, tmp_path):
    """NVIDIA's PTX reads the same tables: all three groups agree with the interpreter."""
    reports = diffcheck.check_module(module(GROUPED_MATMUL, "sm_80"), "sm_80", grid=(2, 2, 3), extent=40,
                                     nvidia=nvidia_opinion(real_tileiras, "sm_80", tmp_path))
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_nvidia_sm90_callback_stores_the_workspace_in_its_hidden_pointer(real_tileiras, tmp_path):
    """On sm_90 NVIDIA's kernel builds the groups' tensor maps on the device, in a global
    workspace whose size the host object declares; its callback copies the workspace address
    the driver passes (``launch + 8``) into the hidden ``.u64`` parameter."""
    from tileiras.emulate.launch import load_program
    from tileiras.emulate.nvhost import bank_offsets, is_runnable_here, load_host_object

    if not is_runnable_here():
        pytest.skip("NVIDIA's .nv.host is x86-64 code")
    theirs = nvidia_opinion(real_tileiras, "sm_90", tmp_path)
    name = module(GROUPED_MATMUL, "sm_90").functions[0].name
    params = load_program(theirs.ptx, name).function.params
    hidden = [p for p in params if p.hidden]
    assert [(p.type_name, p.size) for p in hidden] == [("u64", 8)]
    host = load_host_object(theirs.host_object)
    assert host.workspace_bytes >= 132 * 8192                 # %smid * 8192 + %warpid * 128
    offsets, size = bank_offsets(params, "sm_90")
    bank = np.zeros(size, np.uint8)
    host.on_arguments_change(name, bank, workspace=0x7A5000)
    at = offsets[hidden[0].name]
    assert int(bank[at:at + 8].view(np.uint64)[0]) == 0x7A5000
