"""Benchmark: a shared array through `sharing`'s queues, against the queue floor, RingQueue and torch.

Measures, in one run on one machine:
  * the round trip of a shared float32 array (4 KiB, 4 MiB, 256 MiB, and 1 GiB when
    memory allows) to a spawn-started echo child and back, for both strategies,
    through a multiprocessing.Queue pair (what every context's Queue does once
    `sharing` is imported: the array travels as a handle) and through a
    sharing.RingQueue pair. The floor, a small tuple through a plain
    multiprocessing.Queue pair, is measured in the same loop: short blocks of
    each case in a shuffled turn, so that all of them share the machine's noise;
  * the first receipt: the round trip of an array the echo child has not seen,
    so that it opens the segment;
  * 4-to-1 and 1-to-4: time per message when four producers feed one consumer
    and one producer feeds four consumers, for the same queues (RingQueue also
    with put_many/get_many batches);
  * torch.multiprocessing's round trip (../shared/baselines/torch_queue_latency.py)
    and the plain floors (mp_queue_floor.py) as separate programs;
  * `share_array` of 256 MiB against `np.copyto` into a ready buffer, with the
    kernel's cost of fresh shared pages and torch's `share_memory_()` beside it.
Writes experiments/results/sharing.md, with the load average at the start and
the end. About two and a half minutes on two cores. Run: python -m experiments.bench_sharing
"""
from __future__ import annotations

import argparse
import os
import pickle
import random
import re
import statistics
import subprocess
import sys
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np

import sharing
from experiments.common import (BASELINES, TORCH_PYTHON, fmt_ratio, markdown_table, run_baseline,
                                torch_available, write_result)
from sharing import room

SIZES = {"4 KiB": 4 << 10, "4 MiB": 4 << 20, "256 MiB": 256 << 20, "1 GiB": 1 << 30}
STRATEGIES = ("file_descriptor", "file_system")
QUEUES = ("Queue", "RingQueue")
FLOOR_ITEM = ("shm_handle_name_xxxxxxxx", 0, (1024, 1024), (4096, 4), "<f4")  # as mp_queue_floor.py sends
TARGET_QUEUE, TARGET_RING, TARGET_TORCH, TARGET_BANDWIDTH = 1.2, 0.5, 1 / 5, 0.5
FIRST_RECEIPTS = 10  # fresh arrays per size for the first-receipt figure (one for the sizes of 256 MiB and up)
FAN, FAN_MESSAGES = 4, 2048  # processes on the wide side, messages per process (a multiple of BATCH)
BATCH = 32
BLOCK = 25  # round trips of one case in a row: the same message again and again, as a worker sends its parameters
TIMEOUT_S = 120  # a message this late means a worker died: fail rather than hang
CONTROL_US = 4.0  # the control message's busy wait on each side of a hop: about what a handle's reduce and rebuild take


def busy_wait(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


class Control:
    """A control message: its reducer and its rebuild each busy-wait CONTROL_US, as long as a handle's work there.

    Through the same pair as the arrays, it shows what a fixed amount of extra
    Python per hop costs each queue, apart from anything `sharing` does.
    """

    def __reduce__(self):
        busy_wait(CONTROL_US)
        return rebuild_control, ()


def rebuild_control() -> Control:
    busy_wait(CONTROL_US)
    return Control()


def handle_cost_in_a_loop(strategy: str, reps: int = 20000) -> float:
    """Seconds per hop that ForkingPickler's dumps and loads of a shared array take beyond the floor's tuple's,
    in a loop in one process (warm caches, no queue)."""
    sharing.set_sharing_strategy(strategy)
    array = sharing.empty_shared(1024, np.float32)

    def hop_seconds(item) -> float:
        start = time.perf_counter()
        for _ in range(reps):
            pickle.loads(ForkingPickler.dumps(item))
        return (time.perf_counter() - start) / reps
    hop_seconds(array)
    return min(hop_seconds(array) for _ in range(3)) - min(hop_seconds(FLOOR_ITEM) for _ in range(3))


def echo(inbox, outbox) -> None:
    while (item := inbox.get()) is not None:
        outbox.put(item)


def make_queue(ctx, kind: str):
    return ctx.Queue() if kind == "Queue" else sharing.RingQueue()


def timed_round_trip(pair, item) -> float:
    inbox, outbox = pair
    start = time.perf_counter()
    inbox.put(item)
    outbox.get(timeout=TIMEOUT_S)
    return time.perf_counter() - start


def sizes_that_fit(strategy: str) -> dict[str, int]:
    """The sizes whose array leaves half the room there is (1 GiB needs 2 GiB free, for instance)."""
    free, _ = room.system_room(strategy)
    return {label: n for label, n in SIZES.items() if 2 * n <= free}


def round_trips(strategy: str, reps: int) -> tuple[dict, dict]:
    """Median round trips and first receipts (seconds) by (queue, size label), plus the floors by queue."""
    sharing.set_sharing_strategy(strategy)
    ctx = sharing.get_context("spawn")
    pairs = {kind: (make_queue(ctx, kind), make_queue(ctx, kind)) for kind in QUEUES}
    children = [ctx.Process(target=echo, args=pair, daemon=True) for pair in pairs.values()]
    for child in children:
        child.start()
    arrays = {label: sharing.empty_shared(n // 4, np.float32) for label, n in sizes_that_fit(strategy).items()}
    first: dict[tuple[str, str], list[float]] = {}
    for kind, pair in pairs.items():
        timed_round_trip(pair, FLOOR_ITEM)  # the child is up
        for label, array in arrays.items():
            fresh = [array] + [sharing.empty_shared(array.shape, array.dtype)
                               for _ in range(FIRST_RECEIPTS - 1 if array.nbytes < 1 << 28 else 0)]
            first[kind, label] = [timed_round_trip(pair, a) for a in fresh]
            del fresh
    cases = [(kind, label, item) for kind in QUEUES
             for label, item in [("floor", FLOOR_ITEM), ("control", Control()), *arrays.items()]]
    times: dict[tuple[str, str], list[float]] = {(kind, label): [] for kind, label, _ in cases}
    order = random.Random(0)
    for visit in range(1 + reps // BLOCK):  # the first visit warms up
        order.shuffle(cases)
        for kind, label, item in cases:
            block = [timed_round_trip(pairs[kind], item) for _ in range(BLOCK)]
            if visit:
                times[kind, label] += block
    for inbox, _ in pairs.values():
        inbox.put(None)
    for child in children:
        child.join()
    medians = {key: statistics.median(t) for key, t in times.items()}
    return medians, {key: statistics.median(t) for key, t in first.items()}


# --- 4-to-1 and 1-to-4 -----------------------------------------------------------------------------------

def fan_in_producer(queue, strategy: str, shared: bool, batch: int, start, finished) -> None:
    """Put FAN_MESSAGES messages (a shared 4 KiB array, or the floor's tuple) once `start` is set; stay until
    `finished` (a file_descriptor sender must outlive its messages)."""
    sharing.set_sharing_strategy(strategy)
    item = sharing.empty_shared(1024, np.float32) if shared else FLOOR_ITEM
    start.wait()
    for _ in range(FAN_MESSAGES // batch):
        queue.put_many([item] * batch) if batch > 1 else queue.put(item)
    finished.wait()


def fan_out_consumer(queue, batch: int, done) -> None:
    """Get messages until a None (one comes last for each consumer: a batch's others go back); report how many."""
    count = 0
    while True:
        got = queue.get_many(max_messages=batch) if batch > 1 else [queue.get()]
        end = next((i for i, item in enumerate(got) if item is None), None)
        if end is not None:
            for other in got[end + 1:]:
                queue.put(other)
            done.put(count + end)
            return
        count += len(got)


def fan(pattern: str, kind: str, strategy: str, shared: bool, batch: int) -> float:
    """Seconds per message for FAN producers into one consumer ("4-to-1") or one producer into FAN consumers."""
    sharing.set_sharing_strategy(strategy)
    ctx = sharing.get_context("forkserver")
    queue, start, finished, done = make_queue(ctx, kind), ctx.Event(), ctx.Event(), ctx.Queue()
    total = FAN * FAN_MESSAGES
    if pattern == "4-to-1":
        workers = [ctx.Process(target=fan_in_producer, args=(queue, strategy, shared, batch, start, finished),
                               daemon=True) for _ in range(FAN)]
    else:
        workers = [ctx.Process(target=fan_out_consumer, args=(queue, batch, done), daemon=True) for _ in range(FAN)]
    for worker in workers:
        worker.start()
    if pattern == "4-to-1":
        time.sleep(0.5)  # the producers are up and waiting on `start`
        began = time.perf_counter()
        start.set()
        received = 0
        while received < total:
            received += (len(queue.get_many(timeout=TIMEOUT_S, max_messages=batch)) if batch > 1
                         else queue.get(timeout=TIMEOUT_S) is not None)
        elapsed = time.perf_counter() - began
        finished.set()
    else:
        item = sharing.empty_shared(1024, np.float32) if shared else FLOOR_ITEM
        time.sleep(0.5)  # the consumers are up and waiting
        began = time.perf_counter()
        for _ in range(total // batch):
            queue.put_many([item] * batch) if batch > 1 else queue.put(item)
        for _ in workers:
            queue.put(None)
        received = sum(done.get(timeout=TIMEOUT_S) for _ in workers)
        elapsed = time.perf_counter() - began
        assert received == total, (received, total)
    for worker in workers:
        worker.join()
    return elapsed / total


def fans() -> dict[tuple[str, str, str], float]:
    """Seconds per message by (pattern, case, strategy): the floor, Queue, RingQueue, RingQueue in batches."""
    out = {}
    for pattern in ("4-to-1", "1-to-4"):
        out[pattern, "floor", "-"] = fan(pattern, "Queue", "file_descriptor", False, 1)
        for strategy in STRATEGIES:
            for case, kind, batch in (("Queue", "Queue", 1), ("RingQueue", "RingQueue", 1),
                                      (f"RingQueue, batches of {BATCH}", "RingQueue", BATCH)):
                out[pattern, case, strategy] = fan(pattern, kind, strategy, True, batch)
    return out


# --- references and bandwidth ----------------------------------------------------------------------------

def bandwidth(nbytes: int, reps: int) -> dict[str, float]:
    """Median GB/s, for `nbytes`, of share_array, of np.copyto into a ready buffer, and of
    empty_shared (the kernel's cost of fresh shared pages: allocated, zeroed, mapped)."""
    sharing.set_sharing_strategy("file_descriptor")
    source = np.random.default_rng(0).random(nbytes // 8)
    target = np.empty_like(source)
    target[:] = 0
    runs = {"share_array": lambda: sharing.share_array(source), "np.copyto": lambda: np.copyto(target, source),
            "empty_shared": lambda: sharing.empty_shared(source.shape, source.dtype)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            start = time.perf_counter()
            run()  # the result is dropped at once, so each share_array starts from fresh pages
            times[name].append(time.perf_counter() - start)
    return {name: nbytes / statistics.median(t) / 1e9 for name, t in times.items()}


TORCH_SHARE = """
import statistics, sys, time, torch
n = int(sys.argv[1]) // 4
source = torch.rand(n)
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    source.clone().share_memory_()
    times.append(time.perf_counter() - start)
clone = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    source.clone()
    clone.append(time.perf_counter() - start)
print(statistics.median(times) - statistics.median(clone))
"""


def torch_share_bandwidth(nbytes: int, reps: int) -> float | None:
    """GB/s of torch's share_memory_() of a CPU tensor (its clone's time taken out); None without torch."""
    if not torch_available():
        return None
    done = subprocess.run([TORCH_PYTHON, "-c", TORCH_SHARE, str(nbytes), str(reps)], capture_output=True,
                          text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return nbytes / float(done.stdout.split()[-1]) / 1e9


def torch_round_trips() -> dict[tuple[str, int], float]:
    """torch's median round trips (seconds) by (strategy, bytes); empty without torch."""
    if not torch_available():
        return {}
    out = run_baseline("torch_queue_latency.py")
    found = re.findall(r"torch (\w+)\s+(\d+) B\s+rtt_median=\s*([\d.]+) us", out)
    return {(s, int(n)): float(us) / 1e6 for s, n, us in found}


def queue_floors() -> dict[str, float]:
    """The plain multiprocessing Queue / SimpleQueue round trip of a small tuple (seconds), as its own program."""
    done = subprocess.run([sys.executable, str(BASELINES / "mp_queue_floor.py")], capture_output=True, text=True,
                          check=True)
    return {kind: float(us) / 1e6 for kind, us in re.findall(r"plain mp\.(\w+) handle rtt_median=([\d.]+) us",
                                                              done.stdout)}


# --- the report -------------------------------------------------------------------------------------------

def pages_note(gbs: dict[str, float | None]) -> str:
    """What the bandwidth table says of making the pages: `empty_shared`'s share of `share_array`'s time, and
    torch's copy against `empty_shared` alone."""
    pages, ours, torch = gbs["empty_shared"], gbs["share_array"], gbs["torch share_memory_"]
    text = f"Making the pages takes {ours / pages:.0%} of `share_array`'s time here"
    if torch is None:
        return text + "."
    return text + (f"; torch's whole copy runs at {torch / pages:.1f}x the rate of `empty_shared` alone"
                   + (", so its pages cost it less than `empty_shared`'s cost hogshare." if torch > pages else "."))


def us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.0f}"


def middle(values: list[float]) -> float:
    return statistics.median(values)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="round trips per case and round (default 1000)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each measuring ours, the floor and torch; figures are the medians of the "
                             "rounds' medians (default 3)")
    args = parser.parse_args()
    load_before, began = load(), time.monotonic()

    per_round: dict[tuple, list[float]] = {}       # (strategy, queue, label) -> a median per round
    ratios: dict[tuple, list[float]] = {}          # (strategy, queue, label) -> its floor ratio per round
    first: dict[tuple, list[float]] = {}
    theirs: dict[tuple[str, int], list[float]] = {}
    floors: dict[str, list[float]] = {}
    in_a_loop: dict[str, list[float]] = {}
    for _ in range(args.rounds):  # interleaved, so that ours and the references share the machine's noise
        for kind, t in queue_floors().items():
            floors.setdefault(kind, []).append(t)
        for strategy in STRATEGIES:
            in_a_loop.setdefault(strategy, []).append(handle_cost_in_a_loop(strategy))
            medians, firsts = round_trips(strategy, args.reps)
            for (kind, label), t in medians.items():
                per_round.setdefault((strategy, kind, label), []).append(t)
                ratios.setdefault((strategy, kind, label), []).append(t / medians["Queue", "floor"])
            for (kind, label), t in firsts.items():
                first.setdefault((strategy, kind, label), []).append(t)
        for key, t in torch_round_trips().items():
            theirs.setdefault(key, []).append(t)
        print(f"round done, {time.monotonic() - began:.0f} s", flush=True)
    fan_results = fans()
    gbs = bandwidth(SIZES["256 MiB"], reps=5)
    gbs["torch share_memory_"] = torch_share_bandwidth(SIZES["256 MiB"], reps=5)
    load_after, seconds = load(), time.monotonic() - began

    rt = {key: middle(v) for key, v in per_round.items()}
    ratio = {key: middle(v) for key, v in ratios.items()}
    torch_rt = {key: middle(v) for key, v in theirs.items()}
    labels = [label for label in SIZES if any((s, "Queue", label) in rt for s in STRATEGIES)]
    rows = []
    for s in STRATEGIES:
        for label in labels:
            if (s, "Queue", label) not in rt:
                continue
            torch_t = torch_rt.get((s, SIZES[label]))
            rows.append([s, label, us(rt[s, "Queue", "floor"]), us(rt[s, "Queue", label]),
                         f"{ratio[s, 'Queue', label]:.2f}x", us(rt[s, "RingQueue", label]),
                         f"{ratio[s, 'RingQueue', label]:.2f}x", us(torch_t), fmt_ratio(rt[s, "Queue", label], torch_t),
                         us(middle(first[s, "Queue", label])), us(middle(first[s, "RingQueue", label]))])
    table = markdown_table(["strategy", "size", "floor (us)", "Queue (us)", "Queue / floor", "RingQueue (us)",
                            "RingQueue / floor", "torch (us)", "Queue / torch", "first receipt, Queue (us)",
                            "first receipt, RingQueue (us)"], rows)
    ring_tuple = {s: ratio[s, "RingQueue", "floor"] for s in STRATEGIES}
    handle_cost = {(s, kind): middle([rt[s, kind, label] - rt[s, kind, "floor"] for label in labels
                                      if (s, kind, label) in rt]) for s in STRATEGIES for kind in QUEUES}
    fan_floor = {p: fan_results[p, "floor", "-"] for p in ("4-to-1", "1-to-4")}
    fan_rows = [[pattern, case, strategy, us(t), f"{t / fan_floor[pattern]:.2f}x"]
                for (pattern, case, strategy), t in fan_results.items()]

    worst_queue = max(v for (s, kind, label), v in ratio.items() if kind == "Queue" and label in SIZES)
    worst_ring = max(v for (s, kind, label), v in ratio.items() if kind == "RingQueue" and label in SIZES)
    control_cost = {(s, kind): rt[s, kind, "control"] - rt[s, kind, "floor"] for s in STRATEGIES for kind in QUEUES}
    amplification = {key: cost / (4 * CONTROL_US * 1e-6) for key, cost in control_cost.items()}
    budget = {s: (TARGET_QUEUE - 1) * rt[s, "Queue", "floor"] / (2 * amplification[s, "Queue"]) for s in STRATEGIES}
    torch_ratios = [rt[s, "Queue", label] / torch_rt[s, SIZES[label]] for s in STRATEGIES for label in labels
                    if (s, SIZES[label]) in torch_rt and (s, "Queue", label) in rt]
    worst_torch = max(torch_ratios, default=None)
    share_ratio = gbs["share_array"] / gbs["np.copyto"]
    checks = markdown_table(["target", "measured (worst case)", "met"], [
        [f"Queue round trip <= {TARGET_QUEUE}x the floor, every size", f"{worst_queue:.2f}x",
         worst_queue <= TARGET_QUEUE],
        [f"RingQueue round trip <= {TARGET_RING}x the floor, every size", f"{worst_ring:.2f}x",
         worst_ring <= TARGET_RING],
        ["Queue round trip <= 1/5 of torch's", "n/a" if worst_torch is None else f"{worst_torch:.2f}x",
         "n/a" if worst_torch is None else worst_torch <= TARGET_TORCH],
        ["share_array(256 MiB) >= 50% of np.copyto", f"{share_ratio:.0%}", share_ratio >= TARGET_BANDWIDTH],
    ])
    floor_note = ", ".join(f"mp.{k} {middle(v) * 1e6:.0f} us" for k, v in floors.items())
    path = write_result("sharing", "Sharing: queue round trips and share_array bandwidth", [
        f"Load average (1/5/15 min) {load_before} at the start, {load_after} at the end; {seconds:.0f} s in all.",
        "## Round trip of a shared array",
        "Median round trip of a shared float32 array to a spawn-started echo child and back, through a "
        "`multiprocessing.Queue` pair (any context's Queue: importing `sharing` makes the array a handle) and "
        "through a `sharing.RingQueue` pair. The floor is a 5-tuple through a plain `multiprocessing.Queue` pair, "
        f"timed in the same loop as the arrays: blocks of {BLOCK} round trips of one case (the same message again "
        "and again), the blocks of every case taken in turn in a shuffled order, so that all share the machine's "
        f"noise ({args.reps} round trips per case after one block each to warm up); ratios are taken within a "
        "round. "
        f"{args.rounds} rounds, each also running torch.multiprocessing (`torch_queue_latency.py`, 200 round "
        f"trips) and `mp_queue_floor.py` as separate programs ({floor_note}); every figure is the median of "
        "the rounds' medians. First receipt: the first round trip of an array the echo child has not seen, "
        f"so that it opens the segment (median of {FIRST_RECEIPTS} fresh arrays per round up to 4 MiB, of one "
        "above). A 5-tuple through the RingQueue pair costs "
        + ", ".join(f"{ring_tuple[s]:.2f}x the floor ({s})" for s in STRATEGIES) + ".",
        table,
        "Where the time goes: an array's row differs from the 5-tuple through the same pair only by the "
        "Python that turns the array into a handle and back, on each of the two hops: the reducer that "
        "ForkingPickler calls on the sender (cached handle, a lending ticket, the layout) and the rebuild on the "
        "receiver (a cache lookup, an acknowledgement, an ndarray); the size does not enter. Here that is "
        + "; ".join(f"{handle_cost[s, 'Queue'] * 1e6:.0f} us through the Queue pair and "
                    f"{handle_cost[s, 'RingQueue'] * 1e6:.0f} us through the RingQueue pair ({s})"
                    for s in STRATEGIES) + " per round trip (median over the sizes). In a loop in one process "
        "(ForkingPickler's dumps and loads, warm caches, no queue) the same work takes "
        + ", ".join(f"{middle(in_a_loop[s]) * 1e6:.1f} us per hop ({s})" for s in STRATEGIES) + ". "
        f"The control message, timed in the same turn as the arrays, busy-waits {CONTROL_US:.0f} us in its "
        f"reducer and {CONTROL_US:.0f} us in its rebuild ({4 * CONTROL_US:.0f} us per round trip) and touches "
        "nothing of `sharing`; it costs "
        + "; ".join(f"{control_cost[s, 'Queue'] * 1e6:.0f} us more than the tuple through the Queue pair and "
                    f"{control_cost[s, 'RingQueue'] * 1e6:.0f} us through the RingQueue pair ({s})"
                    for s in STRATEGIES) + ". "
        "So a pipe queue, whose receivers sleep in a read between messages, pays for each microsecond of "
        "per-message Python "
        + ", ".join(f"{amplification[s, 'Queue']:.1f} times ({s})" for s in STRATEGIES)
        + ", the RingQueue, whose receivers watch the ring before they sleep, "
        + ", ".join(f"{amplification[s, 'RingQueue']:.1f} times ({s})" for s in STRATEGIES)
        + f". At that rate the Queue's target ({TARGET_QUEUE}x the floor) leaves the handle "
        + ", ".join(f"{budget[s] * 1e6:.1f} us per hop in a loop ({s})" for s in STRATEGIES)
        + ", against the figures above.",
        "## Many to one, one to many",
        f"Time per message, {FAN} producer processes into one consumer (4-to-1) and one producer into {FAN} "
        f"consumers (1-to-4), {FAN * FAN_MESSAGES} messages in all (forkserver); the message is a shared 4 KiB "
        f"array, or the floor's 5-tuple through `multiprocessing.Queue`. The batched RingQueue rows put and get "
        f"{BATCH} messages per call (`put_many`, `get_many`).",
        markdown_table(["pattern", "queue", "strategy", "us per message", "vs floor"], fan_rows),
        "## share_array bandwidth",
        "Bandwidth for 256 MiB (median of 5): `share_array` makes fresh shared pages and copies into them; "
        "`empty_shared` only makes the pages (the kernel allocates, zeroes and maps each 4 KiB page); torch's "
        "`share_memory_()` makes shared pages and copies into them too (its clone's time taken out). "
        + pages_note(gbs),
        markdown_table(["operation", "GB/s", "vs np.copyto"],
                       [[name, "n/a" if v is None else f"{v:.2f}", "n/a" if v is None else f"{v / gbs['np.copyto']:.0%}"]
                        for name, v in gbs.items()]),
        "## Targets",
        checks,
    ])
    print(f"wrote {path} in {seconds:.0f} s (load {load_before} -> {load_after})")


if __name__ == "__main__":
    main()
