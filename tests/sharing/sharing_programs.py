"""Small programs the sharing tests run as separate interpreters: `python sharing_programs.py NAME [ARGS]`.

Each prints one JSON line the test reads; they exist where a test needs a
fresh process (its own rlimits, manager group or /proc/self/maps) or one it
can SIGKILL whole.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time


def report(**values) -> None:
    print(json.dumps(values), flush=True)


def low_ulimit(limit: str) -> None:
    """Under RLIMIT_NOFILE=limit: file_descriptor runs out with advice, file_system does not."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limit), int(limit)))
    import numpy as np
    import sharing
    held, error = [], ""
    try:
        for _ in range(4 * int(limit)):
            held.append(sharing.empty_shared(16, np.uint8))
    except OSError as e:
        error = str(e)
    fd_count = len(held)
    held.clear()
    sharing.set_sharing_strategy("file_system")
    many = [sharing.share_array(np.full(4, i)) for i in range(4 * int(limit))]
    q = sharing.get_context("fork").SimpleQueue()
    q.put(many[:50])
    back = q.get()
    report(fd_count=fd_count, error=error, fs_count=len(many),
           fs_aliases=all(sharing.storage_of(a) is sharing.storage_of(b) for a, b in zip(back, many)))


def descriptor_only() -> None:
    """Share arrays every way under file_descriptor; report what was mapped from where."""
    import numpy as np
    import sharing
    from sharing import manager_client
    from sharing_workers import add_one, echo
    arrays = [sharing.share_array(np.zeros(1000)) for _ in range(3)]
    for method in ("spawn", "fork"):
        ctx = sharing.get_context(method)
        inbox, outbox = ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=echo, args=(inbox, outbox))
        child.start()
        inbox.put(arrays)
        outbox.get()
        inbox.put(None)
        child.join()
        with ctx.Pool(2) as pool:
            pool.map(add_one, arrays)
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    # multiprocessing's own semaphores map /dev/shm/sem.* (already unlinked); nothing else may
    report(memfd=any("/memfd:hogshare_" in m for m in maps),
           dev_shm=[m for m in maps if "/dev/shm/" in m and "/dev/shm/sem." not in m],
           joined=manager_client.joined_group() is not None, values=[float(a[0]) for a in arrays])


def hold_and_wait(children: str) -> None:
    """A file_system group that holds segments here and in children, with a message never received.

    Everything uses the fork context, whose semaphores have no names, so that
    killing the whole program leaves nothing of multiprocessing's behind either.
    """
    import numpy as np
    import sharing
    from sharing import manager_client
    from sharing_workers import hold_received
    sharing.set_sharing_strategy("file_system")
    held = [sharing.share_array(np.ones(1000)) for _ in range(2)]
    ctx = sharing.get_context("fork")
    unread = ctx.Queue()
    unread.put(held[0])
    unread.close()
    unread.join_thread()
    inbox, ready = ctx.SimpleQueue(), ctx.SimpleQueue()
    procs = [ctx.Process(target=hold_received, args=(inbox, ready)) for _ in range(int(children))]
    for p in procs:
        p.start()
        inbox.put(held[1])
    for p in procs:
        ready.get()
    report(group=manager_client.joined_group(), pids=[p.pid for p in procs], socket=manager_client.socket_path())
    time.sleep(600)


def outlive_manager(start_methods: str) -> None:
    """A file_system group whose manager the test SIGKILLs (between two lines on stdin); then all exit normally.

    One child per start method receives two of this process's arrays and sends two of its own back; everyone
    holds what they have while the manager dies. Then a late spawn child joins a group and reports which.
    """
    import numpy as np
    import sharing
    from sharing import manager_client
    from sharing_workers import join_a_group, trade_until_told
    sharing.set_sharing_strategy("file_system")
    held = [sharing.share_array(np.ones(1 << 16)) for _ in range(2)]
    children = []
    for method in start_methods.split(","):
        ctx = sharing.get_context(method)
        inbox, outbox = ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=trade_until_told, args=(inbox, outbox))
        child.start()
        inbox.put(held)
        children.append((child, inbox, outbox.get(timeout=60)))
    report(group=manager_client.joined_group(), socket=manager_client.socket_path())
    sys.stdin.readline()
    ctx = sharing.get_context("spawn")
    outbox = ctx.Queue()
    late = ctx.Process(target=join_a_group, args=(outbox,))
    late.start()
    late_report = outbox.get(timeout=60)
    late.join()
    for child, inbox, _ in children:
        inbox.put("exit")
        child.join()
    report(late=late_report, exitcodes=[late.exitcode] + [child.exitcode for child, _, _ in children])


def orphan(mode: str, start_method: str) -> None:
    """Start a child (with `start_method`) that asks to die with its parent, report its pid, then linger ("armed") or exit ("early").

    "armed" waits until the child has asked, so only the kernel's parent-death
    signal can stop it; "early" exits before the child asks, so the child must
    notice on its own.
    """
    import multiprocessing
    from sharing_workers import die_with_parent_then_sleep
    ctx = multiprocessing.get_context(start_method)
    armed = ctx.Event()
    child = ctx.Process(target=die_with_parent_then_sleep, args=(armed, 0.0 if mode == "armed" else 0.5))
    child.start()
    if mode == "armed":
        armed.wait(60)
    report(child=child.pid, armed=armed.is_set())
    if mode == "armed":
        time.sleep(600)                          # the test kills this process
    os._exit(0)


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
