"""``tileiras`` start-up: hand the command to a warm compile server, or run it here.

Python spends far longer importing a compiler (click, llvmlite and LLVM itself, the op
registry, every stage) than compiling a small kernel, and cuTile starts one ``tileiras``
process per kernel.  So, as Bazel and Gradle do, the first command starts a background
server that has imported everything once; each later command connects to it and the
server forks a child that runs the command (``tileiras.server``).

The server is a pure function from bytes and options to bytes and messages.  This client
does every filesystem and process action itself: the served child asks it to read a file
(the input, ``-l`` libraries), to write one (``-o``, the remarks file) and to write to its
stdout or stderr, and the client does so in its own working folder, mount namespace,
credentials and umask (``hostio``).  The child learns the client's argument list and only
the environment variables a compile reads (``knobs`` marked SEND: TILEIRAS_DEBUG, PATH,
CUDA_HOME, CUDA_PATH and the temporary folder), and nothing of the client's files but what
it asks for.  So output, messages and exit codes are those of an in-process run, and no
state survives from one command to the next.

What the server could not reproduce is kept apart by the socket's name: it is derived from
the code (a hash of every source file's contents) and from the process's identity (user,
groups, capabilities, mount and user namespaces, root folder, nice value, resource limits,
cgroup, and the knobs marked MATCH), so a build sandbox, ``nice`` or ``ulimit`` gets a server
of its own, started from inside it.  The server repeats its identity in its hello, and the
client compares before it sends anything.

Trust, as tmux and ssh-agent do it: the socket folder must be this user's with mode 0700
(the server creates it so; otherwise the client never connects and compiles in-process,
saying why under TILEIRAS_DEBUG), and each end checks the other's uid with SO_PEERCRED.

Signals: SIGINT, SIGTERM and SIGHUP (unless ignored, as ``nohup`` and ``&`` leave them)
raise ``Interrupted``.  In-process, that unwinds the compile (ptxas killed, temporary folders
removed); served, the client sends ``cancel`` and waits for the child to do the same.  Then
the command dies by the same signal.  A client that disconnects (killed with SIGKILL)
cancels its compile too, and since only the client writes, nothing is written afterwards.

Protocol, per connection (one command), each message a u32 length + a marshalled tuple:
  server -> client  ``HELLO`` + (stamp, identity)
  client -> server  ("run", argv, environment, stream setup)
  server -> client  ("read", path) | ("write", path, bytes) | ("out", fd, bytes), each
                    answered by (errno, strerror, bytes); finally ("exit", code)
  client -> server  ("cancel", signum) at any time

This module is the only code a served command runs in the client, so it imports nothing
beyond the standard library's basics.  Anything unusual (no ``fork``, a closed standard
stream, an unreachable, untrusted or foreign server, ``TILEIRAS_SERVER=0``) compiles
in-process instead, which behaves identically, just slower.
"""
from __future__ import annotations

import _signal
import _socket  # the C module: ``socket`` would also import selectors, array and more
import marshal
import os
import stat
import struct
import sys
import zlib

from .knobs import MATCH, SEND, knobs

HELLO = b"tileiras-server/2 "
HELLO_TIMEOUT = 5.0          # seconds to wait for a listening server to say hello
CANCEL_TIMEOUT = 10.0        # seconds a cancelled child gets to clean up before the client dies
_LEN = struct.Struct("!I")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
HANDLED_SIGNALS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


class ServerUnavailable(Exception):
    """No usable server: compile in-process instead (``start``: and start one on that socket
    for next time)."""

    def __init__(self, reason: str, start: str | None = None):
        super().__init__(reason)
        self.start = start


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived (or a served command's client cancelled it): unwind,
    cleaning up as we go, then die by ``signum``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# --------------------------------------------------------------------------- signals

#: signals that arrived while a child process was being started (``held_interrupts``), or
#: None when an interrupt is raised where it lands
_held: list[int] | None = None


def interrupt(signum: int) -> None:
    """What a signal handler does: raise ``Interrupted`` here, or, while a child process is
    being started, hold it until the child is known (``held_interrupts``)."""
    if _held is not None:
        _held.append(signum)
        return
    raise Interrupted(signum)


class held_interrupts:
    """``with held_interrupts(): proc = subprocess.Popen(...)``: an interrupt arriving inside
    ``Popen`` (after the fork, before it returns the process) is raised when the block ends,
    once ``proc`` is set, so that the caller's cleanup can kill the child; raised inside
    ``Popen`` it would leave the child running, unknown to anyone."""

    def __enter__(self) -> None:
        global _held
        self._outer, _held = _held, []

    def __exit__(self, *exc: object) -> None:
        global _held
        pending, _held = _held, self._outer
        if pending:
            raise Interrupted(pending[0])


def catch_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise ``Interrupted``, except those this process was
    started ignoring (``nohup``, a shell's ``&``)."""
    def interrupted(signum: int, frame: object) -> None:
        interrupt(signum)

    for signum in HANDLED_SIGNALS:
        if _signal.getsignal(signum) != _signal.SIG_IGN:
            _signal.signal(signum, interrupted)


def die_by(signum: int) -> None:
    """End this process by ``signum``, as if it had not been caught (never returns)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    _signal.signal(signum, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)


# --------------------------------------------------------------------------- identity

def package_stamp() -> str:
    """Identifies the code a server would run: the interpreter, the package folder and a
    hash of every module's contents (an edit that keeps size and time still changes it)."""
    root = os.path.dirname(os.path.abspath(__file__))
    digest = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    with open(entry.path, "rb") as f:
                        digest = zlib.crc32(f.read(), zlib.crc32(entry.path.encode(), digest))
    return "\n".join((sys.executable, sys.version, root, os.environ.get("PYTHONPATH", ""), f"{digest:08x}"))


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


_STATUS_FIELDS = ("Uid:", "Gid:", "Groups:", "CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:")


def process_identity() -> tuple:
    """What a served compile inherits from the server process rather than the client: it
    must be equal on both sides (``socket_path`` keys servers by it)."""
    status = tuple(line for line in _read_text("/proc/self/status").splitlines()
                   if line.startswith(_STATUS_FIELDS))
    root = os.stat("/")
    return (os.getuid(), os.geteuid(), os.getgid(), os.getegid(), tuple(sorted(os.getgroups())), status,
            _link("/proc/self/ns/mnt"), _link("/proc/self/ns/user"), (root.st_dev, root.st_ino),
            os.getpriority(os.PRIO_PROCESS, 0), _read_text("/proc/self/limits"),
            _read_text("/proc/self/cgroup"), tuple(sorted(knobs.served_as(MATCH).items())))


# --------------------------------------------------------------------------- the socket

def socket_dir() -> str:
    base = knobs.runtime_dir or knobs.tmpdir or "/tmp"
    return os.path.join(base, f"tileiras-{os.getuid()}")


def socket_path(stamp: str, identity: tuple) -> str:
    key = zlib.crc32(marshal.dumps((stamp, identity)))
    return os.path.join(socket_dir(), f"server-{key:08x}.sock")


def private_dir(path: str, create: bool = False) -> bool:
    """Whether ``path`` is a folder of this user's that nobody else may enter (False if it
    does not exist and ``create`` is off); ``PermissionError`` if it exists and is not."""
    if create:
        os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private folder of this user "
                              f"(owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})")
    return True


def peer_uid(sock: _socket.socket) -> int:
    return _CRED.unpack(sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _CRED.size))[1]


def send_message(sock: _socket.socket, message: tuple) -> None:
    body = marshal.dumps(message)
    sock.sendall(_LEN.pack(len(body)) + body)


def _recv_exact(sock: _socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: _socket.socket) -> tuple:
    message = marshal.loads(_recv_exact(sock, _LEN.unpack(_recv_exact(sock, _LEN.size))[0]))
    if not isinstance(message, tuple) or not message:
        raise ConnectionError("malformed message")
    return message


def hello_message(stamp: str, identity: tuple) -> bytes:
    body = marshal.dumps((stamp, identity))
    return HELLO + _LEN.pack(len(body)) + body


def _connect(path: str, stamp: str, identity: tuple) -> _socket.socket:
    """A connection to a warm server of this user running our code as we would, or
    ServerUnavailable."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(HELLO_TIMEOUT)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise ServerUnavailable("no server", start=path) from None
        if peer_uid(sock) != os.getuid():
            raise ServerUnavailable("the server on the socket belongs to another user")
        if _recv_exact(sock, len(HELLO)) != HELLO:
            raise ServerUnavailable("a different server answers on this socket")
        body = _recv_exact(sock, _LEN.unpack(_recv_exact(sock, _LEN.size))[0])
        if marshal.loads(body) != (stamp, identity):
            raise ServerUnavailable("the server runs other code or as another process identity")
        sock.settimeout(None)
        return sock
    except ServerUnavailable:
        sock.close()
        raise
    except Exception as exc:  # noqa: BLE001 - a broken server: compile in-process
        sock.close()
        raise ServerUnavailable(str(exc)) from None


def _std_fds_open() -> bool:
    try:
        for fd in (1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return sys.stdout is not None and sys.stderr is not None


# --------------------------------------------------------------------------- the client

def run_on_server(argv: list[str], stamp: str) -> int:
    """The exit code of ``argv`` run by a forked child of the server."""
    if not (hasattr(os, "fork") and hasattr(_socket, "SO_PEERCRED") and _std_fds_open()):
        raise ServerUnavailable("this platform or process cannot be served")
    identity = process_identity()
    path = socket_path(stamp, identity)
    try:
        if not private_dir(socket_dir()):
            raise ServerUnavailable("no server", start=path)
    except PermissionError as err:
        raise ServerUnavailable(str(err)) from None
    sock = _connect(path, stamp, identity)
    try:
        streams = (sys.stdout.encoding, sys.stdout.errors, sys.stderr.encoding, sys.stderr.errors,
                   os.isatty(1))
        try:
            send_message(sock, ("run", list(argv), knobs.served_as(SEND, absolute=True), streams))
        except OSError as exc:
            raise ServerUnavailable(str(exc)) from None
        return _Client(sock).serve()
    finally:
        sock.close()


class _Client:
    """Does what the served child asks, until it reports the exit code."""

    def __init__(self, sock: _socket.socket):
        self.sock = sock
        self.acted = False      # wrote anything on the child's behalf (no in-process retry then)
        self.cancelled = 0      # the signal we were interrupted by

    def serve(self) -> int:
        while True:
            try:
                try:
                    message = recv_message(self.sock)
                except (OSError, EOFError, ValueError) as exc:
                    return self._lost(exc)
                if message[0] == "exit":
                    if self.cancelled:
                        die_by(self.cancelled)
                    return int(message[1])
                reply = self._perform(message)
                try:
                    send_message(self.sock, reply)
                except OSError as exc:
                    return self._lost(exc)
            except Interrupted as sig:
                self._cancel(sig.signum)

    def _perform(self, message: tuple) -> tuple:
        from . import hostio

        kind = message[0]
        if self.cancelled and kind != "read":
            return (4, os.strerror(4), b"")  # EINTR: nothing is written once cancelled
        try:
            if kind == "read":
                return (0, "", hostio.read_local(message[1]))
            self.acted = True
            if kind == "write":
                hostio.write_local(message[1], message[2])
            elif kind == "out" and message[1] in (1, 2):
                hostio.write_all(message[1], message[2])
            else:
                return (22, f"unknown request {kind!r}", b"")
        except OSError as err:
            return (err.errno or 5, err.strerror or str(err), b"")
        return (0, "", b"")

    def _cancel(self, signum: int) -> None:
        if self.cancelled:  # a second signal: do not wait for the cleanup
            die_by(signum)
        self.cancelled = signum
        try:
            send_message(self.sock, ("cancel", signum))
            self.sock.settimeout(CANCEL_TIMEOUT)
        except OSError:
            die_by(signum)

    def _lost(self, exc: BaseException) -> int:
        """The server went away without an exit code."""
        if self.cancelled:
            die_by(self.cancelled)
        if not self.acted:  # it did nothing the user can see: run the command here instead
            raise ServerUnavailable(f"the server's child ended: {exc}")
        sys.stderr.write("error: internal error: the compile server's child exited without a status\n")
        return 5


# --------------------------------------------------------------------------- starting

def start_server(path: str) -> None:
    """Start a detached server on ``path`` (it exits at once if another one is up)."""
    if not hasattr(os, "fork"):
        return
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
        for signum in HANDLED_SIGNALS:  # not the client's Interrupted handlers
            _signal.signal(signum, _signal.SIG_DFL)
        # ``-m`` puts the working folder first on the import path: run from the folder
        # holding this package, so a ``tileiras`` folder where the command ran is not the
        # one the server imports (its stamp would never match, and nothing be served).
        os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        os.execv(sys.executable, [sys.executable, "-m", "tileiras.server", path])
    finally:
        os._exit(127)


def _debug(line: str) -> None:
    if knobs.debug:
        sys.stderr.write(f"tileiras: {line}\n")


def main() -> int:
    """Console-script entry of ``tileiras``."""
    catch_signals()
    try:
        return _main(list(sys.argv))
    except Interrupted as sig:
        die_by(sig.signum)
        raise  # not reached


def _main(argv: list[str]) -> int:
    start = None  # the socket a server should be started on, for next time
    if knobs.server:
        try:
            stamp = package_stamp()
            return run_on_server(argv, stamp)
        except ServerUnavailable as why:
            if why.start:
                start = why.start
            else:
                _debug(f"compiling in-process: {why}")
        except OSError as exc:
            _debug(f"compiling in-process: {exc}")
    from .driver import main as driver_main

    code = driver_main(argv[1:])
    if start is not None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
        start_server(start)
    return code
