"""Functions the sharing tests run in child processes (importable by spawn and forkserver children)."""
from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

import sharing


def write_through_views(strategy: str, inbox, outbox, arg_array: np.ndarray) -> None:
    """Receive [x, x[:, 1]] and write through both; send views back; send one array twice."""
    sharing.set_sharing_strategy(strategy)
    arg_array += 1                               # a process argument aliases the parent's array
    x, column = inbox.get()
    x[0, 0] = 100.0                              # through the array
    column[2] = 200.0                            # through the view (x[2, 1])
    outbox.put(("written", sharing.storage_of(x) is sharing.storage_of(column)))
    y = sharing.share_array(np.arange(24, dtype=np.int32).reshape(4, 6))
    outbox.put((y, y))                           # one message, same array twice
    outbox.put(y)                                # another message, same storage
    outbox.put([y.T, y[::-1, ::2], y[1:3].reshape(-1), y[:, 4]])
    outbox.put(sharing.empty_shared((0, 3), np.float32))
    assert inbox.get() == "done"


def echo(inbox, outbox) -> None:
    """Send back whatever arrives until None."""
    while (item := inbox.get()) is not None:
        outbox.put(item)


def add_one(a: np.ndarray) -> int:
    """Pool task: increment a shared array in place, return the pid that did it."""
    a += 1
    return os.getpid()


def wait_for_exit(pid: int, timeout: float = 60.0) -> None:
    """Return once process `pid` has exited (a zombie counts: its descriptors are gone), or after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    return
        except (FileNotFoundError, ProcessLookupError):  # gone; reaped between the open and the read
            return
        time.sleep(0.02)


class AfterSenderExit:
    """Unpickles only once the process that pickled it has exited: what follows it in a message arrives after."""

    def __reduce__(self):
        return wait_for_exit, (os.getpid(),)


def raise_process_lookup_error() -> None:
    """What reading /proc of a process reaped a moment ago raises: an OSError, from an object's own unpickling."""
    raise ProcessLookupError(3, "No such process")


class UnpicklesWithOSError:
    """Raises an OSError where it is unpickled (the parent, for a pool result)."""

    def __reduce__(self):
        return raise_process_lookup_error, ()


def result_that_cannot_be_unpickled(value: float) -> tuple:
    """Pool task: a result whose unpickling in the parent raises an OSError."""
    return UnpicklesWithOSError(), value


def shared_result_after_exit(value: float) -> tuple:
    """Pool task (maxtasksperchild=1): a file_descriptor array that the parent opens only after this worker exited."""
    sharing.set_sharing_strategy("file_descriptor")
    return AfterSenderExit(), sharing.share_array(np.full(4, value))


def sum_received(inbox, outbox) -> None:
    """Receive one array and send back its sum."""
    outbox.put(float(inbox.get().sum()))


def send_and_exit(strategy: str, outbox, value: float) -> None:
    """Send a fresh shared array, drop it, and exit before anyone received it."""
    sharing.set_sharing_strategy(strategy)
    outbox.put(sharing.share_array(np.full(1000, value)))
    outbox.close()
    outbox.join_thread()                         # the message is in the pipe; now exit


def fork_write(a: np.ndarray) -> None:
    """Fork child: write in place to an inherited shared array."""
    a[:] = 7


def fork_send_inherited(a: np.ndarray, outbox, received) -> None:
    """Fork child: send an array inherited from the parent; stay until it was received."""
    outbox.put(a[1:])
    received.wait(60)


# --- spawn() targets: fn(rank, *args) ---------------------------------------------------------------

def rank_writer(rank: int, out: np.ndarray) -> None:
    out[rank] = rank + 10


def raise_on(rank: int, bad_rank: int, pids: np.ndarray) -> None:
    pids[rank] = os.getpid()
    if rank == bad_rank:
        time.sleep(0.2)
        raise ValueError(f"rank {rank} failed on purpose")
    time.sleep(120)


def kill_self(rank: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def exit_with(rank: int, code: int) -> None:
    sys.exit(code)


def ignore_sigterm_forever(ignoring) -> None:
    """Ignore SIGTERM, say so (set the event `ignoring`), then live on."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ignoring.set()
    while True:
        time.sleep(1)


def sleep_forever() -> None:
    while True:
        time.sleep(1)


def die_with_parent_then_sleep(armed, delay: float) -> None:
    """Wait `delay` seconds, ask to die with the parent, say so, then live on."""
    from sharing import lifecycle
    time.sleep(delay)
    lifecycle.die_with_parent()
    armed.set()
    sleep_forever()


def report_mask_then_ignore(report) -> None:
    """Say which signals this process began with blocked, ignore SIGINT and SIGHUP (lifecycle), say so, live on."""
    from sharing import lifecycle
    with open("/proc/thread-self/status") as f:
        blocked = int(next(line for line in f if line.startswith("SigBlk:")).split()[1], 16)
    report.put(blocked)
    lifecycle.ignore_signals((signal.SIGINT, signal.SIGHUP))
    report.put("ignoring")
    sleep_forever()


HELD: list[np.ndarray] = []  # what a worker keeps for its lifetime, as a training worker keeps its model


def trade_until_told(inbox, outbox) -> None:
    """file_system: receive arrays, send back arrays of this process's own, keep both for good; exit when told."""
    sharing.set_sharing_strategy("file_system")
    HELD.extend(inbox.get())
    HELD.extend(sharing.share_array(np.full(1 << 16, 2.0)) for _ in range(2))
    outbox.put(HELD[2:])
    assert inbox.get() == "exit"


def join_a_group(outbox) -> None:
    """file_system: share an array, then report the manager this process was pointed to, and the one it joined."""
    from sharing import manager_client
    pointed_to = os.environ.get(manager_client.MANAGER_ENV)
    sharing.set_sharing_strategy("file_system")
    held = sharing.share_array(np.ones(16))
    outbox.put({"pointed_to": pointed_to, "pointed_to_left": os.path.exists(os.path.dirname(pointed_to)),
                "group": manager_client.joined_group(), "socket": manager_client.socket_path(), "held": len(held)})


def hold_forever(array: np.ndarray, ready) -> None:
    """Keep a received array and say so."""
    ready.put(os.getpid())
    sleep_forever()


def hold_received(inbox, ready) -> None:
    """Receive an array, make one of its own, keep both and say so."""
    arrays = [inbox.get(), sharing.share_array(np.ones(10))]
    ready.put(os.getpid())
    sleep_forever()


def send_inherited_after_parent_released(a: np.ndarray, released, outbox) -> None:
    """Fork child: wait until the parent dropped its array, then try to send the inherited one."""
    released.wait(30)
    try:
        outbox.put(a)
        outbox.close()
        outbox.join_thread()
    except RuntimeError as e:
        outbox.put(str(e))


# --- queue contract and kill targets (a queue is a multiprocessing.Queue or a sharing.RingQueue) -----------

def put_after(queue, delay: float, item) -> None:
    """Sleep, then put `item`."""
    time.sleep(delay)
    queue.put(item)


def take(queue, count: int, outbox) -> None:
    """Get `count` items (one call each) and report them on `outbox`."""
    outbox.put([queue.get(timeout=60) for _ in range(count)])


def produce(queue, name: str, count: int) -> None:
    """Put (name, 0), (name, 1), ... (name, count - 1)."""
    for i in range(count):
        queue.put((name, i))


def consume_until_none(queue, outbox, many: bool) -> None:
    """Get items (in batches with get_many when `many`) until a None arrives; report them all.

    The Nones come last, one per consumer: a batch's further Nones go back for the others.
    """
    got = []
    while True:
        batch = queue.get_many(timeout=60) if many else [queue.get(timeout=60)]
        if None in batch:
            end = batch.index(None)
            got += batch[:end]
            for other in batch[end + 1:]:
                queue.put(other)
            break
        got += batch
    outbox.put(got)


class _StopMidCopy:
    """A RingQueue's ring that stops at its `nth` copy in or out (a copy in after writing half the bytes),
    says so and hangs, the queue's mutex held: where a kill mid-message strikes."""

    def __init__(self, ring: memoryview, stuck, nth: int) -> None:
        self.ring, self.stuck, self.left = ring, stuck, nth

    def _arrive(self) -> bool:
        self.left -= 1
        return self.left == 0

    def _hang(self) -> None:
        self.stuck.set()
        sleep_forever()

    def __setitem__(self, where: slice, data) -> None:
        if not self._arrive():
            self.ring[where] = data
            return
        half = len(data) // 2
        self.ring[where.start:where.start + half] = memoryview(data)[:half]
        self._hang()

    def __getitem__(self, where: slice) -> memoryview:
        if self._arrive():
            self._hang()
        return self.ring[where]


def put_stopping_mid_message(queue, item, stuck) -> None:
    """Start putting `item` and hang halfway through copying it into the ring."""
    queue._ring = _StopMidCopy(queue._ring, stuck, 1)
    queue.put(item)


def get_stopping_mid_message(queue, stuck) -> None:
    """Start getting a message and hang halfway through copying it out (after its length)."""
    queue._ring = _StopMidCopy(queue._ring, stuck, 2)
    queue.get()


def hold_lock(lock, held) -> None:
    """Take `lock`, say so, and keep it until killed."""
    lock.acquire()
    held.set()
    while True:
        time.sleep(60)
