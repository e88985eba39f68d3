"""Benchmark: round trip of a shared array through a `sharing` Queue, and the cost of `share_array`.

Measures, in one run on one machine:
  * the median round trip of a shared float32 array (4 KiB, 4 MiB, 256 MiB)
    through a Queue pair to a spawn-started echo child, for both strategies;
  * the same for torch.multiprocessing (../shared/baselines/torch_queue_latency.py)
    and for a plain tuple through multiprocessing queues (mp_queue_floor.py), the
    floor any handle-passing scheme pays;
  * `share_array` of 256 MiB against `np.copyto` into a ready buffer, with the
    kernel's cost of fresh shared pages (allocation alone, no copy) and torch's
    `share_memory_()` of the same size beside it.
Writes experiments/results/sharing.md. Run: python experiments/bench_sharing.py
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import sharing
from common import (BASELINES, TORCH_PYTHON, fmt_ratio, markdown_table, median_round_trip, run_baseline, torch_available,
                    write_result)

SIZES = {"4 KiB": 4 << 10, "4 MiB": 4 << 20, "256 MiB": 256 << 20}
STRATEGIES = ("file_descriptor", "file_system")
TARGET_TORCH, TARGET_FLOOR, TARGET_SIZE, TARGET_BANDWIDTH = 1 / 5, 2.0, 1.5, 0.5


def echo(inbox, outbox) -> None:
    while (item := inbox.get()) is not None:
        outbox.put(item)


def round_trip(strategy: str, nbytes: int, reps: int) -> float:
    """Median seconds to put a shared array to an echo child and get it back."""
    sharing.set_sharing_strategy(strategy)
    ctx = sharing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=echo, args=(inbox, outbox))
    child.start()
    array = sharing.empty_shared(nbytes // 4, np.float32)
    inbox.put(array)
    assert sharing.storage_of(outbox.get()) is sharing.storage_of(array)
    median = median_round_trip(inbox, outbox, array, reps)
    inbox.put(None)
    child.join()
    return median


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
    """The plain multiprocessing Queue / SimpleQueue round trip of a small tuple (seconds)."""
    if torch_available():
        out = run_baseline("mp_queue_floor.py")
    else:  # the floor needs no torch: run it with this interpreter
        out = subprocess.run([sys.executable, str(BASELINES / "mp_queue_floor.py")], capture_output=True,
                             text=True, check=True).stdout
    return {kind: float(us) / 1e6 for kind, us in re.findall(r"plain mp\.(\w+) handle rtt_median=([\d.]+) us", out)}


def keep_lowest(best: dict, new: dict) -> None:
    """Fold one round's medians into `best`, keeping the lowest per key."""
    for key, value in new.items():
        best[key] = min(value, best.get(key, value))


def us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="round trips per size and round (default 200)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each measuring ours and the references; the lowest median counts (default 3)")
    args = parser.parse_args()

    ours: dict[tuple[str, int], float] = {}
    floors: dict[str, float] = {}
    theirs: dict[tuple[str, int], float] = {}
    for _ in range(args.rounds):  # interleaved, so that ours and the references share the machine's noise
        keep_lowest(floors, queue_floors())
        keep_lowest(ours, {(s, n): round_trip(s, n, args.reps) for s in STRATEGIES for n in SIZES.values()})
        keep_lowest(theirs, torch_round_trips())
    for (s, n), t in ours.items():
        print(f"sharing {s:16s} {n:>10d} B  rtt_median={t * 1e6:8.1f} us", flush=True)
    gbs = bandwidth(SIZES["256 MiB"], reps=5)
    gbs["torch share_memory_"] = torch_share_bandwidth(SIZES["256 MiB"], reps=5)
    print("256 MiB: " + ", ".join(f"{k} {'n/a' if v is None else f'{v:.2f}'} GB/s" for k, v in gbs.items()),
          flush=True)
    share_ratio = gbs["share_array"] / gbs["np.copyto"]
    floor = floors.get("Queue")

    rows = []
    for s in STRATEGIES:
        for label, n in SIZES.items():
            t = ours[(s, n)]
            rows.append([s, label, us(t), us(theirs.get((s, n))), fmt_ratio(t, theirs.get((s, n))), us(floor),
                         fmt_ratio(t, floor), fmt_ratio(t, ours[(s, SIZES["4 KiB"])])])
    table = markdown_table(["strategy", "size", "sharing (us)", "torch (us)", "sharing / torch",
                            "mp.Queue floor (us)", "sharing / floor", "vs 4 KiB"], rows)
    worst_torch = max((ours[k] / theirs[k] for k in ours if k in theirs), default=None)
    worst_floor = max(t / floor for t in ours.values()) if floor else None
    worst_size = max(ours[(s, SIZES["256 MiB"])] / ours[(s, SIZES["4 KiB"])] for s in STRATEGIES)
    checks = markdown_table(["target", "measured (worst case)", "met"], [
        ["round trip <= 1/5 of torch's", "n/a" if worst_torch is None else f"{worst_torch:.2f}x",
         "n/a" if worst_torch is None else worst_torch <= TARGET_TORCH],
        ["round trip <= 2x the mp.Queue floor", "n/a" if worst_floor is None else f"{worst_floor:.2f}x",
         "n/a" if worst_floor is None else worst_floor <= TARGET_FLOOR],
        ["256 MiB within 1.5x of 4 KiB", f"{worst_size:.2f}x", worst_size <= TARGET_SIZE],
        ["share_array(256 MiB) >= 50% of np.copyto", f"{share_ratio:.0%}", share_ratio >= TARGET_BANDWIDTH],
    ])
    floor_note = ", ".join(f"mp.{k} {v * 1e6:.0f} us" for k, v in floors.items())
    path = write_result("sharing", "Sharing: queue round trip and share_array bandwidth", [
        "Median round trip of a shared float32 array put on a `sharing` Queue to a spawn-started echo child "
        f"and back ({args.reps} round trips after 10 warm-up ones), against torch.multiprocessing "
        "(`torch_queue_latency.py`) and the plain multiprocessing floor for a small tuple "
        f"(`mp_queue_floor.py`: {floor_note}), all measured in this run: {args.rounds} rounds, each measuring "
        "all of them in turn, and each figure the lowest of its medians.",
        table,
        "Bandwidth for 256 MiB (median of 5): `share_array` makes fresh shared pages and copies into them; "
        "`empty_shared` only makes the pages (the kernel allocates, zeroes and maps each 4 KiB page, the floor "
        "under any shared copy); torch's `share_memory_()` does the same work as `share_array` (its clone's "
        "time taken out).",
        markdown_table(["operation", "GB/s", "vs np.copyto"],
                       [[name, "n/a" if v is None else f"{v:.2f}", "n/a" if v is None else f"{v / gbs['np.copyto']:.0%}"]
                        for name, v in gbs.items()]),
        checks,
    ])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
