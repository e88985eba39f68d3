"""Support for the reliability suite: the real `train` CLI in tagged subprocesses, and what runs leave behind.

Every process a test starts gets ``HOGSHARE_RELIABILITY_TAG=<unique value>`` in
its environment. Workers, fork servers, resource trackers and the file_system
manager daemon inherit it, so /proc tells which processes belong to a test,
whoever their parent is now. A `Watch` samples the /dev/shm groups they map
while the test runs and afterwards reports what was left behind:
processes still alive, segments of those groups still in /dev/shm, manager
socket directories never removed, multiprocessing's temp directories (the fork
server's socket lives in one) never removed.
"""
from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

from run_configs import cartpole_config
import train_cli
from train_cli import cli_command, cli_env, only_run_dir, write_config

__all__ = ["only_run_dir", "write_config"]  # the suite's own helpers, imported here by the reliability tests

TAG_ENV = "HOGSHARE_RELIABILITY_TAG"
HERE = Path(__file__).resolve().parent
SHM_DIR = Path("/dev/shm")
MANAGER_ENV = "HOGSHARE_SHM_MANAGER"
GRACE_ENV = "HOGSHARE_SHM_MANAGER_GRACE_S"
_GROUP_IN_MAPS = re.compile(rb"/dev/shm/hogshare_([0-9a-f]+)_")
_SEMAPHORE_IN_MAPS = re.compile(rb"/dev/shm/(sem\.\S+)$", re.MULTILINE)
HELPERS = ("resource_tracker", "sharing/watcher.py")
"""What the command lines of a run's helper processes hold (they are not workers)."""


# -- configs -------------------------------------------------------------------------------------
def fast_config(seed: int = 3, **sections) -> dict:
    """A config for a few seconds of CartPole with forked workers and no progress bar; sections override keys."""
    return cartpole_config(experiment="rel", seed=seed, total_steps=10**9, max_seconds=120, log_every_s=0.5, **sections)


# -- /proc ---------------------------------------------------------------------------------------
def _read(pid: int, name: str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, or None when it is gone."""
    raw = _read(pid, "stat")
    if raw is None:
        return None
    fields = raw.rsplit(b")", 1)[1].split()
    return fields[0].decode(), int(fields[1])


def is_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def cmdline(pid: int) -> str:
    """The command line of a process ('' when gone)."""
    raw = _read(pid, "cmdline") or b""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def children(pid: int) -> list[int]:
    """The live child processes of pid (of all its threads)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for task in tasks:
        raw = _read(pid, f"task/{task}/children") or b""
        found += [int(c) for c in raw.split()]
    return [c for c in found if is_alive(c)]


def descendants(pid: int) -> list[int]:
    """Every live process below pid in the process tree."""
    out, todo = [], children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        todo += children(child)
    return out


def rss_kib(pid: int) -> int:
    """Resident memory of a process in KiB."""
    for line in (_read(pid, "status") or b"").splitlines():
        if line.startswith(b"VmRSS:"):
            return int(line.split()[1])
    raise ProcessLookupError(pid)


def fd_count(pid: int) -> int:
    """Open file descriptors of a process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def mapped_groups(pid: int) -> set[str]:
    """The file_system manager groups whose /dev/shm segments the process maps."""
    return {m.decode() for m in _GROUP_IN_MAPS.findall(_read(pid, "maps") or b"")}


def mapped_semaphores(pid: int) -> set[str]:
    """The names of the named semaphores in /dev/shm that the process maps (an unlinked one is "(deleted)")."""
    return {m.decode() for m in _SEMAPHORE_IN_MAPS.findall(_read(pid, "maps") or b"")}


def group_names(group: str) -> list[str]:
    """The /dev/shm names of one file_system manager group."""
    return sorted(p.name for p in SHM_DIR.glob(f"hogshare_{group}_*"))


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Poll predicate until it is true or timeout seconds pass; its last truth value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(interval)


def still_alive(pids: Iterable[int], timeout: float) -> list[int]:
    """The pids still alive after waiting up to timeout seconds for all of them to exit."""
    pids = list(pids)
    wait_until(lambda: not any(is_alive(p) for p in pids), timeout)
    return [p for p in pids if is_alive(p)]


def worker_pids(main_pid: int, count: int, timeout: float = 60) -> list[int]:
    """The worker processes of a running `train`: leaves of its process tree, less its helpers.

    A fork server has the workers as children, so it is never a leaf once they
    run; the resource tracker and a watcher (`sharing.watcher`) are recognised
    by their command lines.
    """
    found: list[int] = []

    def ready() -> bool:
        nonlocal found
        tree = descendants(main_pid)
        found = sorted(p for p in tree if not children(p) and not any(helper in cmdline(p) for helper in HELPERS))
        return len(found) >= count

    if not wait_until(ready, timeout):
        raise AssertionError(f"train (pid {main_pid}) did not start {count} workers: found {found}")
    return found


# -- the test's processes ------------------------------------------------------------------------
class Watch:
    """The processes, /dev/shm groups and manager directories of one test, and what they leave behind."""

    def __init__(self, tmp_path: Path, interval: float = 0.2):
        self.tag = uuid.uuid4().hex
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir(exist_ok=True)
        self.groups: set[str] = set()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a test's subprocess: tagged, its own manager group and TMPDIR, fault_envs importable."""
        env = cli_env({k: v for k, v in os.environ.items() if k != MANAGER_ENV})
        env.update({TAG_ENV: self.tag, "TMPDIR": str(self.tmpdir), GRACE_ENV: "0.5"})
        env.update(extra)
        return env

    def tagged(self) -> list[int]:
        """Live processes started by this test (any depth, any parent)."""
        marker = f"{TAG_ENV}={self.tag}".encode()
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                environ = _read(int(name), "environ")
                if environ and marker in environ.split(b"\0") and is_alive(int(name)):
                    pids.append(int(name))
        return pids

    def sample(self) -> None:
        """Record the /dev/shm groups the test's live processes map."""
        for pid in self.tagged():
            self.groups |= mapped_groups(pid)

    def _sample_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def leftovers(self, timeout: float = 20) -> list[str]:
        """What the test left once its processes had `timeout` seconds to end; each is cleaned up after reporting."""
        problems = []
        wait_until(lambda: not self.tagged(), timeout, interval=0.2)
        for pid in self.tagged():
            problems.append(f"process {pid} still running: {cmdline(pid)}")
            os.kill(pid, signal.SIGKILL)
        for group in sorted(self.groups):
            wait_until(lambda: not group_names(group), 10)
            for name in group_names(group):
                problems.append(f"/dev/shm/{name} left behind")
                (SHM_DIR / name).unlink(missing_ok=True)
        problems += [f"manager directory {d} left behind" for d in self.tmpdir.glob("hogshare-*")]
        wait_until(lambda: not list(self.tmpdir.glob("pymp-*")), 10)
        problems += [f"multiprocessing directory {d} left behind: {os.listdir(d)}" for d in self.tmpdir.glob("pymp-*")]
        return problems


# -- running the CLI -----------------------------------------------------------------------------
class Train:
    """A `train` (or other console script) process started in the background, its output read line by line."""

    def __init__(self, watch: Watch, *args: object, command: str = "train", prefix: Iterable[str] = (),
                 python_flags: Iterable[str] = (), env: dict[str, str] | None = None, **popen):
        python, *rest = cli_command(command)
        argv = [*prefix, python, *python_flags, *rest, *map(str, args)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env or watch.env(), **popen)
        self.pid = self.proc.pid
        self._err: list[str] = []
        self._out: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s, lines), daemon=True)
                         for s, lines in ((self.proc.stderr, self._err), (self.proc.stdout, self._out))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._err)

    @property
    def stdout(self) -> str:
        return "".join(self._out)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        """The first match of pattern (multiline) in stderr, waiting for it up to timeout seconds."""
        regex = re.compile(pattern, re.MULTILINE)
        if not wait_until(lambda: regex.search(self.stderr) or self.proc.poll() is not None, timeout):
            raise AssertionError(f"no {pattern!r} on stderr within {timeout} s:\n{self.stderr}")
        match = regex.search(self.stderr)
        if match is None:
            raise AssertionError(f"train exited ({self.proc.returncode}) without printing {pattern!r}:\n{self.stderr}")
        return match

    def finish(self, timeout: float = 120) -> int:
        """Wait for the process to exit (killing it after timeout seconds); its exit code."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"train did not exit within {timeout} s:\n{self.stderr}") from None
        for reader in self._readers:
            reader.join(10)
        return self.proc.returncode


def run_cli(watch: Watch, *args: object, command: str = "train", timeout: float = 120,
            **popen) -> subprocess.CompletedProcess:
    """Run `train`/`evaluate` to the end in the test's environment."""
    return train_cli.run_cli(command, *args, timeout=timeout, env=popen.pop("env", None) or watch.env(), **popen)


def short_run(tmp: Path, total_steps: int = 2000) -> Path:
    """The run directory of a fast_config run of total_steps made by the real train in tmp/runs (for module
    fixtures that copy or read it); the run must end with exit 0 and leave nothing behind."""
    watch = Watch(tmp)
    config = write_config(tmp / "c.yaml", fast_config(trainer={"total_steps": total_steps}))
    done = run_cli(watch, "--config", config, "--logdir", tmp / "runs")
    assert done.returncode == 0, done.stderr
    assert not watch.leftovers()
    return only_run_dir(tmp / "runs")


def wait_for_file(path: Path, timeout: float = 60) -> Path:
    """path, once it exists."""
    if not wait_until(path.exists, timeout):
        raise AssertionError(f"{path} did not appear within {timeout} s")
    return path


def wait_for_run_dir(logdir: Path, timeout: float = 60) -> Path:
    """The run directory train makes in logdir, once it exists."""
    wait_until(lambda: logdir.is_dir() and any(p.is_dir() for p in logdir.iterdir()), timeout)
    return only_run_dir(logdir)


# -- mounts --------------------------------------------------------------------------------------
@functools.cache
def can_mount() -> bool:
    """True when this process may create mount namespaces and mount tmpfs (root with CAP_SYS_ADMIN)."""
    with tempfile.TemporaryDirectory() as where:
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private",
                                "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where], capture_output=True)
    return probe.returncode == 0


def in_private_tmpfs(mountpoint: str | Path, size: str, full: bool = False) -> list[str]:
    """A command prefix: run the command in a new mount namespace that has a tmpfs of `size` at `mountpoint`
    (filled up first when `full`).

    The mount is seen by the command and its children only, and goes away with them.
    """
    fill_up = 'cat /dev/zero > "$2/filler" 2>/dev/null; ' if full else ""
    script = f'mount -t tmpfs -o "size=$1,mode=1777" tmpfs "$2" && {{ {fill_up}shift 2; }} && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", size, str(mountpoint)]


def mount_tmpfs(mountpoint: Path, size: str, options: str = "") -> None:
    """Mount a fresh tmpfs of `size` (and more mount options, e.g. nr_inodes=N) at mountpoint (made if missing)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}" + (f",{options}" if options else ""), "tmpfs",
                    str(mountpoint)], check=True, capture_output=True)


def remount(mountpoint: Path, mode: str) -> None:
    """Remount a mounted filesystem read-only ("ro") or read-write ("rw")."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mountpoint)], check=True, capture_output=True)


def unmount(mountpoint: Path) -> None:
    """Detach a mount (lazily, so open files do not keep it)."""
    subprocess.run(["umount", "-l", str(mountpoint)], check=True, capture_output=True)


def use_up_inodes(directory: Path) -> int:
    """Create empty files in directory until the filesystem has no inode left; how many were made."""
    made = 0
    try:
        while True:
            (directory / f"inode-{made}").touch()
            made += 1
    except OSError:
        return made


def fill(directory: Path) -> Path:
    """Write zeros into a file in directory until the filesystem is full; the file."""
    filler = directory / "filler"
    block = bytes(1 << 16)
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError:
            pass
        try:  # the last partial block
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler
