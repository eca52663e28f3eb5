"""``tileiras`` start-up: hand the command to a warm compile server, or run it here.

Python spends far longer importing a compiler (click, llvmlite and LLVM itself, the op
registry, every stage) than compiling a small kernel, and cuTile starts one ``tileiras``
process per kernel.  So, as Bazel and Gradle do, the first command starts a background
server that has imported everything once; each later command connects to it and the
server *forks* a child for it.  The child takes over the client's argument list, working
folder, environment, umask and its stdin/stdout/stderr file descriptors (passed over the
Unix socket), runs ``tileiras.driver.main`` and sends back the exit code.  Output, files,
messages and exit codes are exactly those of an in-process run, and no state survives
from one command to the next (each child starts from the server's freshly imported
state).

This module is the only code a served command runs in the client, so it imports nothing
beyond the standard library's socket basics.  Anything unusual (no ``fork``, a closed
standard stream, an unreachable or stale server, ``TILEIRAS_SERVER=0``) falls back to
compiling in-process, which behaves identically, just slower.

Protocol, per connection (one command):
  server -> client  ``HELLO`` + the server's key (the client checks it is its own code)
  client -> server  u32 length + marshal(argv, cwd, environ, umask), fds 0, 1, 2 attached
  server -> client  i32 pid of the child running the command (signals are forwarded to it)
  server -> client  i32 exit code
"""
from __future__ import annotations

import _socket  # the C module: ``socket`` would also import selectors, array and more
import marshal
import os
import struct
import sys
import zlib

from .knobs import knobs

HELLO = b"tileiras-server/1 "
HELLO_TIMEOUT = 5.0          # seconds to wait for a listening server to say hello
_INT = struct.Struct("!i")
_LEN = struct.Struct("!I")


class ServerUnavailable(Exception):
    """No usable server: compile in-process instead."""


def package_stamp() -> str:
    """Identifies the code a server would run: interpreter, package folder, every module's
    size and modification time.  Editing any source file makes a new stamp, so a server
    never runs stale code (the old one idles out)."""
    root = os.path.dirname(os.path.abspath(__file__))
    parts = [sys.executable, sys.version, root, os.environ.get("PYTHONPATH", "")]
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    parts.append(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def socket_dir() -> str:
    base = knobs.runtime_dir or knobs.tmpdir or "/tmp"
    return os.path.join(base, f"tileiras-{os.getuid()}")


def socket_path(stamp: str) -> str:
    return os.path.join(socket_dir(), f"server-{zlib.crc32(stamp.encode()):08x}.sock")


def _recv_exact(sock: _socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return data


def _connect(path: str, stamp: str) -> _socket.socket:
    """A connection to a warm server running our code, or ServerUnavailable."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(HELLO_TIMEOUT)
        sock.connect(path)
        expected = HELLO + stamp.encode()
        hello = _recv_exact(sock, _LEN.size)
        if _LEN.unpack(hello)[0] != len(expected) or _recv_exact(sock, len(expected)) != expected:
            raise ServerUnavailable("a different server answers on this socket")
        sock.settimeout(None)
        return sock
    except ServerUnavailable:
        sock.close()
        raise
    except Exception as exc:  # noqa: BLE001 - no server (or a broken one): compile in-process
        sock.close()
        raise ServerUnavailable(str(exc)) from None


def _std_fds_open() -> bool:
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def current_umask() -> int:
    """The process umask (reading it means setting it: put back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def run_on_server(argv: list[str], stamp: str) -> int:
    """The exit code of ``argv`` run by a forked child of the server."""
    if not (hasattr(os, "fork") and hasattr(_socket, "SCM_RIGHTS") and _std_fds_open()):
        raise ServerUnavailable("this platform or process cannot pass its standard streams")
    sock = _connect(socket_path(stamp), stamp)
    try:
        request = marshal.dumps((argv, os.getcwd(), dict(os.environ), current_umask()))
        try:
            fds = struct.pack("3i", 0, 1, 2)
            data = _LEN.pack(len(request)) + request
            sent = sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            if sent < len(data):
                sock.sendall(data[sent:])
            child = _INT.unpack(_recv_exact(sock, _INT.size))[0]
        except Exception as exc:  # noqa: BLE001 - nothing ran yet: compile in-process instead
            raise ServerUnavailable(str(exc)) from None
        # From here on the command is running: never fall back (it would run twice).
        _forward_signals(child)
        try:
            return _INT.unpack(_recv_exact(sock, _INT.size))[0]
        except Exception:  # noqa: BLE001 - one error line, never a traceback
            sys.stderr.write("error: internal error: the compile server's child exited without a status\n")
            return 5
    finally:
        sock.close()


def _forward_signals(child: int) -> None:
    import signal

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)


def start_server(stamp: str) -> None:
    """Start a detached server for ``stamp`` (it exits at once if another one is up)."""
    if not hasattr(os, "fork"):
        return
    path = socket_path(stamp)
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:  # first child: a new session, then a grandchild that nobody waits for
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 1 << 16)
        # ``-m`` puts the working folder first on the import path: run from the folder
        # holding this package, so a ``tileiras`` folder where the command ran is not the
        # one the server imports (its stamp would never match, and nothing be served).
        os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        os.execv(sys.executable, [sys.executable, "-m", "tileiras.server", path])
    finally:
        os._exit(127)


def main() -> int:
    """Console-script entry of ``tileiras``."""
    argv = list(sys.argv)
    stamp = None  # set when a server should be started for next time
    if knobs.server:
        try:
            stamp = package_stamp()
            return run_on_server(argv, stamp)
        except (ServerUnavailable, OSError):
            pass
    from .driver import main as driver_main

    code = driver_main(argv[1:])
    if stamp is not None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
        start_server(stamp)
    return code
