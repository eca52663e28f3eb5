"""The compile server (tileiras.launch / tileiras.server): a served command must be
indistinguishable from an in-process one (bytes written, stdout, stderr, exit code,
working folder, umask, stdin), and the server must start, serve, refuse stale code and
idle out on its own."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tileiras import launch

REPO = Path(__file__).resolve().parent.parent
VADD = REPO / "examples" / "vadd.tileir"
CLIENT = [sys.executable, "-c", "import sys; from tileiras.launch import main; sys.exit(main())"]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "getuid"),
                                reason="the server needs fork and Unix sockets")


@pytest.fixture
def server_env():
    """An environment whose server lives in a private runtime folder; stopped afterwards."""
    runtime = tempfile.mkdtemp(prefix="tis", dir="/tmp")  # short: socket paths max ~107 bytes
    env = dict(os.environ, TILEIRAS_SERVER="1", TILEIRAS_SERVER_IDLE="30", XDG_RUNTIME_DIR=runtime,
               PYTHONPATH=str(REPO))
    yield env
    folder = Path(runtime) / f"tileiras-{os.getuid()}"
    for lock in folder.glob("*.lock"):
        text = lock.read_text().strip()
        if text:
            stop_process(int(text))
    shutil.rmtree(runtime, ignore_errors=True)


def stop_process(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.02)
    except ProcessLookupError:
        pass


def client(env, *args, cwd=None, stdin=None, importtime=False):
    argv = [*CLIENT[:1], *(["-X", "importtime"] if importtime else []), *CLIENT[1:], *map(str, args)]
    return subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, timeout=120)


def wait_for_server(env) -> Path:
    stamp_env = {k: env[k] for k in ("XDG_RUNTIME_DIR",)}
    folder = Path(stamp_env["XDG_RUNTIME_DIR"]) / f"tileiras-{os.getuid()}"
    for _ in range(300):
        socks = list(folder.glob("*.sock"))
        if socks:
            return socks[0]
        time.sleep(0.05)
    raise AssertionError("no server socket appeared")


def served(env, *args, **kw) -> subprocess.CompletedProcess:
    """Run through a warm server; assert it really was served (the client imported no driver)."""
    r = client(env, *args, importtime=True, **kw)
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.decode().splitlines()
                if line.startswith("import time:")}
    assert "tileiras.launch" in imported and "tileiras.driver" not in imported
    r.stderr = b"".join(line + b"\n" for line in r.stderr.splitlines() if not line.startswith(b"import time:"))
    return r


@pytest.fixture
def warm(server_env):
    """A started server: the first command runs cold and starts it."""
    first = client(server_env, VADD, "--gpu-name=sm_90", "--emit=ptx")
    assert first.returncode == 0, first.stderr
    wait_for_server(server_env)
    # The socket is bound before preloading and a client waits 5 s for its hello; on a
    # loaded machine preloading can take longer, so wait until a command is really served.
    for _ in range(60):
        r = client(server_env, "--version", importtime=True)
        if b"tileiras.driver" not in r.stderr:
            return server_env
        time.sleep(0.5)
    raise AssertionError("the server never answered")


@pytest.mark.parametrize("flags", [(), ("--lineinfo",), ("-g", "-O0")])
def test_served_cubin_is_byte_identical(warm, tmp_path, flags):
    cold_env = dict(warm, TILEIRAS_SERVER="0")
    assert client(cold_env, VADD, "--gpu-name=sm_90", *flags, "-o", tmp_path / "cold.cubin").returncode == 0
    r = served(warm, VADD, "--gpu-name=sm_90", *flags, "-o", "hot.cubin", cwd=tmp_path)  # relative to cwd
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert (tmp_path / "hot.cubin").read_bytes() == (tmp_path / "cold.cubin").read_bytes()


def test_served_errors_match_in_process(warm, tmp_path):
    bad = tmp_path / "bad.tileir"
    bad.write_bytes(VADD.read_bytes()[:40])
    cold_env = dict(warm, TILEIRAS_SERVER="0")
    for args in ([bad, "--gpu-name=sm_90"], [VADD, "--gpu-name=sm_1"], [VADD, "-O7", "--gpu-name=sm_90"],
                 [tmp_path / "missing.tileir"], ["-", "--gpu-name=sm_90"], ["--version"], []):
        cold = client(cold_env, *args, cwd=tmp_path)
        hot = served(warm, *args, cwd=tmp_path)
        assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr), args
        assert cold.returncode != 0 or args == ["--version"]
    assert not (tmp_path / "elf.o").exists()  # nothing written on failure


def test_served_stdout(warm):
    ptx = served(warm, VADD, "--gpu-name=sm_80", "--emit=ptx")
    assert ptx.returncode == 0 and ptx.stdout.startswith(b"//") and b".entry" in ptx.stdout
    cubin = served(warm, VADD, "--gpu-name=sm_80", "-o", "-")
    assert cubin.returncode == 0 and cubin.stdout[:4] == b"\x7fELF"


def test_served_output_respects_client_umask(warm, tmp_path):
    script = ("import os, sys; os.umask(0o077); from tileiras.launch import main; "
              "sys.exit(main())")
    r = subprocess.run([sys.executable, "-c", script, str(VADD), "--gpu-name=sm_90", "-o", "u.cubin"],
                       env=warm, cwd=tmp_path, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "u.cubin").stat().st_mode & 0o777 == 0o600


def test_concurrent_clients_get_identical_output(warm, tmp_path):
    procs = [subprocess.Popen([*CLIENT, str(VADD), "--gpu-name=sm_100", "-o", f"o{i}.cubin"], env=warm,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    outputs = {(tmp_path / f"o{i}.cubin").read_bytes() for i in range(4)}
    assert len(outputs) == 1


def test_server_idles_out_and_removes_its_socket(server_env):
    env = dict(server_env, TILEIRAS_SERVER_IDLE="1")
    assert client(env, "--version").returncode == 0
    sock = wait_for_server(env)
    for _ in range(200):
        if not sock.exists():
            break
        time.sleep(0.05)
    assert not sock.exists()
    # and the next command simply runs in-process again
    r = client(env, "--version")
    assert r.returncode == 0 and r.stdout.startswith(b"tileiras: NVIDIA")


def test_stop_stops_every_server(warm):
    sock = wait_for_server(warm)
    r = subprocess.run([sys.executable, "-m", "tileiras.server", "--stop"], env=warm, capture_output=True,
                       timeout=60)
    assert (r.returncode, r.stdout) == (0, b"stopped 1 tileiras compile server(s)\n")
    for _ in range(200):
        if not sock.exists():
            break
        time.sleep(0.05)
    assert not sock.exists()


def test_disabled_server_starts_nothing(server_env):
    env = dict(server_env, TILEIRAS_SERVER="0")
    assert client(env, "--version").returncode == 0
    time.sleep(0.3)
    assert not list((Path(env["XDG_RUNTIME_DIR"])).glob("tileiras-*/*.sock"))


def test_stamp_follows_every_source_file(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    monkeypatch.setattr(launch, "__file__", str(pkg / "launch.py"))
    before = launch.package_stamp()
    assert launch.package_stamp() == before
    os.utime(pkg / "sub" / "b.py", ns=(1, 1))
    assert launch.package_stamp() != before
    assert launch.socket_path(launch.package_stamp()) != launch.socket_path(before)


def test_a_different_server_on_the_socket_is_not_used(tmp_path):
    """The hello carries the server's stamp; a client with another stamp falls back."""
    import socket

    path = tempfile.mktemp(prefix="tis", dir="/tmp")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    try:
        with pytest.raises(launch.ServerUnavailable):
            import threading

            def answer():
                conn, _ = listener.accept()
                hello = launch.HELLO + b"someone else"
                conn.sendall(launch._LEN.pack(len(hello)) + hello)
                conn.close()

            threading.Thread(target=answer, daemon=True).start()
            launch._connect(path, "our stamp")
    finally:
        listener.close()
        os.unlink(path)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the test's client needs python -P")
def test_a_tileiras_folder_where_the_command_runs_is_not_the_servers(server_env, tmp_path):
    """The server imports this package, not a ``tileiras`` folder in the client's cwd."""
    (tmp_path / "tileiras").mkdir()
    (tmp_path / "tileiras" / "__init__.py").write_text("raise ImportError('the wrong tileiras')\n")
    argv = [sys.executable, "-P", *CLIENT[1:], VADD, "--gpu-name=sm_90", "--emit=ptx"]
    first = subprocess.run(argv, env=server_env, cwd=tmp_path, capture_output=True, timeout=120)
    assert first.returncode == 0, first.stderr
    wait_for_server(server_env)
    for _ in range(60):
        r = subprocess.run([*argv[:2], "-X", "importtime", *argv[2:]], env=server_env, cwd=tmp_path,
                           capture_output=True, timeout=120)
        if r.returncode == 0 and b"tileiras.driver" not in r.stderr:
            return
        time.sleep(0.5)
    raise AssertionError("commands were never served")
