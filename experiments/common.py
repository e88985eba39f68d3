"""Shared plumbing for the benchmarks: the PyTorch reference programs, runs and their profiles, result files.

The reference programs live in ``../shared/baselines`` (next to the checkout)
and run in a separate virtual environment that has torch installed; set
``HOGSHARE_TORCH_PYTHON`` to its interpreter (default ``/tmp/torchbase/bin/python``,
the one ``../shared/baselines/README.md`` creates). Where a run's time goes
comes from the run itself (summary.json's `profile`, see `run_profile`), not
from benchmarks reaching into a worker.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "experiments" / "results"
BASELINES = Path(os.environ.get("HOGSHARE_BASELINES", REPO.parent / "shared" / "baselines"))
TORCH_PYTHON = os.environ.get("HOGSHARE_TORCH_PYTHON", "/tmp/torchbase/bin/python")


def torch_available(*modules: str) -> bool:
    """True when the torch interpreter exists and can import torch (and `modules`, a reference's own needs)."""
    if not Path(TORCH_PYTHON).exists():
        return False
    probe = subprocess.run([TORCH_PYTHON, "-c", "import " + ", ".join(("torch", *modules))], capture_output=True)
    return probe.returncode == 0


def run_baseline(script: str, *args: object, timeout: float = 900) -> str:
    """Run one reference program from ../shared/baselines with the torch interpreter; return its stdout."""
    path = BASELINES / script
    if not path.exists():
        raise FileNotFoundError(f"baseline {script} not found in {BASELINES}")
    done = subprocess.run([TORCH_PYTHON, str(path), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def baseline_module(script: str) -> ModuleType:
    """A reference program of ../shared/baselines imported as a module (its `__main__` part does not run): its
    networks, for timings of the very ones it trains."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(script).stem, BASELINES / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine_line() -> str:
    """One line describing where the figures were measured."""
    return (f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.machine()}, {platform.platform()}")


def load() -> str:
    """The machine's load averages now, in words (figures measured under load say so)."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def this_command() -> str:
    """The command line that runs this script from the checkout's root (`python -m experiments.NAME ARGS`, the
    arguments quoted for a shell)."""
    return shlex.join(["python", "-m", sys.modules["__main__"].__spec__.name, *sys.argv[1:]])


def write_result(name: str, title: str, sections: Sequence[str], command: str | None = None) -> Path:
    """Write experiments/results/<name>.md: a title, the machine, the command (this one by default), then each
    section."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = command or this_command()
    body = [f"# {title}", "", f"Measured on {machine_line()}.", "",
            f"Reproduce with `{command}`.", "", *[s + "\n" for s in sections]]
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(body))
    return path


def fmt_ratio(ours: float, theirs: float | None) -> str:
    """ours/theirs as 'N.NNx', or 'n/a' when the reference was not measured."""
    if not theirs:
        return "n/a"
    return f"{ours / theirs:.2f}x"


def best_time(call: Callable[[], Any], seconds: float, at_least: int = 3, warmup: int = 1) -> float:
    """The fastest of repeated calls over about `seconds` (at least `at_least` calls), after `warmup` calls: on a
    shared machine, the call least disturbed by the load."""
    import time

    for _ in range(warmup):
        call()
    best, start, calls = float("inf"), time.perf_counter(), 0
    while calls < at_least or time.perf_counter() - start < seconds:
        begin = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - begin)
        calls += 1
    return best


def serve(handle: Callable[[dict], dict]) -> None:
    """Answer requests until stdin closes: one JSON object a line in, `handle`'s JSON object a line out (the other
    end of `Side`)."""
    import json

    for line in sys.stdin:
        print(json.dumps(handle(json.loads(line))), flush=True)


class Side:
    """A process that times things on request (`serve` at its end), kept for a whole benchmark so that the sides
    of a comparison take turns case by case: a change in the machine's load then hits them alike."""

    def __init__(self, args: Sequence[str], env: dict | None = None, cwd: Path = REPO) -> None:
        import tempfile

        self.errors = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                        text=True, env=env, cwd=cwd)

    def ask(self, **request: Any) -> dict:
        """Send one request, wait for its answer; RuntimeError with the process's stderr when it died."""
        import json

        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.errors.seek(0)
            raise RuntimeError(f"{' '.join(self.process.args)} exited ({self.process.wait()}):\n"
                               f"{self.errors.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.errors.close()


def profile_table(call: Callable[[], Any], calls: int, top: int = 15, warmup: int = 50) -> str:
    """cProfile of `calls` calls after `warmup` ones, the `top` functions by own time (the profiler adds a little
    per Python call; C code counts to the Python function that called it), paths relative to the checkout."""
    import cProfile
    import io
    import pstats

    for _ in range(warmup):
        call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("ncalls"))
    return "\n".join(line.replace(str(REPO) + "/", "") for line in lines[start:] if line.strip())


def conv_body(nn: Any, spec: dict) -> tuple:
    """(layers, output width) of a convolutional body over 84 x 84 frames in `nn`, torch.nn or framework.nn (they
    share the API): spec's (out, kernel, stride) convolutions with ReLUs, a flatten, its hidden Linear+ReLU
    layers (bench_conv.NETWORKS' form)."""
    layers, channels, side = [], spec["frames"], 84
    for out, kernel, stride in spec["convs"]:
        layers += [nn.Conv2d(channels, out, kernel, stride), nn.ReLU()]
        channels, side = out, (side - kernel) // stride + 1
    layers.append(nn.Flatten())
    size = channels * side * side
    for width in spec["hidden"]:
        layers += [nn.Linear(size, width), nn.ReLU()]
        size = width
    return layers, size


def median_round_trip(inbox, outbox, item: object, reps: int, warmup: int = 10) -> float:
    """Median seconds for `item` to go out on `inbox` to an echo process and come back on `outbox`."""
    import statistics
    import time

    for _ in range(warmup):
        inbox.put(item)
        outbox.get()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        inbox.put(item)
        outbox.get()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


PROFILE_ORDER = ("env", "act", "learn")
"""The phases of a run's profile shown first, in this order; any others follow by name."""


def run_profile(summaries: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """Microseconds per env step of each phase of the runs' own profiles taken together, or None when a run has
    none.

    A run's summary.json reports where its worker processes' time went as `profile`: `seconds` per phase (at least
    `env`, `act` and `learn`, and `sync`, `wait` and the others a run has), each summed over its worker
    processes, and their `wall_seconds`. A phase's seconds over the runs' env steps are what that phase costs a
    worker per env step it steps (the worker's own time, not the run's wall time). Runs of a framework that does
    not write the profile yet give None: the pages that show it then say it was not measured.
    """
    profiles = [(summary.get("profile") or {}).get("seconds") for summary in summaries]
    if not profiles or not all(profiles):
        return None
    steps = sum(summary["env_steps"] for summary in summaries)
    phases = sorted({phase for profile in profiles for phase in profile},
                    key=lambda p: (PROFILE_ORDER.index(p) if p in PROFILE_ORDER else len(PROFILE_ORDER), p))
    return {phase: sum(profile.get(phase, 0.0) for profile in profiles) * 1e6 / steps for phase in phases}


def train_run(config: Path, sets: Sequence[str], logdir: Path, timeout: float, cwd: Path = REPO) -> Path:
    """`train --config config --set ...` into logdir (which must hold no other run), with the framework of the
    checkout `cwd` (this one by default); its run directory. RuntimeError with the end of its stderr when it
    fails."""
    args = [sys.executable, "-m", "framework.train", "train", "--config", str(config), "--logdir", str(logdir)]
    for item in sets:
        args += ["--set", item]
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(cwd)})
    if done.returncode != 0:
        raise RuntimeError(f"train {config.name} {' '.join(sets)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (run_dir,) = [p for p in logdir.iterdir() if p.is_dir()]
    return run_dir


def scalar_events(run_dir: Path, tag: str) -> list[Any]:
    """The events of one scalar tag in a run's event files (none when the run never logged it)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return acc.Scalars(tag) if tag in acc.Tags()["scalars"] else []


def steady_mean(run_dir: Path, tag: str, warmup: float) -> float | None:
    """The mean of a run's scalar `tag` logged past its first `warmup` seconds of logging (None if nothing was)."""
    events = scalar_events(run_dir, tag)
    kept = [e.value for e in events if e.wall_time - events[0].wall_time >= warmup] if events else []
    return sum(kept) / len(kept) if kept else None


def window_events(run_dir: Path) -> list[Any]:
    """The events of episode/return_window_mean (the mean return of the recent window) in a run's event files."""
    return scalar_events(run_dir, "episode/return_window_mean")


def return_curve(run_dir: Path, started_at: float) -> list[tuple[float, float]]:
    """(seconds since started_at, mean return of the recent window) from a run's event files."""
    return [(e.wall_time - started_at, e.value) for e in window_events(run_dir)]


def plot_pong_curves(draw: Callable[[Any, Any], None], time_label: str, title: str, path: Path) -> None:
    """Two panels sharing Pong's return axis, against wall time and against env steps (millions): `draw(by_time,
    by_steps)` plots the curves; the -21 floor dotted, a legend where the curves are labelled."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (by_time, by_steps) = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    draw(by_time, by_steps)
    by_time.set_xlabel(time_label)
    by_steps.set_xlabel("env steps (millions)")
    by_time.set_ylabel("mean return of the last 100 episodes")
    for ax in (by_time, by_steps):
        ax.axhline(-21, color="gray", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_return_curves(series: Sequence[tuple[str, str, Sequence[list[tuple[float, float]]]]], title: str,
                       xlabel: str, path: Path, target: float = 475,
                       extra: Callable[[Any], None] | None = None) -> None:
    """Return curves, one colour and legend entry per (label, colour, curves), the target as a dashed line;
    `extra(ax)` may draw more before the figure is saved to path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, color, curves in series:
        for i, curve in enumerate(curves):
            xs, ys = zip(*curve) if curve else ((), ())
            ax.plot(xs, ys, color=color, alpha=0.8, label=label if i == 0 else None)
    if extra is not None:
        extra(ax)
    ax.axhline(target, color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean return of the last 100 episodes")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
