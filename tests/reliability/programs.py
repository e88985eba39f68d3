"""Programs the reliability tests run as their own processes (own rlimits, own manager group).

Run as ``python programs.py NAME ARGS...``; each reports one JSON line on stdout.
"""
import json
import os
import queue as queue_module
import signal
import sys
import time

import numpy as np

import sharing
from sharing import lifecycle, manager_client


def report(**values) -> None:
    print(json.dumps(values), flush=True)


def _names(prefix: str) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def _sum_arrays(queue, results, count: int) -> None:
    total = 0
    for _ in range(count):
        total += int(queue.get().sum())
    results.put(total)


def many_storages(strategy: str, count: str) -> None:
    """Make `count` small shared arrays, then send them all to a spawned child that sums them."""
    count = int(count)
    sharing.set_sharing_strategy(strategy)
    arrays = []
    try:
        for i in range(count):
            arrays.append(sharing.share_array(np.full(16, i, np.int64)))
    except OSError as exc:
        report(ok=False, made=len(arrays), errno=exc.errno, error=str(exc))
        return
    ctx = sharing.get_context("spawn")
    queue, results = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_sum_arrays, args=(queue, results, count), daemon=True)
    child.start()
    for a in arrays:
        queue.put(a)
    total = results.get(timeout=120)
    child.join(60)
    report(ok=True, made=len(arrays), total=total, expected=16 * count * (count - 1) // 2, child_exit=child.exitcode)


def _hold(queue, status, count: int) -> None:
    """Receive `count` arrays, keep them, say so, and wait to be killed."""
    held = [queue.get() for _ in range(count)]
    group, client = manager_client.membership() if manager_client.joined_group() else (None, None)
    status.put({"group": group, "client": client, "held": len(held), "sum": float(sum(a.sum() for a in held))})
    time.sleep(600)


def _add_one(queue, results) -> None:
    """Add 1 in place to every array received until None; report how many."""
    count = 0
    while (a := queue.get()) is not None:
        a += 1
        count += 1
    results.put(count)


def consumer_dies(strategy: str, start_method: str) -> None:
    """A consumer is SIGKILLed while it holds 8 received arrays (4 more wait on its queue, never received);
    the producer then drops its copies and goes on sharing arrays with a second consumer."""
    sharing.set_sharing_strategy(strategy)
    ctx = sharing.get_context(start_method)
    doomed_queue, status = ctx.Queue(), ctx.Queue()
    doomed = ctx.Process(target=_hold, args=(doomed_queue, status, 8), daemon=True)
    doomed.start()
    sent = [sharing.share_array(np.full(1000, float(i))) for i in range(12)]
    for a in sent:
        doomed_queue.put(a)
    held = status.get(timeout=60)
    named = held["group"] is not None
    doomed_prefix = f"hogshare_{held['group']}_c{held['client']}_"
    doomed_names_before = len(_names(doomed_prefix)) if named else None
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(30)
    deadline = time.monotonic() + 10
    while named and _names(doomed_prefix) and time.monotonic() < deadline:
        time.sleep(0.05)
    doomed_names_after = len(_names(doomed_prefix)) if named else None
    del sent

    work_queue, results = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=_add_one, args=(work_queue, results), daemon=True)
    worker.start()
    fresh = [sharing.share_array(np.full(1000, float(i))) for i in range(20)]
    for a in fresh:
        work_queue.put(a)
    work_queue.put(None)
    processed = results.get(timeout=60)
    worker.join(30)
    report(group=manager_client.joined_group(), held=held, doomed_exit=doomed.exitcode,
           doomed_names_before=doomed_names_before,
           doomed_names_after=doomed_names_after, processed=processed, worker_exit=worker.exitcode,
           aliased=all(bool((a == i + 1).all()) for i, a in enumerate(fresh)))


def _ready_then_sleep(rank: int, ready) -> None:
    ready.put(rank)
    time.sleep(600)


def spawn_and_wait(start_method: str) -> None:
    """Start two children with sharing.spawn, report their pids once both run, and wait to be killed."""
    ready = sharing.get_context(start_method).SimpleQueue()
    context = sharing.spawn(_ready_then_sleep, args=(ready,), nprocs=2, join=False, start_method=start_method)
    for _ in context.processes:
        ready.get()
    report(children=[p.pid for p in context.processes])
    time.sleep(600)


def hold_segments() -> None:
    """Hold 20 file_system storages and one file_descriptor storage; report their names and descriptor; wait
    until stdin closes."""
    sharing.set_sharing_strategy("file_system")
    named = [sharing.share_array(np.arange(8.0)) for _ in range(20)]
    sharing.set_sharing_strategy("file_descriptor")
    anonymous = sharing.share_array(np.arange(8.0))
    report(pid=os.getpid(), names=[sharing.storage_of(a).name for a in named],
           fd=sharing.storage_of(anonymous).fd, socket=manager_client.socket_path())
    sys.stdin.read()


def _put_and_get_under_interrupts(ring, flags) -> None:
    """Put and get in a loop until flags[0] is set, catching KeyboardInterrupt (SIGINT) and going on; count the
    interrupts in flags[2] and the rounds in flags[3]; then stay alive (as a process holding the lock would).

    SIGINT is unblocked only inside the `try`, and the sender sends the next one only once this process has
    counted the last: so every interrupt lands inside the `try` and none kills the process."""
    flags[1] = 1
    while not flags[0]:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
            ring.put(("hammered", 0), timeout=0.2)
            ring.get_many(timeout=0.2)
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
            flags[3] += 1
        except KeyboardInterrupt:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
            flags[2] += 1
        except (queue_module.Empty, queue_module.Full):
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    flags[1] = 2
    time.sleep(600)


def ring_under_sigint(start_method: str, seconds: str) -> None:
    """A process puts and gets on a RingQueue while SIGINT hits it, again as soon as it took the last one (after
    0 to 200 us), for `seconds`; then, the hammered process still alive, this one puts 200 messages and gets
    each back."""
    ctx = sharing.get_context(start_method)
    ring = sharing.RingQueue(capacity_bytes=4096)
    flags = sharing.empty_shared(4, np.int64)  # stop, phase, interrupts, rounds: no lock a signal could break
    with lifecycle.signals_blocked([signal.SIGINT]):  # the child starts with SIGINT blocked
        hammered = ctx.Process(target=_put_and_get_under_interrupts, args=(ring, flags), daemon=True)
        hammered.start()
    while flags[1] != 1:
        time.sleep(0.01)
    end = time.monotonic() + float(seconds)
    sent = 0
    rng = np.random.default_rng(0)
    while time.monotonic() < end:
        counted = flags[2]
        os.kill(hammered.pid, signal.SIGINT)
        sent += 1
        taken_by = time.monotonic() + 1.0  # an interrupt swallowed (raised inside a __del__) is not counted
        while flags[2] == counted and time.monotonic() < taken_by:
            pass
        time.sleep(rng.uniform(0, 200e-6))
    flags[0] = 1
    deadline = time.monotonic() + 30
    while flags[1] != 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    got, errors = [], []
    try:
        for i in range(200):
            ring.put(("checker", i), timeout=10)
            while (item := ring.get(timeout=10))[0] != "checker":
                pass  # what the hammered process left: a put it was interrupted out of after the commit
            got.append(item[1])
    except (queue_module.Empty, queue_module.Full) as exc:
        errors.append(f"{type(exc).__name__} after {len(got)} messages")
    hammered_alive = hammered.is_alive()
    hammered.kill()
    hammered.join(30)
    report(sent=sent, interrupts=int(flags[2]), rounds=int(flags[3]), quiet=bool(flags[1] == 2), alive=hammered_alive,
           got=got, left=ring.qsize(), errors=errors)


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
