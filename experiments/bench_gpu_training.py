"""Training with the shared model on a GPU (`trainer.device: cuda:0`) against the CPU path, in the same run.

Each workload runs `train` for the same number of seconds on `cpu` and on
`cuda:0`, one after the other, with 2 spawn workers. Rates are steady-state
ones: the median of the run's `perf/updates_per_s` and `perf/env_steps_per_s`
TensorBoard scalars (logged every 0.5 s) without the intervals that saw the
workers start or stop, so that CUDA's start-up cost does not count. Before
its measured runs, each workload runs unmeasured on `cuda:0` for
--warmup-seconds: CuPy compiles each kernel the first time a machine runs it
(its cache is ~/.cupy/kernel_cache), which on a fresh machine kept the first
A3C run on cuda:0 from making its first update for 12 s:

- A3C on CartPole-v1 (`configs/a3c.yaml`: 128-unit MLP, 4 envs per worker,
  n-step 20, shared Adam): updates/s and env steps/s;
- Hogwild on the MNIST-shaped teacher task (`configs/hogwild_mlp.yaml`:
  784-128-10 MLP, batch 64, per-worker SGD): updates/s and samples/s;
- the same Hogwild task with a wide MLP (784-1024-1024-10, batch 512), where
  the device's arithmetic, not per-step overhead, dominates;
- A3C on Atari Pong (`configs/a3c_pong.yaml`: the A3C paper's convolutional
  network, 8 games per worker, n-step 5), where the convolutions' forward and
  backward passes dominate; only where ale-py is installed (the `atari` extra).

Needs a CUDA device with CuPy; without one it says so and exits without
measuring or writing anything.

usage: python -m experiments.bench_gpu_training [--seconds 20] [--warmup-seconds 20]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from experiments.common import REPO, fmt_ratio, markdown_table, write_result

TRAIN = [sys.executable, "-m", "framework.train", "train"]
DEVICES = ("cpu", "cuda:0")
COMMON = ("trainer.workers=2", "trainer.start_method=spawn", "logging.progress=false", "logging.log_every_s=0.5",
          "logging.histogram_every=0")
HOGWILD = ("trainer.eval_every_s=0", "algorithm.target_accuracy=null")
WORKLOADS = {  # name: (config, overrides, what env_steps counts)
    "A3C CartPole-v1, MLP 128": (
        "a3c.yaml", ("trainer.target_return=null", "trainer.total_steps=1000000000"), "env steps/s"),
    "Hogwild MLP 784-128-10, batch 64": ("hogwild_mlp.yaml", HOGWILD, "samples/s"),
    "Hogwild MLP 784-1024-1024-10, batch 512": (
        "hogwild_mlp.yaml", (*HOGWILD, "model.hidden=[1024,1024]", "algorithm.batch_size=512"), "samples/s"),
    "A3C Atari Pong, A3C paper's conv net": (
        "a3c_pong.yaml", ("trainer.target_return=null", "trainer.total_steps=1000000000"), "env steps/s"),
}
NEEDS = {"A3C Atari Pong, A3C paper's conv net": "ale_py"}
"""workload: the module it needs beyond the core dependencies (the workload is left out without it)."""


def run_train(config: str, device: str, seconds: float, overrides: tuple[str, ...]) -> tuple[float, float]:
    """Run `train` on configs/<config> on device for `seconds`; its steady (updates/s, env steps or samples/s).
    RuntimeError naming the device when the run fails or has no steady interval."""
    with tempfile.TemporaryDirectory() as logdir:
        args = ["--config", str(REPO / "configs" / config), "--logdir", logdir]
        for item in (*COMMON, f"trainer.device={device}", f"trainer.max_seconds={seconds}", *overrides):
            args += ["--set", item]
        done = subprocess.run([*TRAIN, *args], capture_output=True, text=True, cwd=REPO,
                              timeout=seconds + 180)
        if done.returncode != 0:
            raise RuntimeError(f"train {config} on {device} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        (run_dir,) = Path(logdir).iterdir()
        try:
            return steady_rates(run_dir)
        except RuntimeError as err:
            raise RuntimeError(f"on {device}: {err}") from None


def steady_rates(run_dir: Path) -> tuple[float, float]:
    """Median updates/s and env steps/s of a run's logging intervals, leaving out the interval in which the
    first update landed (it began before the workers had started) and the last one (it holds the shutdown)."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    updates = [e.value for e in acc.Scalars("perf/updates_per_s")]
    steps = [e.value for e in acc.Scalars("perf/env_steps_per_s")]
    first = next((i for i, value in enumerate(updates) if value > 0), len(updates))
    steady = slice(first + 1, len(updates) - 1)
    if not updates[steady]:
        summary = json.loads((run_dir / "summary.json").read_text())
        raise RuntimeError(f"{run_dir.name}: no logging interval between the workers' start and the end of the "
                           f"run (updates/s per interval: {[round(u) for u in updates]}; stop reason "
                           f"{summary.get('stop_reason')!r} after {summary.get('wall_seconds')} s)")
    return statistics.median(updates[steady]), statistics.median(steps[steady])


def device_line() -> str:
    """The GPU's name and the CuPy version (CuPy is importable when this is called)."""
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return f"{name.decode() if isinstance(name, bytes) else name}, CuPy {cupy.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per run (default 20)")
    parser.add_argument("--warmup-seconds", type=float, default=20.0,
                        help="an unmeasured run on cuda:0 before each workload's measured ones (default 20; 0: none)")
    args = parser.parse_args()
    if args.seconds <= 0 or args.warmup_seconds < 0:
        parser.error(f"--seconds must be positive and --warmup-seconds not negative, got {args.seconds} and "
                     f"{args.warmup_seconds}")
    from framework.device import cuda_device_count
    if cuda_device_count() == 0:
        print("bench_gpu_training: no CUDA device here (CuPy missing or cuda_ipc.is_available() is False); "
              "nothing measured, no result written.")
        return
    rows, failures = [], []
    for name, (config, overrides, unit) in WORKLOADS.items():
        if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
            print(f"{name}: left out, {NEEDS[name]} is not installed")
            continue
        try:
            if args.warmup_seconds > 0:
                run_train(config, "cuda:0", args.warmup_seconds, overrides)
            measured = {device: run_train(config, device, args.seconds, overrides) for device in DEVICES}
        except RuntimeError as err:  # the other workloads are still measured; the run fails at the end
            print(f"{name}: not measured: {err}", flush=True)
            failures.append(f"{name}: {err}")
            continue
        (cpu_updates, cpu_items), (gpu_updates, gpu_items) = measured["cpu"], measured["cuda:0"]
        rows.append([name, "updates/s", f"{cpu_updates:,.0f}", f"{gpu_updates:,.0f}",
                     fmt_ratio(gpu_updates, cpu_updates)])
        rows.append([name, unit, f"{cpu_items:,.0f}", f"{gpu_items:,.0f}", fmt_ratio(gpu_items, cpu_items)])
        for row in rows[-2:]:
            print(f"{row[0]}: {row[1]} cpu {row[2]}, cuda:0 {row[3]} ({row[4]})", flush=True)
    table = markdown_table(["workload", "rate", "cpu", "cuda:0", "cuda:0 / cpu"], rows)
    warmup = (f"after an unmeasured {args.warmup_seconds:g}-s run on cuda:0 that fills CuPy's kernel cache"
              if args.warmup_seconds > 0 else "with CuPy's kernel cache as the machine had it (no warm-up run)")
    notes = (f"Device: {device_line()}. Every run: 2 spawn workers, {args.seconds:g} s, {warmup}; rates are "
             "medians over 0.5 s logging intervals once the workers run (start-up and shutdown left out). On cuda:0 "
             "the shared parameters and optimizer state live in GPU "
             "memory (sent to the workers as CUDA IPC handles); each A3C step copies the batch of observations "
             "to the GPU and the sampled actions back, each Hogwild step copies its minibatch to the GPU.")
    missing = ["Not measured: " + "; ".join(failures) + "."] if failures else []
    path = write_result("gpu_training", "Training with the shared model on the GPU against the CPU path",
                        [notes, table, *missing])
    print(f"wrote {path}")
    if failures:
        raise SystemExit(f"bench_gpu_training: {len(failures)} workload(s) not measured")


if __name__ == "__main__":
    main()
