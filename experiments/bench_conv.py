"""Convolution speed: the A3C paper's Atari network and the Nature CNN, forward and forward + backward, in GFLOP/s
on one thread, against NumPy's matmul on the same GEMM shapes and PyTorch's CPU convolution, measured in one run.

Sides, each a process of its own kept for the whole run (common.Side), take turns case by case, so that a change
in the machine's load hits them alike: this checkout's framework (and, with --baseline, another checkout's, e.g.
the commit before a change), NumPy's matmul alone on the GEMMs the networks' layers are made of (im2col's
shapes: the GEMM rate the machine gives NumPy, with no convolution around it), and PyTorch
(experiments/torch_conv_reference.py, run with HOGSHARE_TORCH_PYTHON; skipped with a note where torch is not
installed). Each figure is the fastest call of a side over the rounds (the machine is shared: the fastest call
is the one least disturbed).

FLOPs: 2 * M * N * K per GEMM of im2col's shapes (a convolution: M = out channels, K = in channels * kh * kw, N =
batch * OH * OW; a Linear: its matrix product); forward + backward is three times the forward's GEMM FLOPs, less
the first layer's input gradient, which no one needs (the frames are uint8). The A3C network reads uint8 frames
as [0, 1] (framework.rl.model.FrameConv2d, what training runs), the Nature CNN reads them as their values.

Also in conv.md: cProfile of this checkout's A3C network at a batch of 40, and (--train-seconds, needs py-spy)
py-spy's view of an actor and a learner of `train --env ALE/Pong-v5`.

usage: python -m experiments.bench_conv [--rounds R] [--seconds S] [--baseline DIR [--baseline-label TEXT]]
                                        [--train-seconds T]     (writes experiments/results/conv.md and conv.png)

A side of a checkout is this module run in that checkout's folder (`--serve`), so that it imports that
checkout's framework; --baseline needs a checkout whose workers keep freed memory (`keep_freed_memory`).
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread on every side, as each worker runs

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: E402

import numpy as np  # noqa: E402

from experiments.common import (REPO, TORCH_PYTHON, Side, best_time, conv_body, load,  # noqa: E402
                                markdown_table, profile_table, serve, torch_available, write_result)

NETWORKS: Dict[str, Dict[str, Any]] = {
    "a3c": {"frames": 4, "convs": [[16, 8, 4], [32, 4, 2]], "hidden": [256], "heads": [6, 1], "scale": 1 / 255},
    "nature": {"frames": 4, "convs": [[32, 8, 4], [64, 4, 2], [64, 3, 1]], "hidden": [512], "heads": [6],
               "scale": 1.0},
}
"""Each network as (out, kernel, stride) convolutions with ReLUs, hidden Linear+ReLU layers and Linear heads."""
LABELS = {"a3c": "A3C paper's network (16x8x8/4, 32x4x4/2, 2592-256, heads 6 and 1)",
          "nature": "Nature CNN (32x8x8/4, 64x4x4/2, 64x3x3/1, 3136-512, head 6)"}
BATCHES = (8, 40, 256)
MODES = ("forward", "forward+backward")
GOALS = {"forward": 110.0, "forward+backward": 100.0}
"""GFLOP/s each network should reach at a batch of 40, on a quiet machine."""
GOAL_BATCH = 40
QUIET_LOAD = 1.5
"""The highest 1-minute load average of a quiet machine during the rounds: the side being timed counts about 1."""


# ---- the networks' GEMMs --------------------------------------------------------------------------------------

def gemms(spec: Dict[str, Any], batch: int) -> Tuple[List[tuple], List[tuple]]:
    """The (M, K, N) GEMMs of a forward pass and of its backward pass, in im2col's shapes."""
    forward: List[tuple] = []
    backward: List[tuple] = []
    channels, side = spec["frames"], 84
    for index, (out, kernel, stride) in enumerate(spec["convs"]):
        side = (side - kernel) // stride + 1
        depth, positions = channels * kernel * kernel, batch * side * side
        forward.append((out, depth, positions))
        backward.append((out, positions, depth))          # weight gradient
        if index:
            backward.append((depth, out, positions))      # input gradient (not the frames')
        channels = out
    size = channels * side * side
    for width in spec["hidden"]:
        forward.append((batch, size, width))
        backward += [(width, batch, size), (batch, width, size)]  # weight and input gradients
        size = width
    for width in spec["heads"]:
        forward.append((batch, size, width))
        backward += [(width, batch, size), (batch, width, size)]
    return forward, backward


def gflop(spec: Dict[str, Any], batch: int) -> Dict[str, float]:
    """GFLOP of a forward pass and of a forward + backward pass (2 * M * N * K per GEMM)."""
    forward, backward = gemms(spec, batch)
    count = [sum(2 * m * k * n for m, k, n in shapes) / 1e9 for shapes in (forward, backward)]
    return {"forward": count[0], "forward+backward": count[0] + count[1]}


def gemm_calls(spec: Dict[str, Any], batch: int) -> Dict[str, List[Callable[[], Any]]]:
    """NumPy's matmul alone on preallocated operands of a network's GEMMs: one call per GEMM, by pass."""
    rng = np.random.default_rng(0)
    forward, backward = gemms(spec, batch)
    calls = [lambda a=rng.standard_normal((m, k), dtype=np.float32), b=rng.standard_normal((k, n), dtype=np.float32),
             out=np.empty((m, n), np.float32): np.matmul(a, b, out=out) for m, k, n in forward + backward]
    return {"forward": calls[:len(forward)], "forward+backward": calls}


# ---- one checkout's framework (run in a process of its own) ---------------------------------------------------

def build(name: str) -> Any:
    """The network in this process's framework: the A3C one as training builds it, the others as Sequentials."""
    import framework as F
    from framework import nn
    spec = NETWORKS[name]
    F.manual_seed(0)
    if name == "a3c":
        from framework.rl.model import ActorCritic
        return ActorCritic((spec["frames"], 84, 84), spec["hidden"], "relu", False, spec["heads"][0], False,
                           conv=[tuple(c) for c in spec["convs"]], uint8_frames=True)
    layers, size = conv_body(nn, spec)
    (head,) = spec["heads"]
    return nn.Sequential(*layers, nn.Linear(size, head))


def passes(model: Any, batch: int) -> Dict[str, Callable[[], None]]:
    """The forward (no autograd, as acting runs it) and forward + backward calls on a batch of uint8 frames."""
    import framework as F
    frames = F.tensor(np.random.default_rng(0).integers(0, 256, (batch, 4, 84, 84), dtype=np.uint8))
    params = list(model.parameters())

    def outputs() -> list:
        out = model(frames)
        return list(out[:2]) if isinstance(out, tuple) else [out]

    def forward() -> None:
        with F.no_grad():
            outputs()

    def forward_backward() -> None:
        for p in params:
            p.grad = None
        sum(o.sum() for o in outputs()).backward()
    return {"forward": forward, "forward+backward": forward_backward}


def serve_checkout() -> None:
    """Time cases on request (common.Side) with this process's framework, that of the checkout it runs in:
    requests {"kind": "network" or "gemm", "net", "batch", "mode", "seconds"} get {"seconds": the fastest call}
    (for "gemm", the sum over the pass's GEMMs of each one's fastest call), {"kind": "profile"} the profile
    tables."""
    from framework.train.backends.local import keep_freed_memory

    keep_freed_memory()  # the memory policy of the workers that run these networks
    models: Dict[str, Any] = {}
    made: Dict[tuple, Dict[str, Any]] = {}

    def handle(request: dict) -> dict:
        if request["kind"] == "profile":
            calls = passes(build("a3c"), GOAL_BATCH)
            return {"profile": {mode: profile_table(calls[mode], 100, top=14, warmup=3) for mode in MODES}}
        key = (request["kind"], request["net"], request["batch"])
        if key not in made:
            if request["kind"] == "gemm":
                made[key] = gemm_calls(NETWORKS[request["net"]], request["batch"])
            else:
                model = models.setdefault(request["net"], build(request["net"]))
                made[key] = passes(model, request["batch"])
        calls, seconds = made[key][request["mode"]], request["seconds"]
        if request["kind"] == "gemm":
            return {"seconds": sum(best_time(call, seconds / len(calls)) for call in calls)}
        return {"seconds": best_time(calls, seconds)}
    serve(handle)


def side_of(checkout: Path) -> Side:
    """This module serving in `checkout`'s folder, whose framework it then imports (its own experiments package
    where it has one, this checkout's otherwise)."""
    return Side([sys.executable, "-m", "experiments.bench_conv", "--serve"], cwd=checkout,
                env={**os.environ, "PYTHONPATH": str(REPO)})


# ---- py-spy's view of a training run --------------------------------------------------------------------------

def _descendants(pid: int) -> List[int]:
    parents: Dict[int, List[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def train_profile(checkout: Path, seconds: float, warmup: float = 25.0, top: int = 12) -> str:
    """py-spy's samples (idle included) of an actor and the learner of `train --env ALE/Pong-v5` run from
    `checkout`, over `seconds` after `warmup`, as tables of the functions that were running (a function's own
    time, where NumPy's and the emulator's C code count to the Python line that called them); a note instead
    where py-spy is missing."""
    spy = shutil.which("py-spy")
    if spy is None:
        return "py-spy is not installed here (pip install py-spy): no profile of a training run."
    logdir = Path(tempfile.mkdtemp(prefix="bench_conv_"))
    command = [sys.executable, "-m", "framework.train", "train", "--env", "ALE/Pong-v5", "--logdir", str(logdir),
               "--set", f"trainer.max_seconds={int(warmup + seconds + 60)}", "--set", "logging.progress=false"]
    run = subprocess.Popen(command, cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(warmup)
        recorders = []
        for pid in _descendants(run.pid):
            out = logdir / f"{pid}.txt"
            recorders.append((out, subprocess.Popen([spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                                                     "--rate", "100", "--idle", "--threads", "--nonblocking",
                                                     "--format", "raw",
                                                     "--output", str(out)], stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL)))
        for _, recorder in recorders:
            recorder.wait(timeout=seconds + 60)
        roles: Dict[str, Counter] = {}
        for out, _ in recorders:
            own, total = _own_time(out)
            role = "learner" if any("run_learner" in s for s in own.stacks) else \
                "actor" if any("run_worker" in s for s in own.stacks) else None
            if role is not None and role not in roles:  # one process of each role
                roles[role] = Counter({k: v / total for k, v in own.items()})
    finally:
        run.send_signal(signal.SIGINT)
        try:
            run.wait(timeout=120)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()
        summaries = [json.loads(path.read_text()) for path in logdir.glob("*/summary.json")]
        shutil.rmtree(logdir, ignore_errors=True)
    speed = "" if not summaries else (f" The run: {summaries[0]['env_steps']:,} env steps in "
                                      f"{summaries[0]['wall_seconds']:.0f} s, start-up and profiling included "
                                      f"({summaries[0]['env_steps'] / summaries[0]['wall_seconds']:,.0f} env steps/s).")
    parts = [f"`{' '.join(command[1:3] + command[3:5])}` (the config `--env` picks), {seconds:.0f} s of py-spy "
             f"samples of each process's main thread at 100 Hz after {warmup:.0f} s of warm-up, idle time included; "
             f"the share of samples in which each function was the innermost Python frame (`_sleep`: waiting for "
             f"a free trajectory slot or a full one; `select`: waiting on a pipe).{speed}", ""]
    for role in ("actor", "learner"):
        if role not in roles:
            parts.append(f"No {role} process was found.")
            continue
        rows = [[f"`{name}`", f"{share:.1%}"] for name, share in roles[role].most_common(top)]
        parts += [f"**{role}**", "", markdown_table(["function (file)", "share of samples"], rows), ""]
    return "\n".join(parts)


class _Samples(Counter):
    stacks: List[str]


def _own_time(path: Path) -> Tuple[_Samples, int]:
    """(samples by innermost function, all samples) of the main thread in a py-spy raw file ('thread (id):
    name;frame;... count' lines)."""
    own, total = _Samples(), 0
    own.stacks = []
    for line in path.read_text().splitlines() if path.exists() else []:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or stack.split(";")[0].rpartition(": ")[2] != "MainThread":
            continue
        own.stacks.append(stack)
        leaf = stack.split(";")[-1]
        function, _, where = leaf.partition(" (")
        own[f"{function} ({Path(where.split(':')[0]).name})"] += int(count)
        total += int(count)
    return own, max(total, 1)


# ---- the report -----------------------------------------------------------------------------------------------

def rate(name: str, batch: int, mode: str, seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else gflop(NETWORKS[name], batch)[mode] / seconds


def cell(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def plot(best: Dict[str, Dict[str, float]], path: Path, quiet: bool) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(NETWORKS), len(MODES), figsize=(11, 7), sharey="row")
    width = 0.8 / len(best)
    for row, name in enumerate(NETWORKS):
        for col, mode in enumerate(MODES):
            ax = axes[row][col]
            for i, (side, times) in enumerate(best.items()):
                values = [rate(name, b, mode, times.get(f"{name}/{b}/{mode}")) or 0 for b in BATCHES]
                ax.bar(np.arange(len(BATCHES)) + (i - (len(best) - 1) / 2) * width, values, width, label=side)
            if mode in GOALS:
                ax.axhline(GOALS[mode], color="black", linestyle=":", linewidth=1)
            ax.set_xticks(range(len(BATCHES)), [f"batch {b}" for b in BATCHES])
            ax.set_title(f"{name}: {mode}", fontsize=10)
            ax.set_ylabel("GFLOP/s")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Convolutional networks on one thread (dotted: the goal at a batch of 40"
                 + ("" if quiet else "; provisional figures, the machine under load") + ")", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds over the cases, every side timing each case in turn (default 5)")
    parser.add_argument("--seconds", type=float, default=0.5,
                        help="seconds of calls per case, side and round (default 0.5)")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure the same way (e.g. the commit "
                                                      "before a change, from `git worktree add`)")
    parser.add_argument("--baseline-label", help="its name in the tables (default: the folder's name)")
    parser.add_argument("--train-seconds", type=float, default=60.0,
                        help="seconds of py-spy samples of a `train --env ALE/Pong-v5` run (0: none; default 60)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # a side: time this checkout
    args = parser.parse_args()
    if args.serve:
        serve_checkout()
        return
    with_torch = torch_available()
    baseline_label = args.baseline_label or (args.baseline.name if args.baseline else None)
    processes = {"hogshare": side_of(REPO)}
    if args.baseline:
        processes[f"hogshare {baseline_label}"] = side_of(args.baseline.resolve())
    if with_torch:
        processes["PyTorch"] = Side([TORCH_PYTHON, "-m", "experiments.torch_conv_reference", json.dumps(NETWORKS)],
                                    env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=REPO)
    sides = [(label, process, "network") for label, process in processes.items()]
    sides.insert(1, ("NumPy matmul, same GEMMs", processes["hogshare"], "gemm"))
    cases = [(name, batch, mode) for name in NETWORKS for batch in BATCHES for mode in MODES]
    times: Dict[str, Dict[str, float]] = {label: {} for label, _, _ in sides}
    loads = []
    try:
        for round_index in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for case_index, (name, batch, mode) in enumerate(cases):
                key = f"{name}/{batch}/{mode}"
                turn = (round_index + case_index) % len(sides)  # who goes first moves, case by case
                for label, process, kind in sides[turn:] + sides[:turn]:
                    seconds = process.ask(kind=kind, net=name, batch=batch, mode=mode, seconds=args.seconds)["seconds"]
                    times[label][key] = min(times[label].get(key, float("inf")), seconds)
            print(f"round {round_index + 1}/{args.rounds} done ({load()})", flush=True)
        profiles = {label: process.ask(kind="profile")["profile"] for label, process in processes.items()
                    if label != "PyTorch"}
    finally:
        for process in processes.values():
            process.close()
    best = times
    header = ["network", "batch", "pass", "hogshare GFLOP/s (ms)"]
    if args.baseline:
        header += [f"hogshare {baseline_label}", "speed-up"]
    header += ["NumPy matmul, same GEMMs", "hogshare / NumPy matmul", "PyTorch", "hogshare / PyTorch"]
    rows, verdicts = [], []
    for name in NETWORKS:
        for batch in BATCHES:
            for mode in MODES:
                key = f"{name}/{batch}/{mode}"
                ours = rate(name, batch, mode, best["hogshare"][key])
                row = [name, batch, mode, f"{ours:.0f} ({best['hogshare'][key] * 1e3:.2f})"]
                if args.baseline:
                    before = best[f"hogshare {baseline_label}"][key]
                    row += [cell(rate(name, batch, mode, before)), f"{before / best['hogshare'][key]:.2f}x"]
                theirs = rate(name, batch, mode, best["PyTorch"][key]) if with_torch else None
                gemm = rate(name, batch, mode, best["NumPy matmul, same GEMMs"][key])
                row += [cell(gemm), f"{ours / gemm:.0%}", cell(theirs), "n/a" if theirs is None else f"{ours / theirs:.2f}x"]
                rows.append(row)
                if batch == GOAL_BATCH:
                    verdicts.append(f"- {name}, {mode}: {ours:.0f} GFLOP/s against the goal of {GOALS[mode]:.0f} "
                                    f"({'met' if ours >= GOALS[mode] else 'not met'} here): {ours / gemm:.0%} of "
                                    f"NumPy's matmul on the same GEMMs, which at that share would have to run at "
                                    f"{GOALS[mode] * gemm / ours:.0f} GFLOP/s for the goal ({gemm:.0f} here)")
    quiet = max(loads) < QUIET_LOAD
    plot(best, REPO / "experiments" / "results" / "conv.png", quiet)
    checkouts = {"hogshare": REPO, **({f"hogshare {baseline_label}": args.baseline} if args.baseline else {})}
    train_text = "\n\n".join(f"### {side}\n\n{train_profile(checkout, args.train_seconds)}"
                             for side, checkout in checkouts.items()) if args.train_seconds > 0 else \
        "Not run (--train-seconds 0)."
    flops_rows = [[name, batch] + [f"{gflop(spec, batch)[mode] * 1e3 / batch:.2f}" for mode in MODES]
                  for name, spec in NETWORKS.items() for batch in BATCHES[1:2]]
    write_result("conv", "Convolution: GFLOP/s of the Atari networks on one thread", [
        (f"Measured on a quiet machine: load average {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} "
         "cores during the rounds, the side being timed included." if quiet else
         "**Provisional figures.** Measured on a shared machine under load (load average "
         f"{min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores during the rounds): the sides take turns "
         "case by case and each figure is a side's fastest call, so the ratios hold better than the absolute "
         "rates; the final figures are to be rerun on a quiet machine."),
        "## What is measured",
        "- " + "\n- ".join(f"`{name}`: {LABELS[name]}" for name in NETWORKS),
        "- forward: a batch of uint8 frames (4 x 84 x 84) through the network without autograd, as acting runs "
        "it; forward+backward: with autograd, then backward from the sum of the outputs into every parameter.",
        "- FLOPs: 2 * M * N * K per GEMM of im2col's shapes (a convolution: M = out channels, K = in channels * "
        "kh * kw, N = batch * OH * OW; a Linear: its matrix product). Forward + backward counts three times the "
        "forward's GEMM FLOPs, less the first layer's input gradient (the frames need none). MFLOP per sample: "
        + ", ".join(f"{r[0]} {r[2]} forward, {r[3]} forward+backward" for r in flops_rows) + ".",
        "- NumPy matmul, same GEMMs: `np.matmul` alone on preallocated float32 operands of exactly those GEMMs "
        "(the weight gradient and input gradient of each layer included): the rate this machine's NumPy gives "
        "these shapes, with no convolution around it.",
        f"- PyTorch: {'torch ' if with_torch else ''}CPU convolution of the same network on one thread "
        "(`experiments/torch_conv_reference.py`" + ("" if with_torch else "; torch is not installed here: n/a")
        + "), frames converted to float inside the timed call as here.",
        f"- {args.rounds} rounds of {args.seconds:g} s per case and side, the sides taking turns case by case; one "
        "BLAS/OpenMP thread everywhere; this "
        "checkout's side keeps freed memory as workers do (`keep_freed_memory`)."
        + (f" `{baseline_label}`: the checkout given as --baseline (`git worktree add DIR COMMIT` makes one), "
           "measured the same way." if args.baseline else ""),
        "## GFLOP/s", markdown_table(header, rows),
        f"Goal at a batch of {GOAL_BATCH} (forward >= {GOALS['forward']:.0f}, forward+backward >= "
        f"{GOALS['forward+backward']:.0f} GFLOP/s, on a quiet machine):", "\n".join(verdicts),
        "![GFLOP/s by batch](conv.png)",
        f"## Where the time goes: the A3C network at a batch of {GOAL_BATCH}",
        "cProfile over 100 calls, the functions by own time (NumPy's and BLAS's C code counts to the Python "
        "function that called it).",
        *[f"**{side}, {mode}**\n\n```\n{profile[mode]}\n```" for side, profile in profiles.items() for mode in MODES],
        "## Where the time goes: training Pong", train_text,
    ])


if __name__ == "__main__":
    main()
