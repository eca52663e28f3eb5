"""The compile server behind ``tileiras.launch`` (see there for why and the protocol).

    python -m tileiras.server SOCKET_PATH     (started by tileiras itself)
    python -m tileiras.server --stop          stop every server of this user

Started detached by the first ``tileiras`` command that finds none.  It takes a lock so
only one server serves a socket, imports every compiler stage and initializes LLVM's
targets, then keeps one forked child waiting for the next connection (a new one is forked
as soon as it takes one); the parent itself never compiles, so each command starts from
the same freshly imported state.  It exits after
``TILEIRAS_SERVER_IDLE`` seconds (default 600) without a connection, within seconds of
its socket file being removed or its source files edited, and it only answers its own user.
"""
from __future__ import annotations

import fcntl
import io
import marshal
import os
import select
import signal
import socket
import struct
import sys

from .knobs import knobs
from .launch import _INT, _LEN, HELLO, _recv_exact, package_stamp, socket_dir, socket_path

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def preload() -> None:
    """Import everything a compile touches and set up LLVM, so children start warm.

    Nothing here may read the environment in a way that sticks (tool paths, knobs):
    children take over their client's environment after the fork."""
    import difflib  # noqa: F401  (option suggestions)
    import hashlib  # noqa: F401  (line-info file names)

    import click  # noqa: F401  (command lines that are not plainly spelled)
    import llvmlite.binding  # noqa: F401
    import llvmlite.ir  # noqa: F401

    from . import driver, pipeline, remarks, tilelib  # noqa: F401
    from .codegen import abi, emit_arith, emit_control, emit_memory, emit_mma, emit_multimem, emit_shape  # noqa: F401
    from .codegen import backend, host, nvvm, ptx, ptxas  # noqa: F401
    from .codegen.libdevice import load as load_libdevice; load_libdevice()  # noqa: E702
    from .codegen.llvm_targets import init_llvm
    from .lower import tileaa, tileas  # noqa: F401
    from .reader import read_bytecode  # noqa: F401
    from .text import printer  # noqa: F401
    from .verify import check_module  # noqa: F401

    init_llvm()


def _make_private_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private folder of this user")


def _bind(path: str) -> socket.socket:
    """Listen on ``path``, replacing a stale socket file (its server is gone)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except FileNotFoundError:
        pass
    except ConnectionRefusedError:
        os.unlink(path)
    else:
        raise FileExistsError(f"a server already listens on {path}")
    finally:
        probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def serve(path: str) -> int:
    stamp = package_stamp()
    if socket_path(stamp) != path:  # the code changed between the client's look and now
        return 0
    _make_private_dir(socket_dir())
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server is starting or running
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # who to signal to stop it
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # cleans up below
    try:
        sock = _bind(path)
    except OSError:
        return 0
    inode = os.stat(path).st_ino
    spare = 0
    try:
        preload()
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        idle = knobs.server_idle
        hello = HELLO + stamp.encode()
        # One forked "spare" child always waits in accept(), so a command finds a process
        # ready instead of waiting for a fork; it reports taking a connection on ``ready``.
        ready_r, ready_w = os.pipe()
        waited = 0.0
        while _still_ours(path, inode) and package_stamp() == stamp:  # else: its code was edited
            if not spare:
                spare = _fork_spare(sock, hello, ready_w, (lock, ready_r))
            step = min(idle - waited, 10.0)
            if select.select([ready_r], [], [], max(step, 0.0))[0]:
                os.read(ready_r, 1)
                spare, waited = 0, 0.0
                continue
            waited += step
            if waited >= idle:
                break
    finally:
        if spare:
            os.kill(spare, signal.SIGTERM)
        if _still_ours(path, inode):
            os.unlink(path)
        sock.close()
    return 0


def _fork_spare(sock: socket.socket, hello: bytes, ready: int, parent_fds: tuple[int, ...]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the spare: never returns
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in parent_fds:
            os.close(fd)
        conn, _ = sock.accept()
        os.write(ready, b".")
        os.close(ready)
        sock.close()
        uid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[1]
        if uid == os.getuid():
            _serve_one(conn, hello)
    finally:
        os._exit(0)


def _serve_one(conn: socket.socket, hello: bytes) -> None:
    """In the forked child: become the client's process, run its command, report the code."""
    code = 5
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # ptxas and the LLVM child are waited for
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        conn.setblocking(True)
        conn.sendall(_LEN.pack(len(hello)) + hello)
        request, fds = _recv_request(conn)
        argv, cwd, env, umask = marshal.loads(request)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(cwd)
        os.umask(umask)
        os.environ.clear()
        os.environ.update(env)
        _reopen_std_streams()
        sys.argv = list(argv)
        conn.sendall(_INT.pack(os.getpid()))
        from .driver import main

        try:
            code = main(list(argv[1:]))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except KeyboardInterrupt:
            code = 130
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
        conn.sendall(_INT.pack(code))
    finally:
        os._exit(0)


def _recv_request(conn: socket.socket) -> tuple[bytes, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    if len(fds) != 3 or len(data) < _LEN.size:
        raise ConnectionError("malformed request")
    size = _LEN.unpack(data[:_LEN.size])[0]
    body = data[_LEN.size:]
    if len(body) < size:
        body += _recv_exact(conn, size - len(body))
    return body, fds


def _reopen_std_streams() -> None:
    """Text streams over the client's descriptors, buffered as Python buffers them for a
    process that starts with these descriptors (line-buffered on a terminal)."""
    encoding = sys.stdout.encoding if sys.stdout else "utf-8"
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                                 encoding=encoding)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                                   encoding=encoding, line_buffering=os.isatty(1))
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                                   encoding=encoding, errors="backslashreplace",
                                                   line_buffering=True)


def stop_all() -> int:
    """Stop every compile server of this user (``python -m tileiras.server --stop``);
    returns how many were signalled."""
    stopped = 0
    try:
        locks = sorted(name for name in os.listdir(socket_dir()) if name.endswith(".lock"))
    except FileNotFoundError:
        return 0
    for name in locks:
        path = os.path.join(socket_dir(), name)
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live server, whose pid the file names
            text = os.read(fd, 64).decode().strip()
            if text.isdigit():
                try:
                    os.kill(int(text), signal.SIGTERM)
                    stopped += 1
                except ProcessLookupError:
                    pass
        else:  # nobody holds it: a leftover of a server that is gone
            os.unlink(path)
        finally:
            os.close(fd)
    return stopped


def main() -> int:
    if sys.argv[1:] == ["--stop"]:
        print(f"stopped {stop_all()} tileiras compile server(s)")
        return 0
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.stderr.write("usage: python -m tileiras.server SOCKET_PATH | --stop\n")
        return 2
    return serve(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
