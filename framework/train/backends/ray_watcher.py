"""The watcher of a simulated Ray cluster: what removes the cluster when `train` dies without shutting it down.

`train` starts it (`start`) before anything of the cluster exists. The
watcher makes the cluster's temporary directory, tells `train` its path and
waits for `train` to die, in a session of its own, so that a signal to
train's process group or terminal does not reach it. `train` puts the path in
RAY_TMPDIR, which every process of the cluster inherits (GCS, raylets, Ray's
agents and workers, the node groups' worker processes). When `train` dies
(SIGKILL included, or before it read the path) the watcher stops every
process whose environment holds that RAY_TMPDIR or that has a file open in
the directory (Ray's processes write their logs there, and the title Ray
gives some of them can overwrite their environment), SIGTERM first (a
file_system manager daemon cleans up on it) and SIGKILL after GRACE_S, then
removes the directory. A run that shuts its cluster down itself ends the watcher after
that (`stop`). Run as a script (``python -I ray_watcher.py PID``), standard
library only: it starts in milliseconds and imports nothing of the run.
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

PREFIX = "hogshare-ray-"
DIRECTORY_PARENT = "/tmp"
"""Not $TMPDIR: Ray's socket paths under the directory must stay under 108 characters."""
GRACE_S = 3.0
"""How long the cluster's processes have to exit on SIGTERM before SIGKILL."""
GIVE_UP_S = 30.0
"""How long the watcher goes on finding and stopping processes of the cluster (new ones may still appear)."""
START_TIMEOUT_S = 30.0


def start() -> tuple[subprocess.Popen, str]:
    """Start a watcher of this process; (the watcher, the cluster's new directory). OSError when it did not start."""
    proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), str(os.getpid())],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    with proc.stdout, proc.stderr:
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        directory = proc.stdout.readline().decode().strip() if ready else ""
        if not directory:
            proc.kill()
            proc.wait()
            error = " ".join(proc.stderr.read().decode(errors="replace").split())[-300:]
            raise OSError(f"the watcher of the local Ray cluster did not start: {error or 'no answer'}")
    return proc, directory


def stop(proc: subprocess.Popen) -> None:
    """End a watcher whose cluster was shut down and removed (nothing is left for it to do)."""
    proc.kill()
    proc.wait()


def _belongs(pid: int, marker: bytes, directory: str) -> bool:
    """Whether process pid is the cluster's: its environment holds `marker`, or it has a file open under
    `directory` (Ray's processes write their logs there; one whose title Ray set may have lost its environment
    to the title)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if marker in f.read().split(b"\0"):
                return True
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(directory + "/"):
                return True
    except OSError:  # gone meanwhile, or not ours to read
        pass
    return False


def _cluster_processes(directory: str) -> list[int]:
    """Pids of the live processes of the cluster whose RAY_TMPDIR is `directory`, this one excepted; a zombie,
    whose environment reads empty and which has no files, is not one."""
    marker = f"RAY_TMPDIR={directory}".encode()
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and int(name) != os.getpid() and _belongs(int(name), marker, directory)]


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def remove_cluster(directory: str) -> None:
    """Stop every process of the cluster whose RAY_TMPDIR is `directory`, then remove the directory."""
    give_up = time.monotonic() + GIVE_UP_S
    pids = _cluster_processes(directory)
    while pids and time.monotonic() < give_up:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = _cluster_processes(directory)
        _signal_all(pids, signal.SIGKILL)
        time.sleep(0.1)
        pids = _cluster_processes(directory)
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> None:
    train = int(argv[1])
    alive = os.pidfd_open(train)  # readable once train has died
    directory = tempfile.mkdtemp(prefix=PREFIX, dir=DIRECTORY_PARENT)
    try:
        if os.getppid() == train:  # else train died before the pidfd was opened
            sys.stdout.write(directory + "\n")
            sys.stdout.flush()
            select.select([alive], [], [])
    finally:
        remove_cluster(directory)


if __name__ == "__main__":
    main(sys.argv)
