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
from typing import Optional

import pytest

from tileiras import launch

REPO = Path(__file__).resolve().parent.parent
VADD = REPO / "examples" / "vadd.tileir"
CLIENT = [sys.executable, "-c", "import sys; from tileiras.launch import main; sys.exit(main())"]

#: every test here starts, uses or stops the user's compile servers, which all the suite's
#: workers share: they run in one worker, one after another (``--dist loadgroup``)
pytestmark = [pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "getuid"),
                                 reason="the server needs fork and Unix sockets"),
              pytest.mark.xdist_group("compile-server")]


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


def test_stamp_follows_every_source_files_contents(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    monkeypatch.setattr(launch, "__file__", str(pkg / "launch.py"))
    before = launch.package_stamp()
    assert launch.package_stamp() == before
    st = (pkg / "sub" / "b.py").stat()
    (pkg / "sub" / "b.py").write_text("y = 3\n")  # same size, same time: still another stamp
    os.utime(pkg / "sub" / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert launch.package_stamp() != before
    identity = launch.process_identity()
    assert launch.socket_path(launch.package_stamp(), identity) != launch.socket_path(before, identity)


def fake_server(path: str, answer: bytes, uid: int | None = None):
    """A process listening on ``path`` (as ``uid`` when given) that sends ``answer`` to the
    first client and records what it receives; returns (pid, file it records to)."""
    record = path + ".received"
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            import socket

            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            os.chmod(path, 0o777)
            with open(record, "wb", buffering=0) as out:
                if uid is not None:  # before listen(): SO_PEERCRED reports who listened
                    os.setgid(uid)
                    os.setgroups([])
                    os.setuid(uid)
                listener.listen(1)
                os.write(ready_w, b".")
                conn, _ = listener.accept()
                conn.sendall(answer)
                conn.settimeout(5)
                while chunk := conn.recv(1 << 16):
                    out.write(chunk)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)
    os.close(ready_r)
    return pid, Path(record)


def our_socket(env) -> Path:
    """The socket a client with ``env`` would use (its folder created private)."""
    code = ("from tileiras import launch; print(launch.socket_path(launch.package_stamp(), "
            "launch.process_identity()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def test_a_different_server_on_the_socket_is_not_used(server_env, tmp_path):
    """The hello carries the server's stamp and identity; a client expecting others compiles
    in-process, and sends the impostor nothing."""
    sock = our_socket(server_env)
    sock.parent.mkdir(mode=0o700)
    pid, received = fake_server(str(sock), launch.hello_message("other code", ()))
    r = client(dict(server_env, TILEIRAS_DEBUG="1"), VADD, "--gpu-name=sm_90", "-o", tmp_path / "v.cubin")
    os.waitpid(pid, 0)
    assert r.returncode == 0 and (tmp_path / "v.cubin").read_bytes()[:4] == b"\x7fELF"
    assert b"compiling in-process: the server runs other code" in r.stderr
    assert received.read_bytes() == b""


@pytest.mark.skipif(os.geteuid() != 0, reason="listening as another user needs root")
def test_a_server_of_another_user_is_never_trusted(server_env, tmp_path):
    """SO_PEERCRED: a socket in our private folder, answered by another uid with a perfect
    hello, gets nothing from us; the command compiles in-process."""
    sock = our_socket(server_env)
    sock.parent.mkdir(mode=0o700)
    stamp = subprocess.run([sys.executable, "-c", "from tileiras import launch; import sys; "
                            "sys.stdout.buffer.write(launch.hello_message(launch.package_stamp(), "
                            "launch.process_identity()))"], env=server_env, capture_output=True, check=True).stdout
    pid, received = fake_server(str(sock), stamp, uid=65534)
    r = client(dict(server_env, TILEIRAS_DEBUG="1"), VADD, "--gpu-name=sm_90", "-o", tmp_path / "v.cubin")
    os.waitpid(pid, 0)
    assert r.returncode == 0 and (tmp_path / "v.cubin").read_bytes()[:4] == b"\x7fELF"
    assert b"belongs to another user" in r.stderr
    assert received.read_bytes() == b""


@pytest.mark.parametrize("owner_other, mode", [(False, 0o777), (False, 0o750), (True, 0o700)])
def test_an_untrusted_socket_folder_is_never_connected_to(server_env, tmp_path, owner_other, mode):
    if owner_other and os.geteuid() != 0:
        pytest.skip("a folder of another user needs root to make")
    sock = our_socket(server_env)
    sock.parent.mkdir()
    os.chmod(sock.parent, mode)
    if owner_other:
        os.chown(sock.parent, 65534, 65534)
    pid, received = fake_server(str(sock), b"")
    try:
        r = client(dict(server_env, TILEIRAS_DEBUG="1"), VADD, "--gpu-name=sm_90", "-o", tmp_path / "v.cubin")
        assert r.returncode == 0 and (tmp_path / "v.cubin").read_bytes()[:4] == b"\x7fELF"
        assert b"is not a private folder of this user" in r.stderr
        assert not received.stat().st_size
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    time.sleep(0.3)
    assert [p.name for p in sock.parent.iterdir() if p.suffix == ".lock"] == []  # no server started there


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


# --------------------------------------------------------------------------- signals

def slow_ptxas(tmp_path: Path, seconds: float) -> tuple[dict, Path]:
    """A ptxas wrapper that records its pid, sleeps, then runs the real ptxas; plus a
    private temporary folder.  Returns (environment additions, the pid file)."""
    from tileiras.tools import find_ptxas

    real = find_ptxas()
    if real is None:
        pytest.skip("ptxas is not installed")
    folder = tmp_path / "slow"
    (folder / "tmp").mkdir(parents=True)
    script = folder / "ptxas"
    script.write_text(f"#!/bin/sh\ncase \"$1\" in --version) exec {real} --version;; esac\n"
                      f"echo $$ > {folder}/pid\nsleep {seconds}\nexec {real} \"$@\"\n")
    script.chmod(0o755)
    return {"TILEIRAS_PTXAS": str(script), "TMPDIR": str(folder / "tmp")}, folder / "pid"


def as_a_shell_starts_it() -> None:
    """A foreground command starts with SIGINT at its default; a test runner's worker may
    ignore it (xdist's do at times), and an ignored signal stays ignored across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_client(env, cwd, *args) -> subprocess.Popen:
    return subprocess.Popen([CLIENT[0], "-X", "importtime", *CLIENT[1:], *map(str, args)], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_a_shell_starts_it)


def wait_for_file(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def process_state(pid: int) -> Optional[tuple[str, int]]:
    """(state letter, parent pid) of a process, from /proc; None when there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def process_gone(pid: int, timeout: float = 15.0) -> bool:
    """Has ``pid`` ended?  A zombie has: it was killed, and only waits for its parent (an
    orphan's is the container's init, which may reap late) to collect its status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = process_state(pid)
        if state is None or state[0] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def check_was_served(proc: subprocess.Popen, served: bool) -> None:
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.read().decode().splitlines()
                if line.startswith("import time:")}
    assert ("tileiras.driver" not in imported) == served


@pytest.mark.parametrize("mode", ["served", "in-process"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_ends_a_command_as_in_process(warm, tmp_path, mode, signum):
    """The command dies by the signal; ptxas (and what its wrapper started) is gone, its
    temporary folder removed, and no output written."""
    extra, pid_file = slow_ptxas(tmp_path, 30)
    env = dict(warm, **extra, TILEIRAS_SERVER="1" if mode == "served" else "0")
    proc = start_client(env, tmp_path, VADD, "--gpu-name=sm_90", "-o", "out.cubin")
    wait_for_file(pid_file)
    proc.send_signal(signum)
    assert proc.wait(timeout=30) == -signum
    check_was_served(proc, mode == "served")
    pid = int(pid_file.read_text())
    assert process_gone(pid), f"ptxas (pid {pid}) still there: (state, parent) = {process_state(pid)}"
    assert not (tmp_path / "out.cubin").exists()
    assert list((tmp_path / "slow" / "tmp").iterdir()) == []


@pytest.mark.parametrize("mode", ["served", "in-process"])
def test_nohup_protects_a_command(warm, tmp_path, mode):
    extra, pid_file = slow_ptxas(tmp_path, 1)
    env = dict(warm, **extra, TILEIRAS_SERVER="1" if mode == "served" else "0")
    argv = [CLIENT[0], "-X", "importtime", *CLIENT[1:], str(VADD), "--gpu-name=sm_90", "-o", "out.cubin"]
    def as_nohup_starts_it() -> None:  # what nohup(1) does before exec: SIGHUP ignored
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=as_nohup_starts_it)
    wait_for_file(pid_file)
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=60) == 0
    check_was_served(proc, mode == "served")
    assert (tmp_path / "out.cubin").read_bytes()[:4] == b"\x7fELF"


def test_a_killed_client_gets_no_output_and_its_compile_stops(warm, tmp_path):
    extra, pid_file = slow_ptxas(tmp_path, 4)
    env = dict(warm, **extra)
    proc = start_client(env, tmp_path, VADD, "--gpu-name=sm_90", "-o", "out.cubin")
    wait_for_file(pid_file)
    time.sleep(0.4)
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert process_gone(int(pid_file.read_text()), timeout=2.0)  # the served child killed ptxas at once
    time.sleep(3)  # past the time ptxas would have taken
    assert not (tmp_path / "out.cubin").exists()
    assert list((tmp_path / "slow" / "tmp").iterdir()) == []


def test_a_served_compile_sees_only_the_variables_a_compile_reads(warm, tmp_path):
    """ptxas runs with the server's environment plus the documented knobs, never the
    client's other variables (tokens and the like)."""
    extra, pid_file = slow_ptxas(tmp_path, 0)
    script = Path(extra["TILEIRAS_PTXAS"])
    script.write_text(script.read_text().replace("sleep 0", f"env > {tmp_path}/env.txt"))
    env = dict(warm, **extra, SOME_SECRET_TOKEN="hunter2")
    proc = start_client(env, tmp_path, VADD, "--gpu-name=sm_90", "-o", "out.cubin")
    assert proc.wait(timeout=60) == 0
    check_was_served(proc, True)
    seen = (tmp_path / "env.txt").read_text()
    assert "SOME_SECRET_TOKEN" not in seen and f"TILEIRAS_PTXAS={script}" in seen


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_compile_in_another_mount_namespace_uses_its_files(warm, tmp_path):
    """With a tmpfs over the working folder, the command reads and writes the namespace's
    files, not the host's (where a warm server runs)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "v.tileir").write_bytes(b"not the file the command should read")
    client_cmd = " ".join(map(shlex_quote, CLIENT))
    script = (f"mount -t tmpfs tmpfs {work} && cp {VADD} {work}/v.tileir && cd {work} && "
              f"{client_cmd} v.tileir --gpu-name=sm_90 -o out.cubin && head -c 4 out.cubin | od -c | head -1")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=warm,
                       capture_output=True, timeout=120)
    refused = (b"not permitted", b"permission denied", b"operation not supported")
    if r.returncode != 0 and any(word in r.stderr.lower() for word in refused):
        pytest.skip(f"no private mount namespace here: {r.stderr.decode(errors='replace').strip()}")
    assert r.returncode == 0, r.stderr
    assert b"E   L   F" in r.stdout
    assert sorted(p.name for p in work.iterdir()) == ["v.tileir"]  # the host's folder is untouched


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(str(text))
