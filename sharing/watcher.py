"""A watcher: a process in a session of its own that removes a directory, and stops the processes that use it,
once the process that started it dies, however it dies (SIGKILL of its whole process group included).

`watch` starts one for a directory that exists; `watch_new` for a directory
the watcher makes itself, so that it never exists unwatched. The watcher
answers the directory's path once it watches; its own session keeps a signal
to the starter's process group or terminal from reaching it. When the
starter dies (or before it read the answer) the watcher stops every process
that uses the directory: whose environment holds VARIABLE=DIRECTORY (when a
VARIABLE is given; children inherit it) or that has a file open in it (a
process whose title was set may have lost its environment to the title),
SIGTERM first (a process may clean up on it) and SIGKILL after GRACE_S; then
it removes the directory. A starter that removed the directory itself ends
the watcher (`stop`). Run as a script (``python -I watcher.py PID VARIABLE
DIRECTORY``, or ``PID VARIABLE PARENT PREFIX`` to make it), standard library
only: it starts in milliseconds and imports nothing of the run.
"""
from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

GRACE_S = 3.0
"""How long the directory's processes have to exit on SIGTERM before SIGKILL."""
GIVE_UP_S = 30.0
"""How long the watcher goes on finding and stopping processes of the directory (new ones may still appear)."""
START_TIMEOUT_S = 30.0


def watch(directory: str, variable: str = "") -> subprocess.Popen:
    """Start a watcher of this process for the existing `directory`. OSError when it did not start."""
    return _start(variable, directory)[0]


def watch_new(parent: str, prefix: str, variable: str = "") -> tuple[subprocess.Popen, str]:
    """Start a watcher of this process that makes a new directory `prefix`* in `parent`; (the watcher, the
    directory). OSError when it did not start."""
    return _start(variable, parent, prefix)


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), str(os.getpid()), *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    with proc.stdout, proc.stderr:
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        directory = proc.stdout.readline().decode().strip() if ready else ""
        if not directory:
            proc.kill()
            proc.wait()
            error = " ".join(proc.stderr.read().decode(errors="replace").split())[-300:]
            raise OSError(f"the watcher of {os.path.join(*args[1:])} did not start: {error or 'no answer'}")
    return proc, directory


def stop(proc: subprocess.Popen) -> None:
    """End a watcher whose directory was removed (nothing is left for it to do)."""
    proc.kill()
    proc.wait()


def _belongs(pid: int, marker: bytes | None, directory: str) -> bool:
    """Whether process pid uses `directory`: its environment holds `marker`, or it has a file open under it."""
    try:
        if marker is not None:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    return True
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(directory + "/"):
                return True
    except OSError:  # gone meanwhile, or not ours to read
        pass
    return False


def _users(directory: str, variable: str) -> list[int]:
    """Pids of the live processes that use `directory`, this one excepted; a zombie, whose environment reads
    empty and which has no files, is not one."""
    marker = f"{variable}={directory}".encode() if variable else None
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and int(name) != os.getpid() and _belongs(int(name), marker, directory)]


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def remove(directory: str, variable: str = "") -> None:
    """Stop every process that uses `directory` (see `_users`), then remove the directory."""
    give_up = time.monotonic() + GIVE_UP_S
    pids = _users(directory, variable)
    while pids and time.monotonic() < give_up:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = _users(directory, variable)
        _signal_all(pids, signal.SIGKILL)
        time.sleep(0.1)
        pids = _users(directory, variable)
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> None:
    starter, variable, where = int(argv[1]), argv[2], argv[3:]
    try:
        alive = os.pidfd_open(starter)  # readable once the starter has died
    except ProcessLookupError:
        alive = None
    directory = tempfile.mkdtemp(prefix=where[1], dir=where[0]) if len(where) == 2 else where[0]
    try:
        if alive is not None and os.getppid() == starter:  # else the starter died before the pidfd was opened
            sys.stdout.write(directory + "\n")
            sys.stdout.flush()
            select.select([alive], [], [])
    finally:
        remove(directory, variable)


if __name__ == "__main__":
    main(sys.argv)
