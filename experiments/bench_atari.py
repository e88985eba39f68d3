"""Benchmark: A3C on Atari Pong (configs/a3c_pong.yaml) against the PyTorch A3C reference, and where a step's time goes.

Measured one after the other on the same machine, each alone:
  * the environment alone on one core, random actions: the gymnasium wrapper
    chain (`make_atari`) and ale-py's AtariVectorEnv (`make_atari_vector`, the
    config's envs per worker, one thread);
  * env steps/s of training with 2 workers for --seconds each: `train --config
    configs/a3c_pong.yaml --set trainer.workers=2` with the reference's LSTM
    and n-step 20 (REFERENCE_SETTINGS) and `../shared/baselines/torch_a3c_atari.py
    2 SECONDS` (same network, n-step and worker count; hogshare steps several
    envs per worker), then the shipped config as it is (the A3C paper's
    feed-forward agent, n-step 5: the one that learns Pong on 2 cores);
  * the Atari configs users train (what `train --env ALE/Pong-v5` and `ALE/Breakout-v5` pick, and
    configs/impala_pong.yaml), each for --seconds, against their env stepped alone on the same cores by as many
    processes as they have actors (the goal: 50% of it);
  * where the workers' time went in those two runs, from their own profiles
    (summary.json's `profile`: seconds per phase summed over the workers,
    `common.run_profile`), as milliseconds per env step: stepping the envs,
    acting, learning and the rest.
The 1-minute load average before each measurement is recorded with it.

Writes experiments/results/atari.md and atari.png. The speed figures are also
kept in atari_speed.json, so that a long run's learning curve can be added
later without measuring again: --learning-run RUN_DIR reads that run's
TensorBoard events into atari_learning.png (mean return of the last 100
episodes against hours and env steps), and --skip-speed reuses the JSON. A rerun without
--learning-run keeps the learning section atari.md already holds.

Run: python -m experiments.bench_atari [--seconds 90] [--learning-run RUN_DIR] [--skip-speed]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per measured process, as the workers pin theirs
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import queue
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.common import (REPO, RESULTS, TORCH_PYTHON, fmt_ratio, markdown_table, plot_pong_curves,
                                run_baseline, run_profile, this_command, torch_available, write_result)

CONFIG = REPO / "configs" / "a3c_pong.yaml"
REFERENCE_N_STEPS = 20
REFERENCE_SETTINGS = ("model.lstm=true", f"algorithm.n_steps={REFERENCE_N_STEPS}")
"""The reference's network and n-step (fixed in torch_a3c_atari.py), as `--set` overrides of the Pong config:
the ratio is taken with them."""
TARGET_RATIO, TARGET_ENV_SHARE = 2.0, 0.40
SPEED_JSON = RESULTS / "atari_speed.json"
TORCH_MODULES = ("gymnasium", "ale_py", "cv2")
"""What torch_a3c_atari.py imports beside torch (pip install gymnasium ale-py opencv-python-headless)."""
TORCH_LINE = re.compile(r"wall=(?P<wall>[\d.]+)s steps=(?P<steps>\d+) steps_per_s=(?P<sps>\d+) "
                        r"episodes=(?P<episodes>\d+) last10=(?P<last10>\S+)")


def load() -> float:
    """The 1-minute load average: a figure measured above ~0.5 on 2 cores shared the machine with something."""
    return round(os.getloadavg()[0], 2)


# ---- the environment alone -------------------------------------------------------------------------------
def env_alone(seconds: float, envs: int) -> dict:
    """Steps/s on one core with random actions: the wrapper chain (one env) and AtariVectorEnv (envs, 1 thread)."""
    import numpy as np
    from gymnasium.vector import AutoresetMode

    from framework.rl.envs import make_atari, make_atari_vector

    rng = np.random.default_rng(0)
    result = {"load": load()}
    chain = make_atari(repeat_action_probability=0.0)
    chain.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = chain.step(int(rng.integers(6)))
        steps += 1
        if terminated or truncated:
            chain.reset()
    result["wrappers"] = steps / (time.perf_counter() - start)
    chain.close()
    vector = make_atari_vector(envs, repeat_action_probability=0.0, autoreset_mode=AutoresetMode.SAME_STEP)
    vector.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        vector.step(rng.integers(0, 6, envs))
        steps += envs
    result["vector"] = steps / (time.perf_counter() - start)
    result["vector_envs"] = envs
    vector.close()
    return result


# ---- the shipped Atari configs against the env alone on both cores ---------------------------------------
SHIPPED = (("`train --env ALE/Pong-v5`", "ALE/Pong-v5", None),
           ("`train --env ALE/Breakout-v5`", "ALE/Breakout-v5", None),
           ("`train --config configs/impala_pong.yaml`", None, "impala_pong.yaml"))
"""The Atari configs users train (what `train --env` picks for each game, and IMPALA's Pong config) whose env
steps/s are set against the env alone on the same cores."""
TARGET_SHARE = 0.50
WARMUP_S = 15.0


def _step_alone(config: dict, seconds: float, out: Any) -> None:
    """One process: the games of one of a validated config's actors, as training steps them (EnvBatch: the same
    vector env and preprocessing), random actions for `seconds`; its env steps/s into `out`."""
    import numpy as np

    from framework.rl.envs import EnvBatch
    from framework.rl.envs.info import env_info

    info = env_info(config)
    envs = info.envs_per_worker
    batch = EnvBatch(info, envs, seed=os.getpid(), life_loss_done=info.life_loss_done)
    rng = np.random.default_rng(os.getpid())
    n, actions = 0, batch.action_head.size
    for _ in range(20):
        batch.step(rng.integers(0, actions, envs))
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch.step(rng.integers(0, actions, envs))
        n += envs
    out.put(n / (time.perf_counter() - start))
    batch.close()


def env_alone_processes(config: dict, processes: int, seconds: float) -> float:
    """Env steps/s of `processes` processes at once, each stepping one actor's games of a validated config with
    random actions: what the cores can emulate with nothing else to do."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    workers = [context.Process(target=_step_alone, args=(config, seconds, out)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    rates, deadline = [], time.monotonic() + seconds + 300
    while len(rates) < processes:
        try:
            rates.append(out.get(timeout=1.0))
        except queue.Empty:
            failed = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                for worker in workers:
                    worker.kill()
                raise RuntimeError(f"stepping the env alone failed (exit codes {failed})") from None
    for worker in workers:
        worker.join()
    return sum(rates)


def shipped_shares(seconds: float, quiet: float, patience_s: float) -> list[dict]:
    """Each shipped Atari config trained alone for `seconds` (its steady env steps/s past WARMUP_S), and its env
    stepped alone by as many processes as it has actors, each with its games."""
    from experiments.common import steady_mean
    from framework.train.config import load_config
    from framework.train.shipped_configs import choose

    found = []
    for label, env_id, config_name in SHIPPED:
        choice = choose(env_id, {}) if env_id else None
        path, overrides = (choice.path, choice.overrides) if choice else (REPO / "configs" / config_name, ())
        config = load_config(path, overrides)
        with tempfile.TemporaryDirectory() as tmp:
            wait_for_quiet(quiet, patience_s)
            command = [sys.executable, "-m", "framework.train", "train", "--logdir", tmp,
                       *(["--env", env_id] if env_id else ["--config", str(path)]),
                       "--set", f"trainer.max_seconds={seconds}", "--set", "trainer.target_return=null",
                       "--set", "logging.progress=false", "--set", "logging.log_every_s=1"]
            started = load()
            done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=seconds + 600)
            if done.returncode != 0:
                raise RuntimeError(f"{label} failed ({done.returncode}):\n{done.stderr[-2000:]}")
            run_dir = next(p for p in Path(tmp).iterdir() if p.is_dir())
            trained = steady_mean(run_dir, "perf/env_steps_per_s", WARMUP_S)
        wait_for_quiet(quiet, patience_s)
        actors = config["trainer"]["workers"]
        alone = env_alone_processes(config, actors, 20.0)
        found.append({"label": label, "config": path.name,
                      "model": config["model"].get("conv", "a3c"), "trained": trained, "alone": alone,
                      "actors": actors, "envs": config["env"]["envs_per_worker"], "load": started})
        print(f"{label}: {trained:,.0f} env steps/s against {alone:,.0f} alone", flush=True)
    return found


def share_section(shares: list[dict]) -> list[str]:
    """The shipped configs' env steps/s as a share of the env alone on the same cores."""
    rows = [[s["label"], f"`{s['config']}` ({s['model']} network)", f"{s['trained']:,.0f}",
             f"{s['alone']:,.0f} ({s['actors']} processes x {s['envs']} games)", f"{s['trained'] / s['alone']:.0%}",
             "yes" if s["trained"] >= TARGET_SHARE * s["alone"] else "no", s["load"]] for s in shares]
    return ["## The shipped Atari configs against the env alone",
            f"Each config trained alone for its seconds (its steady env steps/s, past its first {WARMUP_S:g} s), "
            "then its env stepped alone on the same cores: as many processes as the config has actors, each stepping "
            "its games as training does (EnvBatch: the same AtariVectorEnv and preprocessing) with random actions, "
            f"for 20 s. The goal is {TARGET_SHARE:.0%}.",
            markdown_table(["what", "config", "env steps/s training", "env alone", "share", "goal met",
                            "1-min load before"], rows),
            "Where such a run's time goes, its actors' and its learner's apart, is in conv.md's py-spy profiles of "
            "training Pong (`python -m experiments.bench_conv`): with one learner and two actors on two cores, an "
            "IMPALA config steps its envs as fast as its learner's network learns from them."]


# ---- training: hogshare and the reference --------------------------------------------------------------------
def train_ours(seconds: float, logdir: Path, settings: tuple[str, ...] = ()) -> dict:
    """`train` with the Pong config and 2 workers for `seconds` (with the `settings` overrides); its summary."""
    command = [sys.executable, "-m", "framework.train", "train", "--config", str(CONFIG), "--logdir", str(logdir),
               "--set", "trainer.workers=2", "--set", f"trainer.max_seconds={seconds}",
               "--set", "logging.progress=false"]
    for setting in settings:
        command += ["--set", setting]
    started = load()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=seconds + 600)
    if done.returncode != 0:
        raise RuntimeError(f"train failed ({done.returncode}):\n{done.stderr[-2000:]}")
    run_dir = next(p for p in logdir.iterdir() if p.is_dir())
    return {**json.loads((run_dir / "summary.json").read_text()), "load": started}


def train_torch(seconds: float) -> dict | None:
    """The reference's figures with 2 workers for `seconds`, or None without torch."""
    if not torch_available(*TORCH_MODULES):
        return None
    started = load()
    out = run_baseline("torch_a3c_atari.py", 2, seconds, timeout=seconds + 600)
    match = TORCH_LINE.search(out)
    if match is None:
        raise RuntimeError(f"unexpected output of torch_a3c_atari.py: {out!r}")
    return {"wall": float(match["wall"]), "steps": int(match["steps"]), "steps_per_s": float(match["sps"]),
            "episodes": int(match["episodes"]), "load": started}


def wait_for_quiet(limit: float, patience_s: float) -> None:
    """Sleep (up to patience_s) until the 1-minute load is at most `limit`."""
    deadline = time.monotonic() + patience_s
    while load() > limit and time.monotonic() < deadline:
        print(f"load {load()} > {limit}: waiting", flush=True)
        time.sleep(20)


def measure(seconds: float, part_seconds: float, quiet: float, patience_s: float) -> dict:
    import yaml

    config = yaml.safe_load(CONFIG.read_text())
    envs = config["env"]["envs_per_worker"]
    speed = {"seconds": seconds, "envs_per_worker": envs, "n_steps": REFERENCE_N_STEPS,
             "shipped_n_steps": config["algorithm"]["n_steps"], "shipped_lstm": config["model"]["lstm"]}
    wait_for_quiet(quiet, patience_s)
    speed["env"] = env_alone(part_seconds, envs)
    print(f"env alone: {speed['env']}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        wait_for_quiet(quiet, patience_s)
        speed["ours"] = train_ours(seconds, Path(tmp), REFERENCE_SETTINGS)
    print(f"hogshare: {speed['ours']['steps_per_second']:.0f} env steps/s", flush=True)
    wait_for_quiet(quiet, patience_s)
    speed["torch"] = train_torch(seconds)
    print(f"torch: {speed['torch']}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        wait_for_quiet(quiet, patience_s)
        speed["shipped"] = train_ours(seconds, Path(tmp))
    print(f"hogshare, the shipped config: {speed['shipped']['steps_per_second']:.0f} env steps/s", flush=True)
    speed["shares"] = shipped_shares(seconds, quiet, patience_s)
    return speed


# ---- the learning curve of a long run -------------------------------------------------------------------------
def learning_curve(run_dir: Path) -> dict:
    """(hours since the first logged point, env steps, mean of the last 100 returns) from a run's TensorBoard
    events, and its summary."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = json.loads((run_dir / "summary.json").read_text())
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    events = accumulator.Scalars("episode/return_window_mean")
    entropy = [e.value for e in accumulator.Scalars("train/entropy")]
    start = events[0].wall_time  # a resumed run's summary holds the start of its last part only
    return {"run": run_dir.name, "summary": summary, "hours": [(e.wall_time - start) / 3600 for e in events],
            "steps": [e.step for e in events], "returns": [e.value for e in events],
            "entropy": (entropy[0], entropy[-1]) if entropy else None}


def plot_learning(curve: dict, path: Path) -> None:
    def draw(by_time, by_steps) -> None:
        by_time.plot(curve["hours"], curve["returns"], color="tab:blue")
        by_steps.plot([s / 1e6 for s in curve["steps"]], curve["returns"], color="tab:blue")

    plot_pong_curves(draw, "hours", f"A3C on Pong, hogshare ({curve['run']})", path)


# ---- the figures ------------------------------------------------------------------------------------------------
def profiled_runs(speed: dict) -> dict[str, dict[str, float]]:
    """Milliseconds per env step of each phase of the hogshare runs, by run, from their own profiles (the runs
    whose summaries hold none are left out)."""
    runs = {f"LSTM, n-step {speed['n_steps']}": speed["ours"]}
    if speed.get("shipped"):
        runs[f"shipped config ({shipped_model(speed)})"] = speed["shipped"]
    profiles = {name: run_profile([summary]) for name, summary in runs.items()}
    return {name: {phase: us / 1000 for phase, us in profile.items()} for name, profile in profiles.items()
            if profile is not None}


def plot_speed(speed: dict, path: Path) -> None:
    """Env steps/s of each side; beside them, where the profiled runs' worker time went per env step."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiled = profiled_runs(speed)
    fig, axes = plt.subplots(1, 2 if profiled else 1, figsize=(11, 4), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2] if profiled else [1]})
    rates = axes[0][0]
    env = speed["env"]
    bars = [("env alone,\nwrappers\nx 2 cores", 2 * env["wrappers"], "tab:gray"),
            (f"AtariVectorEnv,\n{env['vector_envs']} envs\nx 2 cores", 2 * env["vector"], "tab:gray"),
            ("PyTorch A3C,\n2 workers", speed["torch"]["steps_per_s"] if speed["torch"] else 0, "tab:red"),
            (f"hogshare A3C,\n2 workers, LSTM,\nn-step {speed['n_steps']}", speed["ours"]["steps_per_second"],
             "tab:blue")]
    if speed.get("shipped"):
        model = shipped_model(speed).replace(", ", ",\n")
        bars.append((f"hogshare A3C,\nshipped config\n({model})",
                     speed["shipped"]["steps_per_second"], "tab:cyan"))
    drawn = rates.bar([b[0] for b in bars], [b[1] for b in bars], color=[b[2] for b in bars])
    rates.bar_label(drawn, fmt="{:,.0f}", fontsize=8)
    rates.axhline(TARGET_ENV_SHARE * 2 * env["wrappers"], color="tab:blue", linestyle="--", linewidth=1,
                  label=f"{TARGET_ENV_SHARE:.0%} of the env alone (wrappers)")
    rates.set_ylabel("env steps per second")
    rates.legend(loc="upper right")
    rates.tick_params(axis="x", labelsize=8)
    if profiled:
        parts = axes[0][1]
        names = list(profiled)
        bottom = [0.0] * len(names)
        for phase in dict.fromkeys(p for profile in profiled.values() for p in profile):
            heights = [profiled[name].get(phase, 0.0) for name in names]
            parts.bar(names, heights, bottom=bottom, label=phase)
            bottom = [x + h for x, h in zip(bottom, heights)]
        parts.set_ylabel("ms per env step, a worker (the run's profile)")
        parts.tick_params(axis="x", labelsize=8)
        parts.legend(fontsize=8)
    fig.suptitle(f"A3C on Pong, 2 workers, {speed['seconds']:.0f} s each")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def shipped_model(speed: dict) -> str:
    """The shipped config's network and n-step, in words."""
    return f"{'LSTM' if speed['shipped_lstm'] else 'feed-forward'}, n-step {speed['shipped_n_steps']}"


def speed_sections(speed: dict) -> list[str]:
    env, ours, torch = speed["env"], speed["ours"], speed["torch"]
    ours_sps = ours["steps_per_second"]
    torch_sps = torch["steps_per_s"] if torch else None
    envs = speed["envs_per_worker"]
    alone_wrappers, alone_vector = 2 * env["wrappers"], 2 * env["vector"]
    ratio = ours_sps / torch_sps if torch_sps else None
    sets = "".join(f" --set {setting}" for setting in REFERENCE_SETTINGS)
    rows = [[f"hogshare `train --config configs/a3c_pong.yaml --set trainer.workers=2{sets}` ({envs} envs per "
             "worker)", f"{ours_sps:,.0f}", ours["load"]],
            ["PyTorch A3C, same network and n-step, one env per worker (`torch_a3c_atari.py 2 "
             f"{speed['seconds']:.0f}`)", "n/a" if torch is None else f"{torch_sps:,.0f}",
             "n/a" if torch is None else torch["load"]]]
    if speed.get("shipped"):
        rows.append([f"hogshare, the shipped config as it is ({shipped_model(speed)}: the one that learns Pong here)",
                     f"{speed['shipped']['steps_per_second']:,.0f}",
                     speed["shipped"]["load"]])
    rows += [["the preprocessed env alone, one core, gymnasium wrappers", f"{env['wrappers']:,.0f}", env["load"]],
             [f"ale-py's AtariVectorEnv, {env['vector_envs']} envs, 1 thread", f"{env['vector']:,.0f}",
              env["load"]]]
    table = markdown_table(["", "env steps/s", "1-min load before"], rows)
    verdict = markdown_table(["goal", "measured", "met"], [
        [f"hogshare / torch >= {TARGET_RATIO:.0f}x", fmt_ratio(ours_sps, torch_sps),
         "n/a" if ratio is None else ("yes" if ratio >= TARGET_RATIO else "no")],
        [f"hogshare >= {TARGET_ENV_SHARE:.0%} of the env alone on the same 2 cores (wrappers)",
         f"{ours_sps / alone_wrappers:.0%}", "yes" if ours_sps >= TARGET_ENV_SHARE * alone_wrappers else "no"],
        ["the same against AtariVectorEnv alone on 2 cores", f"{ours_sps / alone_vector:.0%}", ""]])
    profiled = profiled_runs(speed)
    phases = list(dict.fromkeys(phase for profile in profiled.values() for phase in profile))
    parts = (markdown_table(["hogshare run", *[f"{phase} ms" for phase in phases], "all ms"],
                            [[name, *[f"{profile.get(phase, 0.0):.3f}" for phase in phases],
                              f"{sum(profile.values()):.3f}"] for name, profile in profiled.items()])
             if profiled else "These runs' summaries hold no `profile`: the framework that ran them did not report "
                              "where their workers' time went.")
    torch_text = ("torch is not installed for the reference interpreter: its figures are n/a." if torch is None else
                  f"Reference: {torch['steps']:,} env steps in {torch['wall']:.1f} s, {torch['episodes']} episodes. "
                  f"hogshare: {ours['env_steps']:,} env steps in {ours['wall_seconds']:.1f} s, {ours['updates']:,} "
                  f"updates, {ours['episodes']} episodes, policy lag {ours['policy_lag_mean'] or 0:.2f} updates. "
                  "Both count from before their workers start.")
    return [
        f"Two workers each, {speed['seconds']:.0f} s each, one after the other, each alone. Same network (conv 16 "
        f"8x8/4, conv 32 4x4/2, 256 linear, LSTM 256), n-step {speed['n_steps']} and RMSprop; hogshare steps "
        f"{envs} envs per worker as one AtariVectorEnv with one batched acting forward pass per step, the "
        "reference one env per worker. A load above ~0.5 means another process shared the 2 cores during that "
        "measurement. Absolute figures drift with the machine: compare figures of one run.",
        table, verdict,
        "Where the workers' time went in the hogshare runs above, from their own profiles (summary.json's "
        "`profile`, seconds per phase summed over the worker processes): milliseconds per env step of a worker.",
        parts, torch_text, "![env steps/s and where the workers' time went](atari.png)"]


EARLIER_RUNS = (
    "What did not learn, on 2 cores: the A3C paper's LSTM agent (the reference's network). At n-step 20 (the "
    "reference's) with RMSprop eps 0.1 (the paper's and the reference's), 60 minutes left the policy's entropy at "
    "its maximum, 1.79: RMSprop's steps were about lr x 1e-3 at Pong's gradients. With eps 1e-5 and the gradient "
    "norm clipped at 0.5 (A2C's), run `a3c-pong-20261201-114447` made 3,365,280 env steps in 2.17 h at a load of "
    "5-9 (other work shared the cores), its mean return going from -20.9 to -20.4 and its entropy staying at 1.77: "
    "an update per 160 env steps (20 steps of 8 envs), 21,000 updates in all. At n-step 5 (an update per 40 env "
    "steps), run `a3c-pong-20261201-223149` made 2,656,560 env steps and 66,414 updates in 54 minutes (823/s) and "
    "stayed at -20.5 (entropy 1.3-1.7). The same LSTM agent, at the shipped settings, learns a visual task of its "
    "own (reward for the action matching the side of a square on the screen: 90 of 100 in 32,000 env steps), so "
    "the pipeline (uint8 frames, batched body, LSTM unroll) learns; on Pong it needs more env steps than 2 cores "
    "give it in an hour. The feed-forward agent, the paper's other one, rose within the hour: it is the shipped "
    "config.")
"""The runs that led to the shipped config (kept with every rewrite of atari.md)."""


def learning_section(curve: dict | None) -> list[str]:
    if curve is None:
        return ["## Learning", "No long run is included yet: run `train --config configs/a3c_pong.yaml --set "
                "trainer.workers=2 --set trainer.max_seconds=3600` (60 minutes on 2 cores), then "
                "`python -m experiments.bench_atari --skip-speed --learning-run runs/a3c-pong-...` to add its "
                "curve here."]
    s = curve["summary"]
    returns = curve["returns"] or [float("nan")]
    at_hour = next((r for h, r in zip(curve["hours"], curve["returns"]) if h >= 1.0), None)
    entropy = ("" if curve["entropy"] is None else
               f" The policy's entropy went from {curve['entropy'][0]:.2f} to {curve['entropy'][1]:.2f} (uniform over "
               "Pong's 6 actions: 1.79).")
    return ["## Learning",
            f"Run `{curve['run']}` (`train --config configs/a3c_pong.yaml --set trainer.workers=2`): "
            f"{s['env_steps']:,} env steps in {s['wall_seconds'] / 3600:.2f} h ({s['steps_per_second']:,.0f}/s), "
            f"{s['episodes']:,} episodes; the mean return of the last 100 episodes went from {returns[0]:.1f} (first "
            f"logged) to {'n/a' if at_hour is None else f'{at_hour:.1f}'} at 60 minutes and {returns[-1]:.1f} at the "
            f"end (best {max(returns):.1f}).{entropy}",
            EARLIER_RUNS,
            "![mean return of the last 100 episodes](atari_learning.png)"]


def kept_learning_section() -> list[str]:
    """The learning section atari.md already holds (a speed rerun keeps the long run's curve), else the hint."""
    path = RESULTS / "atari.md"
    text = path.read_text() if path.exists() else ""
    heading = text.find("## Learning")
    if heading < 0 or not (RESULTS / "atari_learning.png").exists():
        return learning_section(None)
    return [text[heading:].rstrip("\n")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0, help="training seconds per side (default 90)")
    parser.add_argument("--part-seconds", type=float, default=5.0,
                        help="seconds of stepping each env alone (default 5)")
    parser.add_argument("--quiet-load", type=float, default=0.5,
                        help="wait before each measurement until the 1-minute load is at most this")
    parser.add_argument("--patience", type=float, default=600.0, help="seconds to wait for that, at most")
    parser.add_argument("--learning-run", type=Path, help="a Pong run directory: add its learning curve")
    parser.add_argument("--skip-speed", action="store_true", help=f"reuse {SPEED_JSON.name} instead of measuring")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.skip_speed and torch_available() and not torch_available(*TORCH_MODULES):
        parser.error(f"{TORCH_PYTHON} has torch but cannot import {', '.join(TORCH_MODULES)}, which the PyTorch "
                     "reference needs: pip install gymnasium ale-py opencv-python-headless there first")
    if args.skip_speed:
        speed = json.loads(SPEED_JSON.read_text())
    else:
        speed = {**measure(args.seconds, args.part_seconds, args.quiet_load, args.patience), "command": this_command()}
        SPEED_JSON.write_text(json.dumps(speed, indent=2) + "\n")
    plot_speed(speed, RESULTS / "atari.png")
    curve = learning_curve(args.learning_run) if args.learning_run else None
    if curve is not None:
        plot_learning(curve, RESULTS / "atari_learning.png")
    learning = learning_section(curve) if curve is not None else kept_learning_section()
    path = write_result("atari", "A3C on Atari Pong: hogshare against the PyTorch reference",
                        speed_sections(speed) + share_section(speed.get("shares", [])) + learning,
                        command=speed["command"])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
