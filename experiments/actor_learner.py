"""Benchmark: A3C, IMPALA and APPO on 2 cores: time to target, policy lag, throughput (and sample-factory's APPO).

Three parts, each run one `train` at a time on a quiet machine, each kept in
experiments/results/actor_learner.json so that a part can be run again alone
(--parts); the page experiments/results/actor_learner.md and the plots
actor_learner_cartpole.png and actor_learner_lunarlander.png are rewritten
from all parts measured so far:

- learning: the shipped configs (a3c.yaml, impala.yaml, appo.yaml on
  CartPole-v1; a3c_, impala_, appo_lunarlander.yaml on LunarLander-v3) on
  --seeds seeds each: seconds and env steps to the target, steps/s, policy lag;
- lag: the CartPole and LunarLander configs of IMPALA (V-trace), IMPALA with
  `vtrace: false` and A3C with 2, 8 and 16 actors (workers) on the same 2 cores,
  one seed, for a fixed budget each: the mean return reached, the time to the
  target and the mean policy lag;
- throughput: env steps/s over --throughput-seconds of A3C, IMPALA with 1 and 2
  learners and APPO on CartPole (the shipped configs) and on Atari Pong (the
  Pong config's environment and network, each algorithm's keys; 2 actors), the
  environment alone with random actions in one process x 2 cores, and
  sample-factory 2.1.1's APPO on the same tasks (with --sf-python, its own venv;
  ../shared/baselines/README.md): its `Fps is (10 sec: ...)` lines, averaged
  past its first 30 s (Atari's are frames: divided by 4 for env steps);
- pong (not in the default parts: an hour or more each): configs/impala_pong.yaml
  and configs/appo_pong.yaml, seed 0, for --pong-seconds each (the wall time of
  the A3C Pong run in experiments/results/atari.md), their return curves
  against time and env steps beside that run's figures (actor_learner_pong.png);
- scaling (not in the default parts: made for a machine with many cores, such as
  the 16 of the GPU machine experiments/gpu_check.sh runs on): IMPALA's env
  steps/s on CartPole (configs/impala.yaml) with each of --scaling-actors and
  --scaling-learners, --scaling-seconds each, the mean of its
  perf/env_steps_per_s past the first --scaling-warmup seconds. Its machine is
  recorded with it, so it can be measured elsewhere and merged
  (--merge-scaling FILE takes the scaling part of another actor_learner.json).

usage: python -m experiments.actor_learner [--parts learning,lag,throughput,pong] [--seeds 3] [--first-seed 0]
           [--tasks cartpole,lunarlander]
           [--lag-actors 2,8,16] [--lag-seconds-cartpole 30] [--lag-seconds-lunarlander 240]
           [--throughput-seconds 40] [--sf-python /tmp/sf/bin/python]
           [--pong-algorithms impala,appo] [--pong-seconds 3900]
           [--scaling-actors 1,2,4,8,16] [--scaling-learners 1,2,3,4] [--scaling-seconds 10] [--scaling-warmup 3]
           [--merge-scaling PATH]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import re
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from experiments.common import (REPO, RESULTS, load, machine_line, markdown_table, plot_pong_curves,
                                plot_return_curves, return_curve, steady_mean, train_run, window_events,
                                write_result)

CONFIGS = REPO / "configs"
JSON = RESULTS / "actor_learner.json"
ALGORITHMS = ("a3c", "impala", "appo")
TASKS = {"cartpole": ("CartPole-v1", 475.0, "{algo}.yaml", 120, 0.1),
         "lunarlander": ("LunarLander-v3", 200.0, "{algo}_lunarlander.yaml", 900, 1.0)}
"""task -> (env id, target, config name pattern, budget in seconds of one learning run, seconds between the points
of its return curve: CartPole's runs take a second or two)."""
COLORS = {"a3c": "tab:blue", "impala": "tab:orange", "appo": "tab:green"}
SF_FPS = re.compile(r"Fps is \(10 sec: ([\d.]+|nan)")
A3C_PONG = {"run": "a3c-pong-20261201-232553", "hours": 1.08, "env_steps": 3_709_240, "first": -20.8,
            "at_60_min": 2.5, "end": 5.6}
"""The A3C Pong run of experiments/results/atari.md (`configs/a3c_pong.yaml --set trainer.workers=2`): its wall
hours, env steps and the mean return of its last 100 episodes when first logged, at 60 minutes and at the end."""
PONG_TARGET = 18.0
"""trainer.target_return of the Pong configs: a run stops there."""


def _run(config: Path, sets: list[str], timeout: float) -> tuple[dict, Path, float]:
    """(summary, run directory, start time) of one quiet `train` run in a fresh logdir."""
    logdir = Path(tempfile.mkdtemp(prefix="actor-learner-"))
    started = time.time()
    run_dir = train_run(config, ["logging.progress=false", *sets], logdir, timeout)
    return json.loads((run_dir / "summary.json").read_text()), run_dir, started


def _figures(summary: dict) -> dict:
    keys = ("solved_at_seconds", "env_steps", "steps_per_second", "policy_lag_mean", "mean_return", "wall_seconds",
            "stop_reason")
    return {key: summary.get(key) for key in keys}


def learning(seeds: list[int], tasks: list[str]) -> dict:
    """Each shipped config of tasks on each seed, to its target or its budget."""
    results: dict = {}
    for task in tasks:
        _, _, pattern, budget, log_every_s = TASKS[task]
        for algo in ALGORITHMS:
            config = CONFIGS / pattern.format(algo=algo)
            runs = []
            for seed in seeds:
                summary, run_dir, started = _run(config, [f"seed={seed}", f"trainer.max_seconds={budget}",
                                                          f"logging.log_every_s={log_every_s}"], budget + 600)
                runs.append({"seed": seed, **_figures(summary), "curve": return_curve(run_dir, started)})
                print(task, algo, seed, _figures(summary), flush=True)
            results[f"{task}/{algo}"] = runs
    return results


def _variant_sets(variant: str, actors: int) -> tuple[str, list[str]]:
    algo = variant.split("-")[0]
    sets = [f"trainer.workers={actors}"]
    if variant == "impala-no-vtrace":
        sets.append("algorithm.vtrace=false")
    return algo, sets


def lag(actor_counts: list[int], seconds: dict[str, float]) -> dict:
    """IMPALA with and without V-trace, and A3C, with more and more actors on the same cores."""
    results: dict = {}
    for task, (_, _, pattern, _, _) in TASKS.items():
        for variant in ("impala", "impala-no-vtrace", "a3c"):
            for actors in actor_counts:
                algo, sets = _variant_sets(variant, actors)
                summary, _, _ = _run(CONFIGS / pattern.format(algo=algo),
                                     [*sets, "seed=0", f"trainer.max_seconds={seconds[task]}"], seconds[task] + 600)
                results[f"{task}/{variant}/{actors}"] = _figures(summary)
                print(task, variant, actors, _figures(summary), flush=True)
    return results


def _pong_config(algo: str, into: Path) -> Path:
    """The Pong config's environment, network and optimizer with algo's keys (the CartPole config's, rollout
    length 5, as the Pong config's), 2 actors."""
    pong = yaml.safe_load((CONFIGS / "a3c_pong.yaml").read_text())
    algorithm = yaml.safe_load((CONFIGS / f"{algo}.yaml").read_text())["algorithm"]
    algorithm.update({"n_steps": 5, "gamma": 0.99, "entropy_coef": 0.01, "max_grad_norm": 0.5})
    pong.update(experiment=f"{algo}-pong", algorithm=algorithm)
    pong["trainer"].update(workers=2, target_return=None)
    path = into / f"{algo}_pong.yaml"
    path.write_text(yaml.safe_dump(pong))
    return path


def env_alone(task: str, seconds: float) -> float:
    """Env steps/s of one process stepping the task's env batch (the config's envs per worker) with random
    actions, as a worker steps it; x 2 for the machine's 2 cores."""
    import numpy as np

    from framework.rl.envs import EnvBatch
    from framework.train.config import load_config

    config = load_config(CONFIGS / ("a3c.yaml" if task == "cartpole" else "a3c_pong.yaml"))
    env = config["env"]
    batch = EnvBatch(env["id"], env["kwargs"], env["envs_per_worker"], seed=0)
    rng = np.random.default_rng(0)
    n = batch.action_head.size
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch.step(rng.integers(0, n, len(batch)))
        steps += len(batch)
    rate = steps / (time.perf_counter() - start)
    batch.close()
    return 2 * rate


def sample_factory(python: str, task: str, seconds: float) -> float | None:
    """sample-factory APPO's env steps/s on task (2 workers, as ../shared/baselines/README.md runs it)."""
    if not Path(python).exists():
        return None
    train_dir = tempfile.mkdtemp(prefix="sf-")
    if task == "cartpole":
        args = ["-m", "sf_examples.train_gym_env", "--algo=APPO", "--env=CartPole-v1", "--num_envs_per_worker=20",
                "--use_rnn=False", "--recurrence=1", "--with_vtrace=False", "--batch_size=512", "--reward_scale=0.1"]
        per_step = 1
    else:
        args = ["-m", "sf_examples.atari.train_atari", "--env=atari_pong", "--num_envs_per_worker=4"]
        per_step = 4
    args += ["--device=cpu", "--num_workers=2", f"--train_dir={train_dir}", "--experiment=bench"]
    # Its own session: at the end the whole group goes (its spawned workers and learner outlive a killed main).
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([python, *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(seconds)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # the group had ended by itself
                pass
            proc.wait()
        log.seek(0)
        text = log.read()
    values = [float(v) for v in SF_FPS.findall(text) if v != "nan"]
    steady = values[3:] or values  # its first 30 s include start-up
    return statistics.mean(steady) / per_step if steady else None


def throughput(seconds: float, sf_python: str) -> dict:
    """Env steps/s of each algorithm on CartPole and Pong, the env alone, sample-factory's APPO."""
    results: dict = {}
    pong_dir = Path(tempfile.mkdtemp(prefix="pong-configs-"))
    variants = (("a3c", []), ("impala", []), ("impala", ["algorithm.learners=2"]), ("appo", []))
    for task in ("cartpole", "pong"):
        for algo, sets in variants:
            config = CONFIGS / f"{algo}.yaml" if task == "cartpole" else _pong_config(algo, pong_dir)
            name = algo + (" (2 learners)" if sets else "")
            summary, _, _ = _run(config, [*sets, "trainer.target_return=null", f"trainer.max_seconds={seconds}"],
                                 seconds + 600)
            results[f"{task}/{name}"] = {**_figures(summary), "load": load()}
            print(task, name, results[f"{task}/{name}"], flush=True)
        results[f"{task}/env alone x 2"] = {"steps_per_second": env_alone(task, min(seconds, 20.0)), "load": load()}
        results[f"{task}/sample-factory APPO"] = {"steps_per_second": sample_factory(sf_python, task, seconds + 30),
                                                 "load": load()}
        print(task, "env / sample-factory", results[f"{task}/env alone x 2"], results[f"{task}/sample-factory APPO"],
              flush=True)
    return results


def pong(algorithms: list[str], seconds: float) -> dict:
    """One seed of each algorithm's Pong config for `seconds`: its figures and its return curve as (seconds,
    env steps, mean return of the last 100 episodes), a point every 10 s."""
    results: dict = {}
    for algo in algorithms:
        summary, run_dir, started = _run(CONFIGS / f"{algo}_pong.yaml",
                                         ["seed=0", f"trainer.max_seconds={seconds}", "logging.log_every_s=10"],
                                         seconds + 900)
        curve = [(e.wall_time - started, e.step, e.value) for e in window_events(run_dir)]
        results[algo] = {**_figures(summary), "run": run_dir.name, "load": load(), "curve": curve}
        print("pong", algo, _figures(summary), flush=True)
    return results


def scaling(actor_counts: list[int], learner_counts: list[int], seconds: float, warmup: float) -> dict:
    """IMPALA on CartPole with each count of actors and of learners on this machine's cores: env steps/s (the mean
    of perf/env_steps_per_s logged past the first `warmup` seconds), updates/s and the policy lag."""
    runs: dict = {}
    for learners in learner_counts:
        for actors in actor_counts:
            summary, run_dir, _ = _run(CONFIGS / "impala.yaml",
                                       [f"trainer.workers={actors}", f"algorithm.learners={learners}",
                                        "trainer.target_return=null", f"trainer.max_seconds={seconds}",
                                        "logging.log_every_s=1"], seconds + 300)
            steady = {tag.split("/")[1]: steady_mean(run_dir, tag, warmup)
                      for tag in ("perf/env_steps_per_s", "perf/updates_per_s", "perf/policy_lag")}
            runs[f"{actors}/{learners}"] = {**steady, "whole_run_steps_per_s": summary["steps_per_second"]}
            print("scaling", actors, "actors", learners, "learners", runs[f"{actors}/{learners}"], flush=True)
    return {"machine": machine_line(), "actors": actor_counts, "learners": learner_counts, "seconds": seconds,
            "warmup": warmup, "runs": runs}


# ---- the page ------------------------------------------------------------------------------------------------
def _mean_std(values: list[float], digits: int = 1) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def learning_section(results: dict) -> list[str]:
    rows = []
    for task, (env_id, target, pattern, budget, _) in TASKS.items():
        for algo in ALGORITHMS:
            runs = results.get(f"{task}/{algo}")
            if not runs:
                continue
            solved = [r for r in runs if r["solved_at_seconds"] is not None]
            rows.append([env_id, f"configs/{pattern.format(algo=algo)}", f"{len(solved)} of {len(runs)}",
                         _mean_std([r["solved_at_seconds"] for r in solved]) + " s",
                         f"{statistics.mean(r['env_steps'] for r in runs):,.0f}",
                         f"{statistics.mean(r['steps_per_second'] for r in runs):,.0f}",
                         _mean_std([r["policy_lag_mean"] for r in runs if r["policy_lag_mean"] is not None], 2)])
    seeds = sorted({r["seed"] for runs in results.values() for r in runs})
    budgets = ", ".join(f"{TASKS[t][0]} {TASKS[t][3]} s" for t in TASKS)
    return ["## Time to target", "",
            f"The shipped configs, seeds {', '.join(map(str, seeds))}, one run at a time, each until the mean of its "
            f"last 100 episode returns reached the target (CartPole 475, LunarLander 200) or its budget ({budgets}) "
            f"ran out; CartPole's runs log a point of their curve every 0.1 s (the default 1 s leaves one or two in a run of a "
            f"second, and the logging takes some of their time). Seconds to the target as mean ± std over the seeds "
            f"that reached it; env steps and steps/s "
            f"averaged over all runs; policy lag: updates applied between the parameters an update's data was acted "
            f"with and the update.", "",
            markdown_table(["task", "config", "reached", "seconds to target", "env steps", "env steps/s",
                            "policy lag"], rows), "", "![CartPole return curves](actor_learner_cartpole.png)", "",
            "![LunarLander return curves](actor_learner_lunarlander.png)", ""]


def lag_section(results: dict, actor_counts: list[int], seconds: dict[str, float]) -> list[str]:
    rows = []
    for task in TASKS:
        for variant in ("impala", "impala-no-vtrace", "a3c"):
            cells = []
            for actors in actor_counts:
                r = results.get(f"{task}/{variant}/{actors}")
                if r is None:
                    cells.append("-")
                    continue
                reached = (f"target at {r['solved_at_seconds']:.0f} s" if r["solved_at_seconds"] is not None
                           else f"{r['mean_return']:.0f}")
                cells.append(f"{reached}, lag {r['policy_lag_mean']:.1f}")
            label = {"impala": "IMPALA, V-trace", "impala-no-vtrace": "IMPALA, vtrace: false", "a3c": "A3C"}[variant]
            rows.append([TASKS[task][0], label, *cells])
    budgets = ", ".join(f"{TASKS[t][0]} {seconds[t]:.0f} s" for t in TASKS)
    return ["## Policy lag", "",
            f"The CartPole and LunarLander configs with more and more actors (A3C: workers) on the same 2 cores, seed "
            f"0, one run each for a fixed budget ({budgets}), stopping at the target. Each cell: when the target was "
            f"reached (or, when it was not, the mean return of the last 100 episodes at the end), and the mean "
            f"policy lag in updates. More processes than cores lag further behind. "
            + " ".join(_lag_outcome(results, task, actor_counts) for task in TASKS), "",
            markdown_table(["task", "algorithm", *[f"{n} actors" for n in actor_counts]], rows), ""]


LAG_VARIANTS = {"impala": "IMPALA with V-trace", "impala-no-vtrace": "IMPALA with `vtrace: false`", "a3c": "A3C"}
"""The policy-lag part's variants, as its prose names them."""


def _lag_outcome(results: dict, task: str, actor_counts: list[int]) -> str:
    """Which variants reached the task's target at every actor count, and where the others did not, in words."""
    everywhere, missed = [], []
    for variant, name in LAG_VARIANTS.items():
        runs = {n: results[f"{task}/{variant}/{n}"] for n in actor_counts if f"{task}/{variant}/{n}" in results}
        failed = [f"with {n} actors (a mean return of {r['mean_return']:.0f} at the end)" for n, r in runs.items()
                  if r["solved_at_seconds"] is None]
        if failed:
            missed.append(f"{name} did not " + " or ".join(failed))
        elif runs:
            everywhere.append(name)
    said = [f"{_listed(everywhere)} reached the target at every count"] if everywhere else []
    return f"{TASKS[task][0]}: " + "; ".join(said + missed) + "."


def _listed(names: list[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def throughput_section(results: dict, seconds: float) -> list[str]:
    rows = []
    for task in ("cartpole", "pong"):
        alone = results.get(f"{task}/env alone x 2", {}).get("steps_per_second")
        for name in ("a3c", "impala", "impala (2 learners)", "appo", "sample-factory APPO", "env alone x 2"):
            r = results.get(f"{task}/{name}")
            if r is None:
                continue
            sps = r["steps_per_second"]
            share = f"{sps / alone:.0%}" if sps and alone and name != "env alone x 2" else ""
            rows.append(["CartPole-v1" if task == "cartpole" else "Atari Pong", name,
                         "not run (no venv)" if sps is None else f"{sps:,.0f}", share,
                         "" if r.get("policy_lag_mean") is None else f"{r['policy_lag_mean']:.1f}", r["load"]])
    return ["## Throughput", "",
            f"Env steps/s over {seconds:.0f} s of training with 2 actors (A3C: workers) on the 2 cores, one run at a "
            f"time: CartPole with the shipped configs, Pong with the Pong config's environment (hogshare/Atari-v0: 4 "
            f"frames a step, 8 games per actor) and network, each algorithm's CartPole keys and a rollout of 5 steps. "
            f"The env alone: one process stepping a worker's env batch with random actions, x 2 cores. "
            f"sample-factory 2.1.1's APPO in its own venv, 2 workers (CartPole 20 envs each, Pong 4), its settings "
            f"from ../shared/baselines/README.md; its figure is the mean of its 10-second rates past its first 30 s. "
            f"Load before: the 1-minute load average as the run started; nothing else ran, but the average still "
            f"counts, decaying over a few minutes, the processes of the runs before (the policy-lag part's 16 actors "
            f"when it ran just before).",
            "", markdown_table(["task", "what", "env steps/s", "of the env alone", "policy lag", "load before"], rows),
            ""]


def pong_section(results: dict, seconds: float) -> list[str]:
    a3c = A3C_PONG
    rows = [["A3C", "configs/a3c_pong.yaml, trainer.workers=2", f"{a3c['hours'] * 60:.0f} min",
             f"{a3c['env_steps']:,}", f"{a3c['env_steps'] / (a3c['hours'] * 3600):,.0f}", f"{a3c['first']:.1f}",
             f"{a3c['at_60_min']:.1f}", f"{a3c['end']:.1f}", "not reached", "-"]]
    for algo in ("impala", "appo"):
        r = results.get(algo)
        if r is None:
            continue
        returns = [v for _, _, v in r["curve"]] or [float("nan")]
        at_hour = next((v for t, _, v in r["curve"] if t >= 3600), None)
        solved = r["solved_at_seconds"]
        reached = "not reached" if solved is None else (
            f"{solved / 60:.0f} min, {next(n for t, n, v in r['curve'] if v >= PONG_TARGET):,} env steps")
        rows.append([algo.upper(), f"configs/{algo}_pong.yaml", f"{r['wall_seconds'] / 60:.0f} min",
                     f"{r['env_steps']:,}", f"{r['steps_per_second']:,.0f}", f"{returns[0]:.1f}",
                     "-" if at_hour is None else f"{at_hour:.1f}", f"{returns[-1]:.1f}", reached,
                     "-" if r["policy_lag_mean"] is None else f"{r['policy_lag_mean']:.2f}"])
    return ["## Pong", "",
            f"One seed (0) of each algorithm's Pong config on the 2 cores, the A3C paper's feed-forward agent, for "
            f"up to {seconds / 60:.0f} minutes (the wall time of the A3C run in [atari.md](atari.md), `{a3c['run']}`, "
            f"whose figures are that page's; its curve is there), stopping where the configs' target is reached: a "
            f"mean return of {PONG_TARGET:g} over the last 100 episodes. Returns: that mean when first logged, at 60 "
            f"minutes and at the end. Env steps/s over the whole run, logging and checkpoints included; the "
            f"actor-learner runs are 4 processes on the 2 cores (2 actors, a learner, the main process).", "",
            markdown_table(["algorithm", "config", "wall time", "env steps", "env steps/s", "first", "at 60 min",
                            "at the end", f"reached {PONG_TARGET:g}", "policy lag"], rows), "",
            "![Pong return curves](actor_learner_pong.png)", ""]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def scaling_section(results: dict) -> list[str]:
    actor_counts, runs = results["actors"], results["runs"]
    rows = []
    for learners in results["learners"]:
        cells = []
        for actors in actor_counts:
            r = runs.get(f"{actors}/{learners}")
            cells.append("-" if r is None or r["env_steps_per_s"] is None else
                         f"{r['env_steps_per_s']:,.0f} (lag {r['policy_lag']:.1f})")
        rows.append([_count(learners, "learner"), *cells])
    best_rate, best = max((r["env_steps_per_s"] or 0, key) for key, r in runs.items())
    best_actors, best_learners = (int(n) for n in best.split("/"))
    return ["## Scaling", "",
            f"IMPALA on CartPole-v1 (configs/impala.yaml: 16 envs per actor, 20-step trajectories, batches of 2) "
            f"with more actors and Hogwild learners, on {results['machine']}, one run at a time on the CPUs "
            f"alone. Each cell: env steps/s, the mean of "
            f"the run's perf/env_steps_per_s past its first {results['warmup']:g} s of a {results['seconds']:g}-s "
            f"run, and the mean policy lag in learner updates. Highest: {best_rate:,.0f} env steps/s with "
            f"{_count(best_actors, 'actor')} and {_count(best_learners, 'learner')}.", "",
            markdown_table(["", *[_count(n, "actor") for n in actor_counts]], rows), "",
            "![IMPALA's env steps/s against actors and learners](actor_learner_scaling.png)", ""]


def plot_pong(results: dict) -> None:
    """The Pong curves against minutes and against env steps, A3C's figures as points."""
    def draw(by_time, by_steps) -> None:
        for algo, r in results.items():
            minutes, steps, returns = zip(*r["curve"]) if r["curve"] else ((), (), ())
            by_time.plot([t / 60 for t in minutes], returns, color=COLORS[algo], label=algo.upper())
            by_steps.plot([n / 1e6 for n in steps], returns, color=COLORS[algo], label=algo.upper())
        a3c = A3C_PONG
        by_time.plot([60, a3c["hours"] * 60], [a3c["at_60_min"], a3c["end"]], "o", color=COLORS["a3c"],
                     label=f"A3C ({a3c['run']})")
        by_steps.plot([a3c["env_steps"] / 1e6], [a3c["end"]], "o", color=COLORS["a3c"], label="A3C, at its end")

    plot_pong_curves(draw, "minutes", "Atari Pong on 2 cores, seed 0", RESULTS / "actor_learner_pong.png")


def plot(results: dict) -> None:
    """One PNG per task: each algorithm's return curves over its seeds, the target dashed."""
    for task, (env_id, target, _, _, _) in TASKS.items():
        series = [(algo, COLORS[algo], [r["curve"] for r in results[f"{task}/{algo}"]])
                  for algo in ALGORITHMS if results.get(f"{task}/{algo}")]
        if series:
            plot_return_curves(series, f"{env_id}: mean return of the last 100 episodes", "seconds",
                               RESULTS / f"actor_learner_{task}.png", target=target)


def plot_scaling(results: dict) -> None:
    """Env steps/s against the number of actors, one line per number of learners (actor_learner_scaling.png)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for learners in results["learners"]:
        points = [(a, results["runs"][f"{a}/{learners}"]["env_steps_per_s"]) for a in results["actors"]
                  if results["runs"].get(f"{a}/{learners}", {}).get("env_steps_per_s") is not None]
        ax.plot(*zip(*points), marker="o", label=_count(learners, "learner"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(results["actors"], [str(a) for a in results["actors"]])
    ax.set_xlabel("actors")
    ax.set_ylabel("env steps/s")
    ax.set_title(f"IMPALA on CartPole-v1, {results['machine'].split(':')[1].split(',')[0].strip()}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(RESULTS / "actor_learner_scaling.png", dpi=110)
    plt.close(fig)


def write_page(data: dict) -> Path:
    sections = []
    if "learning" in data:
        sections += learning_section(data["learning"])
        plot(data["learning"])
    if "lag" in data:
        sections += lag_section(data["lag"], data["lag_actors"], data["lag_seconds"])
    if "throughput" in data:
        sections += throughput_section(data["throughput"], data["throughput_seconds"])
    if "pong" in data:
        sections += pong_section(data["pong"], data["pong_seconds"])
        plot_pong(data["pong"])
    if "scaling" in data:
        sections += scaling_section(data["scaling"])
        plot_scaling(data["scaling"])
    return write_result("actor_learner", "A3C, IMPALA and APPO on 2 cores, and IMPALA on 16", ["\n".join(sections)],
                        command="python -m experiments.actor_learner")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="learning,lag,throughput")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", default="cartpole,lunarlander", help="the learning part's tasks")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--lag-actors", default="2,8,16")
    parser.add_argument("--lag-seconds-cartpole", type=float, default=30)
    parser.add_argument("--lag-seconds-lunarlander", type=float, default=240)
    parser.add_argument("--throughput-seconds", type=float, default=40)
    parser.add_argument("--sf-python", default=os.environ.get("HOGSHARE_SF_PYTHON", "/tmp/sf/bin/python"))
    parser.add_argument("--pong-algorithms", default="impala,appo")
    parser.add_argument("--pong-seconds", type=float, default=round(A3C_PONG["hours"] * 3600, -2))
    parser.add_argument("--scaling-actors", default="1,2,4,8,16")
    parser.add_argument("--scaling-learners", default="1,2,3,4")
    parser.add_argument("--scaling-seconds", type=float, default=10)
    parser.add_argument("--scaling-warmup", type=float, default=3)
    parser.add_argument("--merge-scaling", type=Path, help="an actor_learner.json whose scaling part to take")
    args = parser.parse_args()
    data = json.loads(JSON.read_text()) if JSON.exists() else {}
    parts = args.parts.split(",")  # --parts none: rewrite the page from the JSON alone
    if "learning" in parts:
        data["learning"] = {**data.get("learning", {}),
                            **learning(list(range(args.first_seed, args.first_seed + args.seeds)),
                                       args.tasks.split(","))}
    if "lag" in parts:
        data["lag_actors"] = [int(n) for n in args.lag_actors.split(",")]
        data["lag_seconds"] = {"cartpole": args.lag_seconds_cartpole, "lunarlander": args.lag_seconds_lunarlander}
        data["lag"] = lag(data["lag_actors"], data["lag_seconds"])
    if "throughput" in parts:
        data["throughput_seconds"] = args.throughput_seconds
        data["throughput"] = throughput(args.throughput_seconds, args.sf_python)
    if "pong" in parts:
        data["pong_seconds"] = args.pong_seconds
        data["pong"] = {**data.get("pong", {}), **pong(args.pong_algorithms.split(","), args.pong_seconds)}
    if "scaling" in parts:
        data["scaling"] = scaling([int(n) for n in args.scaling_actors.split(",")],
                                  [int(n) for n in args.scaling_learners.split(",")], args.scaling_seconds,
                                  args.scaling_warmup)
    if args.merge_scaling is not None:
        data["scaling"] = json.loads(args.merge_scaling.read_text())["scaling"]
    JSON.write_text(json.dumps(data, indent=1))
    print(write_page(data))


if __name__ == "__main__":
    main()
