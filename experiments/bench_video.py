"""What recording one greedy CartPole episode costs: the video of `logging.video_every_s`, and `evaluate --record`.

Trains `configs/a3c.yaml` until its target (mean return 475), loads the
checkpoint as `evaluate` does, and times one greedy episode of the trained
agent (500 steps, 501 frames of 600x400), each way in turn, `--rounds` times
(median): played without rendering (`evaluate`, one episode), played and
rendered with the frames thrown away, recorded as the monitor does (GIF frames
quantized as they come, then encoded), and written as an MP4 (`write_video`).
While the monitor records it neither logs nor checks its stop conditions, so
the GIF row is how long a video holds it.

usage: python -m experiments.bench_video [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.common import REPO, markdown_table, write_result
from framework import algorithms
from framework.train.config import read_yaml, validate
from framework.train.run_checkpoint import read_checkpoint
from framework.train.video import GifFrames, write_video


def trained_run(logdir: Path) -> Path:
    """A run directory of configs/a3c.yaml trained until its target."""
    done = subprocess.run([sys.executable, "-m", "framework.train", "train", "--config",
                           str(REPO / "configs" / "a3c.yaml"), "--logdir", str(logdir), "--set",
                           "logging.progress=false"], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"train failed ({done.returncode}):\n{done.stderr[-2000:]}")
    print(done.stdout.strip(), file=sys.stderr)
    return next(p for p in logdir.iterdir() if p.is_dir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        run = trained_run(Path(tmp) / "runs")
        config = validate(read_yaml(run / "config.yaml"))
        a3c = algorithms.get(config["algorithm"]["name"])
        model = a3c.build_model(config)
        read_checkpoint(run, config, model)
        seed = 12345  # evaluate's default
        sizes: dict[str, int] = {}
        frames_seen: list[int] = []

        def unrendered() -> None:
            a3c.evaluate(model, config, 1, seed)

        def rendered() -> None:
            frames_seen.append(0)

            def count(frame) -> bool:
                frames_seen[-1] += 1
                return True
            a3c.record(model, config, 1, seed, count)

        def monitor_gif() -> None:
            frames = GifFrames(config["logging"]["video_max_frames"])
            a3c.record(model, config, 1, seed, frames.add)
            sizes["GIF"] = len(frames.gif())

        def mp4() -> None:
            path = Path(tmp) / "agent.mp4"
            write_video(path, lambda sink: a3c.record(model, config, 1, seed, sink))
            sizes["MP4"] = path.stat().st_size

        ways = {"played, not rendered (evaluate)": unrendered, "played and rendered, frames dropped": rendered,
                "GIF, as the monitor records it (logging.video_every_s)": monitor_gif,
                "MP4 (evaluate --record agent.mp4)": mp4}
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, way in ways.items():
                start = time.perf_counter()
                way()
                seconds[name].append(time.perf_counter() - start)
    frames = frames_seen[0]
    rows = []
    for name, times in seconds.items():
        median = statistics.median(times)
        size = next((f"{sizes[k] / 1e3:,.0f} kB" for k in sizes if k in name), "")
        rows.append([name, f"{median:.2f}", f"{median / frames * 1e3:.1f}", size])
    load_after = os.getloadavg()
    sections = [
        f"Load average {load_before[0]:.2f} at the start and {load_after[0]:.2f} at the end, on 2 cores "
        f"(medians of {args.rounds} rounds; a machine shared with other work).",
        f"## One greedy episode of a trained CartPole agent: {frames} frames of 600x400\n\n"
        + markdown_table(["how", "seconds", "ms a frame", "file"], rows),
        "Rendering is pygame drawing into an offscreen surface; a GIF frame is quantized to its own 256-colour "
        "palette (Pillow's fast octree) as it comes and the GIF is LZW-encoded at the end; the MP4 is encoded "
        "frame by frame by PyAV's libx264.",
    ]
    print(write_result("video", "Recording a greedy episode", sections))


if __name__ == "__main__":
    main()
