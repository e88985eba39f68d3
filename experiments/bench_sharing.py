"""Benchmark: round trip of a shared array through a `sharing` Queue, and the cost of `share_array`.

Measures, in one run on one machine:
  * the median round trip of a shared float32 array (4 KiB, 4 MiB, 256 MiB)
    through a Queue pair to a spawn-started echo child, for both strategies;
  * the same for torch.multiprocessing (../shared/baselines/torch_queue_latency.py)
    and for a plain tuple through multiprocessing queues (mp_queue_floor.py), the
    floor any handle-passing scheme pays;
  * `share_array` of 256 MiB against `np.copyto` into a ready buffer.
Writes experiments/results/sharing.md. Run: python experiments/bench_sharing.py
"""
from __future__ import annotations

import argparse
import re
import statistics
import time

import numpy as np

import sharing
from common import fmt_ratio, markdown_table, run_baseline, torch_available, write_result

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
    for _ in range(10):
        inbox.put(array)
        back = outbox.get()
    assert sharing.storage_of(back) is sharing.storage_of(array)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        inbox.put(array)
        outbox.get()
        times.append(time.perf_counter() - start)
    inbox.put(None)
    child.join()
    return statistics.median(times)


def bandwidth(nbytes: int, reps: int) -> tuple[float, float]:
    """Median GB/s of share_array and of np.copyto into an already touched buffer, for `nbytes`."""
    sharing.set_sharing_strategy("file_descriptor")
    source = np.random.default_rng(0).random(nbytes // 8)
    target = np.empty_like(source)
    target[:] = 0
    share_times, copy_times = [], []
    for _ in range(reps):
        start = time.perf_counter()
        shared = sharing.share_array(source)
        share_times.append(time.perf_counter() - start)
        del shared
        start = time.perf_counter()
        np.copyto(target, source)
        copy_times.append(time.perf_counter() - start)
    return nbytes / statistics.median(share_times) / 1e9, nbytes / statistics.median(copy_times) / 1e9


def torch_round_trips() -> dict[tuple[str, int], float]:
    """torch's median round trips (seconds) by (strategy, bytes); empty without torch."""
    if not torch_available():
        return {}
    out = run_baseline("torch_queue_latency.py")
    found = re.findall(r"torch (\w+)\s+(\d+) B\s+rtt_median=\s*([\d.]+) us", out)
    return {(s, int(n)): float(us) / 1e6 for s, n, us in found}


def queue_floors() -> dict[str, float]:
    """The plain multiprocessing Queue / SimpleQueue round trip of a small tuple (seconds)."""
    out = run_baseline("mp_queue_floor.py") if torch_available() else ""
    if not out:  # the floor needs no torch: run it with this interpreter
        import subprocess
        import sys
        from common import BASELINES
        out = subprocess.run([sys.executable, str(BASELINES / "mp_queue_floor.py")], capture_output=True,
                             text=True, check=True).stdout
    return {kind: float(us) / 1e6 for kind, us in re.findall(r"plain mp\.(\w+) handle rtt_median=([\d.]+) us", out)}


def us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="round trips per size (default 200)")
    args = parser.parse_args()

    ours = {(s, n): round_trip(s, n, args.reps) for s in STRATEGIES for n in SIZES.values()}
    for (s, n), t in ours.items():
        print(f"sharing {s:16s} {n:>10d} B  rtt_median={t * 1e6:8.1f} us", flush=True)
    share_gbs, copy_gbs = bandwidth(SIZES["256 MiB"], reps=5)
    print(f"share_array 256 MiB {share_gbs:.2f} GB/s, np.copyto {copy_gbs:.2f} GB/s", flush=True)
    floors = queue_floors()
    theirs = torch_round_trips()
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
        ["share_array(256 MiB) >= 50% of np.copyto", f"{share_gbs / copy_gbs:.0%}",
         share_gbs / copy_gbs >= TARGET_BANDWIDTH],
    ])
    floor_note = ", ".join(f"mp.{k} {v * 1e6:.0f} us" for k, v in floors.items())
    path = write_result("sharing", "Sharing: queue round trip and share_array bandwidth", [
        "Median round trip of a shared float32 array put on a `sharing` Queue to a spawn-started echo child "
        f"and back ({args.reps} round trips after 10 warm-up ones), against torch.multiprocessing "
        "(`torch_queue_latency.py`) and the plain multiprocessing floor for a small tuple "
        f"(`mp_queue_floor.py`: {floor_note}), all measured in this run.",
        table,
        f"`share_array` of 256 MiB (allocate, back and copy): {share_gbs:.2f} GB/s; `np.copyto` into a "
        f"ready buffer: {copy_gbs:.2f} GB/s ({share_gbs / copy_gbs:.0%}).",
        checks,
    ])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
