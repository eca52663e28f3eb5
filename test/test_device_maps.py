"""Tensor maps the kernel builds itself: a grouped GEMM's K loop through TMA.

A grouped GEMM makes each group's views from its row of a table of arrays, so no host
callback can fill their maps at launch.  As NVIDIA's tileiras does on sm_90, the issuing
warp builds them in a workspace the driver gives the kernel (``codegen/device_maps.py``)
and the ring's boxes name them there.  The emulator checks the proxy order this relies on
(a copy reading a map without acquiring its release traps)."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.lists import GROUPED_MATMUL_WIDE  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.codegen import device_maps  # noqa: E402
from tileiras.codegen.abi import WORKSPACE_SM_BYTES, WORKSPACE_SMS  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.lower import tma  # noqa: E402
from tileiras.lower.tma_ring import RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_core as CO  # noqa: E402

_modules: dict = {}


def module(arch: str):
    if arch not in _modules:
        _modules[arch] = export(GROUPED_MATMUL_WIDE, arch)
    return read_bytecode(_modules[arch])


def tileas(arch: str):
    (tas,) = run_stages(module(arch), CompileOptions(gpu_name=arch), "tileas").tas.values()
    return tas


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_the_loop_is_a_tma_ring_whose_maps_the_kernel_builds(arch):
    tas = tileas(arch)
    (ring,) = tas.pipelines.values()
    assert isinstance(ring, RingPlan), ring
    assert ring.device_maps == (0, 1) and ring.maps == (-1, -1)
    # A's and B's maps, then C's: its store goes through TMA too, as NVIDIA's does
    assert tas.tensor_maps == () and tas.device_maps[:2] == ring.specs and len(tas.device_maps) == 3
    (store,) = [plan for plan in tas.tma.values()]
    assert store.device_map == tas.device_maps[2] and store.map_index == -1 and store.is_store
    for spec in tas.device_maps:
        # the base is the address the kernel loaded from the group's row, not a parameter
        assert spec.base.param is None and isinstance(spec.base.op, CO.IntToPtrOp)
        assert all(f.on_device for f in spec.dims) and all(f.on_device for f in spec.strides)
    # the maps are assembled after the stages and their mbarriers, inside the ring's scratch
    assert ring.map_staging >= ring.ring_bytes + ring.barrier_bytes and ring.map_staging % 128 == 0
    assert tas.scratch[ring.mma] == ring.map_staging + 2 * 128


def test_the_tileas_text_holds_the_device_maps():
    tas = tileas("sm_90")
    text = format_tileas(tas)
    assert re.search(r"^  #dmap1 = #tileas\.tensor_map<", text, re.M) and "#map0" not in text
    again = parse_tileas(text, tas.aa)
    assert again.device_maps == tas.device_maps and format_tileas(again) == text


def test_the_knob_keeps_the_copy_ring(monkeypatch):
    from tileiras.lower.software_pipeline import PipelinePlan

    monkeypatch.setenv("TILEIRAS_DEVICE_TENSOR_MAPS", "0")
    tas = tileas("sm_90")
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, PipelinePlan) and tas.device_maps == ()


def our_ptx(arch: str = "sm_90") -> str:
    return diffcheck.compile_ptx(module(arch), arch)


def test_the_ptx_builds_each_map_once_and_names_it_in_every_box():
    ptx = our_ptx()
    name = module("sm_90").functions[0].name
    assert f".hidden\t.param .u64 .ptr .global .align 1 {name}_param_6" in ptx
    assert ".minperctamemory 384" in ptx
    assert ptx.count("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned") == 3
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 3
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx and "st.global" not in ptx
    assert "%perctamemoryoffset" in ptx and "%warpid" in ptx and "%nsmid" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier" in ptx
    assert "cp.async.cg" not in ptx and "cvta.param" not in ptx


def test_ptxas_takes_it():
    cubin = compile_module(module("sm_90"), CompileOptions(gpu_name="sm_90"))
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
@pytest.mark.parametrize("extent", [40, 200])
def test_agrees_on_every_group(arch, extent):
    """Three groups of different shapes (tails; trip counts below and above the stages)."""
    reports = diffcheck.check_module(module(arch), arch, grid=(2, 2, 3), extent=extent)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_warp_specialized_the_producer_builds_them(monkeypatch):
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "1")
    (ring,) = tileas("sm_90").pipelines.values()
    assert ring.specialized and ring.device_maps == (0, 1)
    reports = diffcheck.check_module(module("sm_90"), "sm_90", grid=(2, 2, 3), extent=200)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def _no_acquire(monkeypatch):
    monkeypatch.setattr(device_maps, "acquire_map", lambda em, generic: None)


def _another_warps_slot(monkeypatch):
    """The maps written to the next warp's slot, the boxes naming the issuing warp's own."""
    real = device_maps.build_map

    def build_map(em, spec, slot, staging, writer):
        real(em, spec, em.b.add(slot, device_maps.ir.Constant(device_maps.I64, 128)), staging, writer)
    monkeypatch.setattr(device_maps, "build_map", build_map)


@pytest.mark.parametrize("plant, caught", [
    (_no_acquire, "without a fence.proxy.tensormap::generic.acquire"),
    (_another_warps_slot, "kind='tensormap'"),
])
def test_a_missing_order_is_caught(monkeypatch, plant, caught):
    plant(monkeypatch)
    (report,) = diffcheck.check_module(module("sm_90"), "sm_90", grid=(2, 2, 3), extent=40)
    assert report.problem is not None and caught in report.problem, report.problem


def test_the_host_object_asks_for_the_workspace_and_passes_it_on():
    """Slot 2 of the callback table: 3 maps' slots of 224 SMs of 64 warps (NVIDIA's
    grouped GEMM asks for as much: 0x540000 bytes); a driver that
    calls ``ON_PRE_LOAD`` with version 1 gets it for the SM count it reports, version 2
    none (it gives each CTA ``.minperctamemory`` instead); the kernel's callback stores the
    workspace's address (``launch + 8``) in the hidden pointer, where ptxas puts it."""
    from tileiras.emulate.launch import load_program
    from tileiras.emulate.nvhost import PRE_LOAD, bank_offsets, is_runnable_here, load_host_object

    if not is_runnable_here():
        pytest.skip(".nv.host is x86-64 code")
    m = module("sm_90")
    host = load_host_object(diffcheck.host_object_for(m, "sm_90"))
    assert host.workspace_bytes == 3 * WORKSPACE_SMS * WORKSPACE_SM_BYTES == 0x540000
    pre_load = PRE_LOAD(host._engine.get_function_address("__CUDA_TILEIR_ON_PRE_LOAD"))
    query = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int))(
        lambda handle, attribute, out: out.__setitem__(0, 132) or 0)
    table = (ctypes.c_void_p * 8)()
    table[6] = ctypes.cast(query, ctypes.c_void_p)
    for version, workspace in ((1, 132 * 3 * WORKSPACE_SM_BYTES), (2, 0)):
        out = ctypes.c_void_p()
        assert pre_load(ctypes.addressof(table), None, version, ctypes.byref(out)) == 0
        assert (ctypes.c_uint64 * 9).from_address(out.value)[2] == workspace
    name = m.functions[0].name
    params = load_program(our_ptx(), name).function.params
    (hidden,) = [p for p in params if p.hidden]
    offsets, size = bank_offsets(params, "sm_90")
    bank = np.zeros(size, np.uint8)
    host.on_arguments_change(name, bank, workspace=0x7A5000)
    at = offsets[hidden.name]
    assert int(bank[at:at + 8].view(np.uint64)[0]) == 0x7A5000
    assert not bank[:at].any() and not bank[at + 8:].any()


def test_nvidia_puts_its_workspace_pointer_where_ours_is(real_tileiras, tmp_path):
    """The same hidden parameter at the same offset, the same per-CTA memory and workspace,
    and NVIDIA's PTX runs under the emulator's proxy-order check."""
    import subprocess

    from tileiras.emulate.launch import load_program
    from tileiras.emulate.nvhost import bank_offsets

    src, out = tmp_path / "g.tileir", tmp_path / "g.cubin"
    src.write_bytes(_modules.get("sm_90") or export(GROUPED_MATMUL_WIDE, "sm_90"))
    subprocess.run([real_tileiras, "--gpu-name", "sm_90", "--lineinfo", "-o", str(out), str(src)], check=True)
    theirs = diffcheck.ThirdOpinion.read(str(out))
    name = module("sm_90").functions[0].name
    from tileiras.emulate.nvhost import load_host_object

    assert load_host_object(theirs.host_object).workspace_bytes == 0x540000
    where = []
    for ptx in (theirs.ptx, our_ptx()):
        assert ".minperctamemory 384" in ptx
        params = load_program(ptx, name).function.params
        (hidden,) = [p for p in params if p.hidden]
        where.append((hidden.name, hidden.type_name, bank_offsets(params, "sm_90")[0][hidden.name]))
    assert where[0] == where[1]
    reports = diffcheck.check_module(module("sm_90"), "sm_90", grid=(2, 2, 3), extent=40, nvidia=theirs)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_maps_built_beside_hidden_ones():
    """A's and C's maps built on the device, B's a hidden parameter the host callback fills:
    the workspace pointer comes after B's map, and the callback fills both."""
    from kernels.lists import GROUPED_A_MATMUL

    m = read_bytecode(export(GROUPED_A_MATMUL, "sm_90"))
    (tas,) = run_stages(m, CompileOptions(gpu_name="sm_90"), "tileas").tas.values()
    (ring,) = tas.pipelines.values()
    assert isinstance(ring, RingPlan) and ring.device_maps == (0,) and ring.maps == (-1, 0)
    assert len(tas.tensor_maps) == 1 and len(tas.device_maps) == 2        # B's; A's and C's
    ptx = diffcheck.compile_ptx(m, "sm_90")
    name = m.functions[0].name
    n = len(m.functions[0].entry_block.args)
    assert f"{name}_param_{n}[128]" in ptx and f".u64 .ptr .global .align 1 {name}_param_{n + 1}" in ptx
    reports = diffcheck.check_module(m, "sm_90", grid=(2, 2, 3), extent=100)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def _persistent(arch: str):
    from kernels.lists import PERSISTENT_GROUPED_MATMUL

    m = read_bytecode(export(PERSISTENT_GROUPED_MATMUL, arch))
    (tas,) = run_stages(m, CompileOptions(gpu_name=arch), "tileas").tas.values()
    return m, tas


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
def test_a_persistent_grouped_gemm_builds_each_groups_maps_once_before_its_tiles(arch):
    """TileGym's form: per group, a loop over tiles around the K loop, the group's views made
    before it.  Its K loops are TMA rings (persistent: the loop over tiles runs them again),
    whose maps are built before the loop over tiles, not per tile, as NVIDIA's tool does."""
    from tileiras.emulate import launch
    from tileiras.lower.tma import enclosing_loop
    from tileiras.tile import ops_control as CF

    m, tas = _persistent(arch)
    rings = list(tas.pipelines.values())
    assert len(rings) == 3 and all(isinstance(r, RingPlan) for r in rings), rings
    for ring in rings:
        assert ring.persistent and ring.device_maps == (0, 1) and ring.maps == (-1, -1)
        assert isinstance(ring.maps_at, CF.LoopOp) and ring.maps_at is enclosing_loop(ring.loop)
        # the persistent ring's mbarriers lie outside the scratch; the maps follow its stages
        assert ring.map_staging == -(-ring.ring_bytes // 128) * 128
        assert tas.scratch[ring.mma] >= ring.map_staging + 2 * 128
    # each group's C goes out by a TMA store through a map built before its loop over tiles
    # too; one token orders the 3 stores one after another (cuTile threads it through the
    # groups' loops), so each waits for the copies before it and all share one staging
    stores = [(op, plan) for op, plan in tas.tma.items() if plan.is_store]
    assert len(stores) == 3 and len({plan.buffer for _, plan in stores}) == 1
    for (op, plan), ring in zip(stores, rings):
        assert plan.carried and plan.device_map is not None and plan.maps_at is ring.maps_at
    firsts = tma.stores_after(stores[0][0], tma.users_map(tas.aa))
    assert firsts == {op for op, _ in stores}       # itself (next tile) and the later groups'
    assert len(tas.device_maps) == 9 and tas.tensor_maps == ()
    text = format_tileas(tas)
    assert text.count("maps_at = @") == 6 and format_tileas(parse_tileas(text, tas.aa)) == text

    fn = m.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 100, diffcheck.BUDGET)
    assert [a.shape for a in args[0].arrays] == [(112, 112), (128, 128), (144, 144)]
    expected = diffcheck.run_interpreter(m, fn.name, (2, 1, 1), args)
    ptx, host = diffcheck.compile_with_host(m, arch)
    copies = diffcheck.copy_arguments(args)
    result = launch(ptx, fn.name, (2, 1, 1), copies, host_object=host)
    assert result.trap is None, result.trap
    problem = diffcheck.compare(expected, diffcheck.Outcome(diffcheck.arrays_of(copies), False, result.output))
    assert problem is None, problem
    counts = result.instruction_counts
    built = sum(n for k, n in counts.items() if k.startswith("tensormap.cp_fenceproxy"))
    boxes = sum(n for k, n in counts.items() if k.startswith("cp.async.bulk.tensor"))
    # each CTA (2) builds each group's 3 maps once, a warp at a time, though it takes 2-5
    # tiles of each group; every K step's operands come by TMA boxes, none by cp.async,
    # and every tile goes out by one bulk store (17 tiles)
    assert built == 2 * 9 * 32, built
    assert boxes > 2 * built // 32 and not any(k.startswith("cp.async.cg") for k in counts)
    assert sum(n for k, n in counts.items() if k.startswith("cp.async.bulk.tensor.2d.global")) == 17
    assert not any(k.startswith("st.global") for k in counts)


def test_a_store_that_does_not_wait_for_the_one_before_is_caught(monkeypatch):
    """The 3 groups' epilogues share one staging buffer: each store waits for the bulk copies
    before it (``TmaPlan.carried``).  Without that wait the next tile's ``stmatrix``
    overwrites the staging while the last bulk store still reads it, and the emulator says so."""
    from kernels.lists import PERSISTENT_GROUPED_MATMUL

    from tileiras.codegen import emit_tma

    m = read_bytecode(export(PERSISTENT_GROUPED_MATMUL, "sm_90"))
    monkeypatch.setattr(emit_tma.X, "bulk_wait_group", lambda b, keep: None)
    (report,) = diffcheck.check_module(m, "sm_90", grid=(2, 1, 1), extent=100)
    assert report.problem is not None and "still being read by the asynchronous" in report.problem, report.problem


def test_groups_whose_epilogues_share_one_staging_keep_their_tma_rings():
    """Eight groups of 128x128x64 tiles (bench/gpu.py's persistent grouped GEMM): the eight
    epilogues' TMA stores share one 32 KB staging buffer, so a ring has the rest of shared
    memory for its stages.  Counted once per store (256 KB) that left no room for two
    stages and every K loop fell back to cp.async, at 255 registers and spills."""
    import cuda.tile as ct
    from kernels._case import KernelCase
    from kernels.lists import ALIGNED, array_list, persistent_grouped_matmul

    case = KernelCase("persistent_grouped_matmul_8", persistent_grouped_matmul,
                      [[array_list(ct.float16, 2, **ALIGNED), array_list(ct.float16, 2, **ALIGNED),
                        array_list(ct.float16, 2, **ALIGNED), 128, 128, 64, 2, 8]])
    m = read_bytecode(export(case, "sm_90"))
    (tas,) = run_stages(m, CompileOptions(gpu_name="sm_90"), "tileas").tas.values()
    stores = [plan for plan in tas.tma.values() if plan.is_store]
    assert len(stores) == 8 and len({plan.buffer for plan in stores}) == 1
    rings = list(tas.pipelines.values())
    assert len(rings) == 8 and all(isinstance(r, RingPlan) for r in rings), rings
    assert all(r.stages >= 4 for r in rings)
    assert tas.smem_bytes <= 227 * 1024
