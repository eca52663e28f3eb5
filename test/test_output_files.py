"""Output files written as a compiler writes them (``tileiras.hostio``), and the failures a
user can meet on the way (a back end that cannot start, a full temporary folder)."""
from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tileiras import hostio
from tileiras.errors import CompileError

REPO = Path(__file__).resolve().parent.parent
VADD = REPO / "examples" / "vadd.tileir"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        hostio.write_local(str(tmp_path / "new.bin"), b"data")
    finally:
        os.umask(old)
    assert (tmp_path / "new.bin").read_bytes() == b"data"
    assert stat.S_IMODE((tmp_path / "new.bin").stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_an_existing_file_is_replaced_whole_keeping_its_mode(tmp_path):
    target = tmp_path / "out.cubin"
    target.write_bytes(b"old contents, longer than the new ones")
    target.chmod(0o604)
    inode = target.stat().st_ino
    hostio.write_local(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.stat().st_ino != inode  # renamed over: a reader of the old file never sees half
    assert leftovers(tmp_path) == []


def test_a_symlink_is_followed_and_kept(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.cubin"
    target.write_bytes(b"old")
    link = tmp_path / "link.cubin"
    link.symlink_to(target)
    hostio.write_local(str(link), b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new"
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "real") == []


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.cubin"
    link.symlink_to(tmp_path / "made.cubin")
    hostio.write_local(str(link), b"new")
    assert link.is_symlink() and (tmp_path / "made.cubin").read_bytes() == b"new"


def test_a_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    hostio.write_local(str(fifo), b"x" * 200_000)  # more than a pipe holds
    reader.join(timeout=30)
    assert got == [b"x" * 200_000]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_a_character_device_stays_a_device(tmp_path):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    except OSError:
        pytest.skip("cannot make device nodes here")
    hostio.write_local(str(node), b"data")
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    hostio.write_local("/dev/null", b"data")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_dev_stdout_writes_to_what_stdout_is(tmp_path):
    """``-o /dev/stdout`` with stdout redirected to a file: the shell's file gets the bytes."""
    code = "import sys; from tileiras import hostio; hostio.write_local('/dev/stdout', b'cubin bytes')"
    with open(tmp_path / "redirected", "wb") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, check=True)
    assert (tmp_path / "redirected").read_bytes() == b"cubin bytes"
    assert leftovers(tmp_path) == []
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert piped.stdout == b"cubin bytes"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_a_writable_file_in_a_read_only_folder_is_written_in_place(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "out.cubin").write_bytes(b"old")
    folder.chmod(0o555)
    try:
        hostio.write_local(str(folder / "out.cubin"), b"new")
        assert (folder / "out.cubin").read_bytes() == b"new"
        with pytest.raises(PermissionError):
            hostio.write_local(str(folder / "other.cubin"), b"new")
    finally:
        folder.chmod(0o755)


def test_failures_leave_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        hostio.write_local(str(tmp_path / "missing" / "out.cubin"), b"x")
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        hostio.write_local(str(tmp_path / "dir"), b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]
    assert list((tmp_path / "dir").iterdir()) == []


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.cubin"
    target.write_bytes(b"old")

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(hostio, "write_all", full)
    with pytest.raises(OSError) as err:
        hostio.write_local(str(target), b"new")
    assert err.value.errno == errno.ENOSPC
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_the_command_line_writes_through_a_symlink(tmp_path):
    """End to end, in-process: ``-o link`` keeps the link and fills its target."""
    (tmp_path / "target.cubin").write_bytes(b"")
    (tmp_path / "link.cubin").symlink_to("target.cubin")
    r = subprocess.run([sys.executable, "-m", "tileiras.driver", str(VADD), "--gpu-name=sm_80", "-o",
                        "link.cubin"], cwd=tmp_path, capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link.cubin").is_symlink()
    assert (tmp_path / "target.cubin").read_bytes()[:4] == b"\x7fELF"


# --------------------------------------------------------------------------- failures on the way

def test_a_back_end_that_cannot_start_is_one_error_line(monkeypatch):
    """LLVM failing to load in the back-end child (a memory limit, a broken install): a
    CompileError naming why, never a silent exit."""
    from tileiras.codegen import backend

    def cannot_load(requests, replies):
        raise MemoryError("no room for libLLVM")

    monkeypatch.setattr(backend, "_serve", cannot_load)
    with backend.Backend() as b:
        job = b.submit(len, "abc")
        with pytest.raises(CompileError) as err:
            b.result(job)
    assert str(err.value) == "error: the LLVM back end could not start: MemoryError: no room for libLLVM"


def test_a_full_temporary_folder_is_one_error_line_and_leaves_nothing(tmp_path, monkeypatch):
    from tileiras.codegen import ptxas

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(CompileError) as err:
        ptxas.invoke_ptxas(".version 8.0\n", "sm_90", ptxas="/bin/true")
    assert str(err.value) == f"error: cannot write ptxas's input files in '{tmp_path}': No space left on device"
    assert list(tmp_path.iterdir()) == []

    def no_folder(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkdtemp", no_folder)
    with pytest.raises(CompileError) as err:
        ptxas.invoke_ptxas(".version 8.0\n", "sm_90", ptxas="/bin/true")
    assert str(err.value) == f"error: cannot create a temporary folder in '{tmp_path}': No space left on device"
