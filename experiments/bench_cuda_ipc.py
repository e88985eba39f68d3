"""Round trip of a CUDA array through a queue: hogshare's CUDA IPC (CuPy) against PyTorch's, in the same run.

One round trip: the parent puts a device array on a queue; a spawned child
gets it (opens the IPC handle, waits on the producer's event, builds a view),
drops it (which waits for the child's stream, closes the handle and gives back
the producer's reference count) and answers with the element count on a second
queue. The same array is sent every time, 4 KiB to 1 GiB. Each side runs in
a subprocess of its own so that neither library's CUDA state affects the
other. Needs a CUDA device; without one it says so and exits.

    python -m experiments.bench_cuda_ipc [--reps N]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any, Callable

from experiments.common import REPO, fmt_ratio, markdown_table, median_round_trip, write_result

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]
FLOOR = 0  # the row for a plain int through the same queues: what any handle-passing scheme pays


def _echo(inbox: Any, outbox: Any) -> None:
    while (item := inbox.get()) is not None:
        count = item if isinstance(item, int) else _count(item)
        del item
        outbox.put(count)


def _count(array: Any) -> int:
    return int(array.numel()) if hasattr(array, "numel") else int(array.size)


def _measure(context: Any, make: Callable[[int], Any], reps: int) -> dict[int, float]:
    inbox, outbox = context.Queue(), context.Queue()
    child = context.Process(target=_echo, args=(inbox, outbox))
    child.start()
    medians = {FLOOR: median_round_trip(inbox, outbox, 1, reps, warmup=3)}
    for nbytes in SIZES:
        array = make(nbytes)
        medians[nbytes] = median_round_trip(inbox, outbox, array, max(5, reps // 5) if nbytes >= 1 << 28 else reps,
                                            warmup=3)
        del array
    inbox.put(None)
    child.join(60)
    return medians


def side_hogshare(reps: int) -> dict[int, float]:
    """Medians (seconds) through a sharing queue, CuPy arrays as CUDA IPC handles."""
    import cuda_ipc
    import sharing

    if not cuda_ipc.is_available():
        raise SystemExit(3)
    import cupy

    medians = _measure(sharing.get_context("spawn"), lambda n: cupy.zeros(n // 4, dtype=cupy.float32), reps)
    cuda_ipc.ipc_collect()
    return medians


def side_torch(reps: int) -> dict[int, float]:
    """Medians (seconds) through a torch.multiprocessing queue, CUDA tensors as torch's IPC handles."""
    try:
        import torch
        import torch.multiprocessing as tmp
    except ImportError:
        raise SystemExit(3)
    if not torch.cuda.is_available():
        raise SystemExit(3)
    medians = _measure(tmp.get_context("spawn"), lambda n: torch.zeros(n // 4, device="cuda:0"), reps)
    torch.cuda.ipc_collect()
    return medians


def _run_side(side: str, reps: int) -> dict[int, float] | None:
    done = subprocess.run([sys.executable, "-m", "experiments.bench_cuda_ipc", "--side", side, "--reps", str(reps)],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    if done.returncode == 3:
        return None
    if done.returncode != 0:
        raise RuntimeError(f"the {side} side failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _label(nbytes: int) -> str:
    if nbytes == FLOOR:
        return "int (queue floor)"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def _versions() -> str:
    probe = ("import cupy, sys\n"
             "name = cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()\n"
             "try:\n    import torch; t = torch.__version__\nexcept ImportError:\n    t = 'not installed'\n"
             "print(f'{name}; CuPy {cupy.__version__}; torch {t}')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=100, help="timed round trips per size (default 100)")
    parser.add_argument("--side", choices=["hogshare", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reps < 1:
        parser.error(f"--reps must be at least 1, got {args.reps}")
    if args.side:
        measure = side_hogshare if args.side == "hogshare" else side_torch
        print(json.dumps(measure(args.reps)))
        return
    ours = _run_side("hogshare", args.reps)
    if ours is None:
        print("bench_cuda_ipc: no CUDA device here (CuPy missing or cuda_ipc.is_available() is False); "
              "nothing measured, no result written.")
        return
    theirs = _run_side("torch", args.reps)
    rows = []
    for nbytes in [FLOOR, *SIZES]:
        reference = theirs[nbytes] if theirs else None
        rows.append([_label(nbytes), f"{ours[nbytes] * 1e6:.1f}",
                     f"{reference * 1e6:.1f}" if reference else "n/a", fmt_ratio(ours[nbytes], reference)])
        print(f"{rows[-1][0]:>18}: hogshare {rows[-1][1]:>9} us  torch {rows[-1][2]:>9} us  ratio {rows[-1][3]}",
              flush=True)
    table = markdown_table(["payload", "hogshare median us", "torch median us", "hogshare / torch"], rows)
    notes = (f"Device and libraries: {_versions()}. Median of {args.reps} round trips per size "
             f"({max(5, args.reps // 5)} from 256 MiB up), after 3 warm-up trips. A round trip: put on a spawn "
             "queue, the child receives (opens the handle, waits on the event), drops the array (waits for its "
             "stream, closes the handle, releases the count) and answers with a small int. torch: n/a when torch with "
             "CUDA is not importable.")
    path = write_result("cuda_ipc", "CUDA IPC round trip: hogshare (CuPy) vs torch", [notes, table])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
