"""Process lifetime helpers: children that die with their parent, start with signals blocked, and are terminated;
and a fork server whose socket directory does not outlive the program.

A child started while its parent blocks a signal begins life with that signal
blocked (fork, and exec, keep the mask), so a Ctrl-C that reaches the whole
process group while a child is still importing stays pending instead of
killing it half-started; the child then ignores it and unblocks
(`ignore_signals`), which discards it. Costs two system calls per start.
Importing this module puts `sharing.forkserver_cleanup` on the fork server's
preload list (see there): the server removes its socket directory when the
main process is killed alone. `watch_forkserver_directory` covers a kill of
the whole process group, fork server included.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import threading
import time
from typing import Iterable, Iterator

from . import _libc, watcher


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies, so no worker is ever orphaned.

    Call it first thing in a child. If the parent is already gone by then, the
    process kills itself at once. The signal follows the parent *thread* that
    started the child: start children from a thread that outlives them.
    With the forkserver start method the kernel parent is the fork server,
    which stays up while any of its children holds the server's liveness pipe
    (each one inherits it); there a daemon thread also waits on the parent's
    sentinel and kills the process when the parent is gone.
    """
    _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = multiprocessing.parent_process()
    orphaned = (not parent.is_alive()) if parent is not None else os.getppid() == 1
    if orphaned:
        os.kill(os.getpid(), signal.SIGKILL)
    if parent is not None and parent.pid != os.getppid():
        threading.Thread(target=_die_when_ready, args=(parent.sentinel,), name="die-with-parent",
                         daemon=True).start()


def _die_when_ready(sentinel: int) -> None:
    """SIGKILL this process once `sentinel` (the parent process's) is ready: the parent has exited."""
    multiprocessing.connection.wait([sentinel])
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def signals_blocked(signals: Iterable[int]) -> Iterator[None]:
    """Block `signals` in the calling thread for the block: processes started in it begin with them blocked.

    A signal that arrives meanwhile is delivered when the block ends.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def ignore_signals(signals: Iterable[int]) -> None:
    """Ignore `signals` from now on, then unblock them: one that arrived while blocked is discarded (main thread)."""
    signals = list(signals)
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


def terminate_processes(processes: Iterable[multiprocessing.process.BaseProcess], grace_s: float = 5.0) -> None:
    """Stop processes: SIGTERM, up to `grace_s` seconds to exit, then SIGKILL; all joined on return."""
    if grace_s < 0:
        raise ValueError(f"grace_s must be >= 0, got {grace_s}")
    started = [p for p in processes if p.pid is not None]
    alive = [p for p in started if p.is_alive()]
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + grace_s
    while alive:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=remaining)
        alive = [p for p in alive if p.is_alive()]
    for p in alive:
        p.kill()
    for p in started:
        p.join()


FORKSERVER_CLEANUP = "sharing.forkserver_cleanup"


def preload_forkserver_cleanup() -> None:
    """Add FORKSERVER_CLEANUP to the fork server's preload modules (before the server starts), keeping the others."""
    modules = list(getattr(multiprocessing.forkserver._forkserver, "_preload_modules", None) or ["__main__"])
    if FORKSERVER_CLEANUP not in modules:
        multiprocessing.forkserver.set_forkserver_preload(modules + [FORKSERVER_CLEANUP])


_watchers: dict[str, object] = {}  # multiprocessing's temporary directory -> its watcher, once started


def watch_forkserver_directory() -> None:
    """Before the fork server starts: have a watcher (`sharing.watcher`) remove multiprocessing's temporary
    directory, where the server's socket goes, once this process dies, even when the fork server dies with it
    (SIGKILL of the whole process group). One watcher per directory; OSError when it did not start."""
    directory = multiprocessing.util.get_temp_dir()
    if directory not in _watchers:
        _watchers[directory] = watcher.watch(directory)


preload_forkserver_cleanup()
