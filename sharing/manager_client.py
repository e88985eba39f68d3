"""Membership of a file_system manager group, started on first use.

A process that makes or receives ``file_system`` segments joins a group: it
connects to the manager daemon whose socket ``HOGSHARE_SHM_MANAGER`` names
(inherited from the process that started it) or, failing that, starts a daemon
and sets the variable, so the processes it starts later join the same group.
The connection stays open for the life of the process and is how the daemon
learns the process has gone; the reply gives the group and this process's
client id, which prefix the segment names it creates (see ``shmfile``). A fork
child makes its own connection when it first needs one.

A daemon can die without cleaning up (SIGKILL). Its clients then see their
connection closed (``manager_gone``: each exiting one unlinks all its names
itself, see ``shmfile``), and its socket refuses connections: whoever finds
that (an exiting client, or a process about to start a new daemon because the
inherited one is gone) removes the socket and its directory.

``HOGSHARE_SHM_MANAGER_GRACE_S`` sets how long a daemon waits, once its group
is empty, before unlinking what is left (default 1 second).
"""
from __future__ import annotations

import contextlib
import os
import select
import socket
import stat
import subprocess
import sys
import tempfile
import threading

MANAGER_ENV = "HOGSHARE_SHM_MANAGER"
GRACE_ENV = "HOGSHARE_SHM_MANAGER_GRACE_S"
DEFAULT_GRACE_S = 1.0
_DAEMON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shm_manager.py")
_START_TIMEOUT_S = 30.0

_lock = threading.Lock()
_membership: tuple[str, str] | None = None  # (group, client id)
_connection: socket.socket | None = None
_socket_path: str | None = None


def membership() -> tuple[str, str]:
    """This process's (group, client id), joining (or starting) a manager on first call."""
    global _membership, _connection, _socket_path
    if _membership is not None:
        return _membership
    with _lock:
        if _membership is None:
            path = os.environ.get(MANAGER_ENV)
            joined = _join(path) if path else None
            if joined is None:
                if path:
                    remove_if_dead(path)
                path = _start_daemon()
                joined = _join(path)
                if joined is None:
                    raise RuntimeError(f"the file_system manager daemon started at {path} refused to join")
                os.environ[MANAGER_ENV] = path
            _connection, _membership, _socket_path = joined[0], joined[1], path
    return _membership


def joined_group() -> str | None:
    """The group this process joined, or None if it has not joined one."""
    return _membership[0] if _membership is not None else None


def socket_path() -> str | None:
    """The socket of the manager this process joined, or None before it joined one."""
    return _socket_path


def manager_gone() -> bool:
    """Whether the daemon this process joined has closed its connection (it never writes unasked)."""
    if _connection is None:
        return False
    poller = select.poll()
    poller.register(_connection, select.POLLIN)
    return bool(poller.poll(0))


def remove_if_dead(path: str) -> None:
    """Remove a daemon's socket and its directory if nothing listens on the socket any more."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
            return  # a daemon listens
        except ConnectionRefusedError:
            pass  # a socket file with no daemon behind it
        except OSError:
            return  # nothing there any more
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
            os.rmdir(os.path.dirname(path))  # only if empty: nothing but the socket was in it


def _join(path: str) -> tuple[socket.socket, tuple[str, str]] | None:
    """Connect to the daemon at `path` and read the membership; None if it is not there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_START_TIMEOUT_S)
        sock.connect(path)
        sock.sendall(b"JOIN\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(256)
            if not chunk:
                break
            reply += chunk
        words = reply.decode(errors="replace").split()
        if len(words) != 3 or words[0] != "OK":
            sock.close()
            return None
        sock.settimeout(None)
        return sock, (words[1], words[2])
    except OSError:
        sock.close()
        return None


def _grace_s() -> str:
    value = os.environ.get(GRACE_ENV, str(DEFAULT_GRACE_S))
    try:
        if float(value) < 0:
            raise ValueError
    except ValueError:
        raise ValueError(f"{GRACE_ENV}={value!r} must be a number of seconds >= 0") from None
    return value


def _start_daemon() -> str:
    """Start a manager daemon with its socket in a new 0700 directory; return the socket path."""
    directory = tempfile.mkdtemp(prefix="hogshare-")  # mkdtemp makes it 0700
    path = os.path.join(directory, "manager.sock")
    proc = subprocess.Popen([sys.executable, "-I", _DAEMON, path, _grace_s()], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    with proc.stdout, proc.stderr:
        ready, _, _ = select.select([proc.stdout], [], [], _START_TIMEOUT_S)
        line = proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            proc.kill()
            proc.wait()
            error = proc.stderr.read().decode(errors="replace").strip()
            try:
                os.rmdir(directory)
            except OSError:
                pass
            raise RuntimeError(f"the file_system manager daemon did not start: {error or 'no answer'}")
    proc.wait()  # the daemon itself was forked off and is not our child
    return path


def _after_fork_in_child() -> None:
    # The inherited connection is the parent's: closing this copy leaves it open for the parent.
    global _lock, _membership, _connection, _socket_path
    _lock = threading.Lock()
    if _connection is not None:
        _connection.close()
    _membership = _connection = _socket_path = None


os.register_at_fork(after_in_child=_after_fork_in_child)
