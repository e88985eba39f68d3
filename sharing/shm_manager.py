"""The file_system manager daemon: unlinks a group's /dev/shm segments once every process of the group is gone.

Run by ``manager_client`` as ``python -I shm_manager.py SOCKET GRACE_S`` (standard
library only, so it starts in milliseconds): it binds SOCKET (inside a 0700
directory the client made), detaches (new session from the client, then a
second fork so it is nobody's child), prints ``ready`` and serves. Each process
of the group connects once and keeps the connection open for its lifetime; the
reply names the group and gives the process a client id. Every segment name
the group creates starts with ``hogshare_<group>_``, so that prefix records
them all: a process's own names for the storages it holds carry
``c<client>_`` next, the names it sends storages under ``m`` (see ``shmfile``).

A closed connection is how the daemon learns a process is gone, SIGKILL
included: it unlinks that process's own names at once (only their owner uses
them), leaving the names it sent under to messages still in flight. When no
connection is left for GRACE_S seconds (time for a process just starting to
join), it unlinks every name of the group, removes its socket and directory,
and exits.
SIGTERM, SIGINT and SIGHUP clean up at once.
"""
from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import time

SHM_DIR = "/dev/shm"
FIRST_CLIENT_WAIT_S = 30.0  # how long a fresh daemon waits for the client that started it


def unlink_group(prefix: str) -> int:
    """Unlink every /dev/shm name starting with `prefix`; return how many went."""
    removed = 0
    for name in os.listdir(SHM_DIR):
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def serve(listener: socket.socket, grace_s: float) -> None:
    """Answer joins and watch connections until the group has been empty for `grace_s` seconds."""
    group = os.urandom(8).hex()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    clients: dict[socket.socket, int] = {}
    next_client = 0
    idle_since = time.monotonic()

    def accept() -> None:
        nonlocal next_client
        conn, _ = listener.accept()
        next_client += 1
        clients[conn] = next_client
        selector.register(conn, selectors.EVENT_READ)

    try:
        while True:
            timeout = None
            if not clients:
                wait = grace_s if next_client else max(grace_s, FIRST_CLIENT_WAIT_S)
                timeout = idle_since + wait - time.monotonic()
                if timeout <= 0:
                    listener.setblocking(False)
                    try:
                        accept()  # a process joining at the last moment keeps the group alive
                    except BlockingIOError:
                        return
                    listener.setblocking(True)
                    continue
            for key, _ in selector.select(timeout):
                if key.fileobj is listener:
                    accept()
                    continue
                conn = key.fileobj
                try:
                    if conn.recv(256):
                        conn.sendall(f"OK {group} {clients[conn]}\n".encode())
                        continue
                except OSError:
                    pass
                selector.unregister(conn)
                conn.close()
                unlink_group(f"hogshare_{group}_c{clients.pop(conn)}_")
                if not clients:
                    idle_since = time.monotonic()
    finally:
        listener.close()
        unlink_group(f"hogshare_{group}_")


def main(argv: list[str]) -> None:
    sock_path, grace_s = argv[1], float(argv[2])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    os.chmod(sock_path, 0o600)
    listener.listen(128)
    if os.fork() > 0:
        os._exit(0)  # the client reaps this parent; the daemon is reparented and never a zombie of the client
    os.chdir("/")
    os.umask(0o077)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        serve(listener, grace_s)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(sock_path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(sock_path))


if __name__ == "__main__":
    main(sys.argv)
