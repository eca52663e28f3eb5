"""The GPU launcher and ``--device=gpu`` without a GPU: one-line errors when there is no
driver, one-line errors for unreadable files in every command, and the launch path run
against a fake driver that executes the example ``vadd`` from the parameter buffer it is
handed (so the pointers, offsets and copies the launcher produces are what a driver reads)."""
from __future__ import annotations

import ctypes
import sys
import types
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from tileiras import diffcheck, disasm, gpu, interp
from tileiras.gpu import device as gpu_device
from tileiras.interp import cli as run_cli
from tileiras.reader import read_bytecode

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vadd.tileir"
COMMANDS = {"tileiras-run": run_cli.main, "tileiras-diffcheck": diffcheck.main, "tileirdisasm": disasm.main}


@pytest.fixture(autouse=True)
def fresh_device_cache():
    gpu_device.open_device.cache_clear()
    yield
    gpu_device.open_device.cache_clear()


def error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("path", ["/nonexistent.tileir", "/"])
def test_unreadable_input_is_one_line(name, path, capsys):
    rc = COMMANDS[name]([path])
    lines = error_lines(capsys)
    assert rc != 0
    assert len(lines) == 1 and "unable to read input file" in lines[0] and "Traceback" not in lines[0], lines


def without_bindings(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails as if not installed


@pytest.mark.parametrize("argv", [["tileiras-run", str(EXAMPLE), "--device=gpu"],
                                  ["tileiras-diffcheck", str(EXAMPLE), "--device=gpu"]])
def test_no_cuda_driver_is_one_line(argv, monkeypatch, capsys):
    without_bindings(monkeypatch)
    assert COMMANDS[argv[0]](argv[1:]) == 1
    lines = error_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA driver"), lines


def test_no_libcuda_is_reported_with_its_reason(monkeypatch):
    fake = FakeDriver()
    fake.cuInit = lambda flags: (_ for _ in ()).throw(OSError("libcuda.so.1: cannot open shared object"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", types.SimpleNamespace(driver=fake))
    with pytest.raises(gpu.NoCudaDriver, match="^error: no CUDA driver: libcuda cannot be loaded .libcuda.so.1"):
        gpu_device.load_bindings()
    fake.cuInit = lambda flags: (100,)  # CUDA_ERROR_NO_DEVICE
    with pytest.raises(gpu.NoCudaDevice, match="found no CUDA device"):
        gpu_device.load_bindings()


def test_this_machine_reports_no_driver_in_one_line(capsys):
    if gpu.probe() is None:
        pytest.skip("a CUDA device is present")
    assert run_cli.main([str(EXAMPLE), "--device=gpu"]) == 1
    lines = error_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA driver"), lines


def test_runnable_archs():
    archs = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120"]
    assert gpu.runnable_archs((9, 0), archs) == ["sm_90"]
    assert gpu.runnable_archs((8, 6), archs) == ["sm_80", "sm_86"]
    assert gpu.runnable_archs((10, 3), archs) == ["sm_103"]
    assert gpu.runnable_archs((12, 0), archs) == ["sm_120"]


# --------------------------------------------------------------------------- a fake driver

class FakeDriver:
    """Just enough of ``cuda.bindings.driver``: device memory is a dict of byte arrays, and
    a launch of ``vadd`` reads its nine parameters through the ``kernelParams`` pointers."""

    CUresult = types.SimpleNamespace(CUDA_ERROR_NO_DEVICE=100)
    CUdevice_attribute = types.SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
                                               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor")
    CUfunction_attribute = types.SimpleNamespace(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="smem")
    CUlaunchAttributeID = types.SimpleNamespace(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION="cluster")
    ERRORS: ClassVar[dict] = {200: ("CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"), 710: ("CUDA_ERROR_ASSERT", "x"),
                              719: ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure")}

    def __init__(self, refuse_image: bool = False):
        self.memory: dict[int, bytearray] = {}
        self.launches: list = []
        self.refuse_image = refuse_image
        self.CUlaunchConfig = lambda: types.SimpleNamespace()
        self.CUstream = lambda handle: ("stream", handle)

    def cuInit(self, flags):
        return (0,)

    def cuGetErrorName(self, result):
        return 0, self.ERRORS[int(result)][0].encode()

    def cuGetErrorString(self, result):
        return 0, self.ERRORS[int(result)][1].encode()

    def cuDeviceGetCount(self):
        return 0, 1

    def cuDeviceGet(self, ordinal):
        return 0, ordinal

    def cuDevicePrimaryCtxRetain(self, dev):
        return 0, "context"

    def cuCtxSetCurrent(self, ctx):
        return (0,)

    def cuDeviceGetAttribute(self, attr, dev):
        return 0, {"major": 9, "minor": 0}[attr]

    def cuLibraryLoadData(self, cubin, *options):
        return (200, None) if self.refuse_image else (0, ("library", bytes(cubin[:4])))

    def cuLibraryGetKernel(self, library, name):
        return 0, name.decode()

    def cuKernelGetFunction(self, kernel):
        return 0, kernel

    def cuLibraryUnload(self, library):
        return (0,)

    def cuMemAlloc(self, nbytes):
        address = 0x1000 * (len(self.memory) + 1) << 20
        self.memory[address] = bytearray(nbytes)
        return 0, address

    def cuMemFree(self, ptr):
        del self.memory[ptr]
        return (0,)

    def cuMemcpyHtoD(self, ptr, host, nbytes):
        self.memory[ptr][:nbytes] = ctypes.string_at(host, nbytes)
        return (0,)

    def cuMemcpyDtoH(self, host, ptr, nbytes):
        ctypes.memmove(host, bytes(self.memory[ptr][:nbytes]), nbytes)
        return (0,)

    def cuCtxSynchronize(self):
        return (0,)

    def cuLaunchKernelEx(self, config, function, kernel_params, extra):
        """vadd(x, n, s, y, n, s, out, n, s): out = x + y, parameters read as a driver reads them."""
        pointers = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
        read = [ctypes.string_at(pointers[i], 8 if i % 3 == 0 else 4) for i in range(9)]
        x, y, out = (int.from_bytes(read[i], "little") for i in (0, 3, 6))
        n = int.from_bytes(read[1], "little")
        self.launches.append((function, config.gridDimX, config.blockDimX))
        a, b = (np.frombuffer(self.memory[p], np.float32)[:n] for p in (x, y))
        self.memory[out][:4 * n] = (a + b).tobytes()
        return (0,)


def fake_device(monkeypatch, driver: FakeDriver) -> gpu.Device:
    monkeypatch.setattr(gpu_device, "load_bindings", lambda: driver)
    return gpu.open_device()


def test_run_cubin_packs_what_the_driver_reads(monkeypatch):
    driver = FakeDriver()
    device = fake_device(monkeypatch, driver)
    module = read_bytecode(EXAMPLE.read_bytes())
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(3), extent=300)
    got = gpu.run_cubin(device, gpu.compile_cubin(module, "sm_90"), fn.name, gpu.signature_of(fn), (3, 1, 1), args)
    expected = diffcheck.run_interpreter(module, fn.name, (3, 1, 1), args)
    assert diffcheck.compare(expected, got) is None
    assert driver.launches == [(fn.name, 3, 1)]  # cuTile's convention: block 1x1x1
    assert driver.memory == {}  # every buffer freed
    assert not np.array_equal(got.arrays[2], args[6])  # the caller's arrays are untouched


def test_a_refused_cubin_names_the_error(monkeypatch):
    device = fake_device(monkeypatch, FakeDriver(refuse_image=True))
    with pytest.raises(gpu.CudaError) as err:
        device.load(b"junk", "vadd")
    assert str(err.value) == ("error: cuLibraryLoadData failed: CUDA_ERROR_INVALID_IMAGE "
                              "(device kernel image is invalid)")


def test_aliased_arrays_share_one_buffer():
    x = np.arange(4, dtype=np.float32)
    copies = gpu.copy_arguments([x, 4, x])
    assert copies[0] is copies[2] and copies[0] is not x


def test_device_image_of_nibbles_and_strided_views():
    import ml_dtypes

    f4 = np.arange(6, dtype=np.float32).astype(ml_dtypes.float4_e2m1fn)
    image = gpu.device_image(f4)
    assert image.dtype == np.uint8 and image.nbytes == 4  # 3 bytes rounded up to a word
    back = np.zeros_like(f4)
    gpu.restore(back, image)
    assert np.array_equal(back.astype(np.float32), f4.astype(np.float32))
    f = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert gpu.device_image(f) is f
    view = np.arange(12, dtype=np.float32)[::2]
    assert gpu.device_image(view).flags.c_contiguous and interp.cutile_args(view)[2] == 2


def test_the_gpu_tier_skips_cleanly_without_a_gpu():
    import subprocess

    if gpu.probe() is None:
        pytest.skip("a CUDA device is present: the tier runs")
    here = Path(__file__).resolve().parent
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-k", "gemm", "-p", "no:cacheprovider",
                          str(here / "test_gpu_tier.py")], capture_output=True, text=True, cwd=here.parent, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "skipped" in run.stdout and "passed" not in run.stdout and "error" not in run.stdout.lower()


def test_a_list_of_arrays_goes_up_as_its_members_and_their_table(monkeypatch):
    """The members are uploaded, then the table of their device addresses, shapes and strides
    (what the kernel's pointer parameter points at); the members come back as outputs."""
    from tileiras.interp import ArrayList

    driver = FakeDriver()
    device = fake_device(monkeypatch, driver)
    xs = ArrayList([np.arange(4, dtype=np.float32), np.arange(6, dtype=np.float32)])
    copies = gpu.copy_arguments([xs, 2])
    values, buffers = gpu.upload_arguments(device, ("ptr", "i32"), copies)
    table = np.frombuffer(bytes(driver.memory[values[0]]), np.int64).reshape(2, 3)
    members = [b[2] for b in buffers[:2]]
    np.testing.assert_array_equal(table, [[members[0], 4, 1], [members[1], 6, 1]])
    assert np.frombuffer(bytes(driver.memory[members[1]]), np.float32).tolist() == list(range(6))
    assert values[1] == 2 and copies[0].arrays[0] is not xs.arrays[0]


class TrappingDriver(FakeDriver):
    """Every kernel traps: the launch's synchronize fails with ``code`` (an ``__assertfail``
    gives 710; ``trap``, how Tile IR asserts end, 719)."""

    def __init__(self, code: int):
        super().__init__()
        self.code = code

    def cuCtxSynchronize(self):
        return (self.code,)


@pytest.mark.parametrize("code, name", [(710, "CUDA_ERROR_ASSERT"), (719, "CUDA_ERROR_LAUNCH_FAILED")])
def test_a_trap_is_an_outcome_and_loses_the_device(monkeypatch, code, name):
    """A trap fails the run (as the interpreter's assert does) but is sticky in the driver: the
    device is lost to the process, and the next use says so instead of a confusing error."""
    device = fake_device(monkeypatch, TrappingDriver(code))
    module = read_bytecode(EXAMPLE.read_bytes())
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(3), extent=300)
    cubin = gpu.compile_cubin(module, "sm_90")
    got = gpu.run_cubin(device, cubin, fn.name, gpu.signature_of(fn), (3, 1, 1), args)
    assert got.failed and device.lost == name
    with pytest.raises(gpu.ContextLost) as err:
        gpu.run_cubin(device, cubin, fn.name, gpu.signature_of(fn), (3, 1, 1), args)
    assert f"after {name}" in str(err.value) and "new process" in str(err.value)
