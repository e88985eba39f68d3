"""Why APPO's first Pong config did not learn: a few minutes of it and of variants, with the diagnostics that show it.

The config that did not learn in 65 minutes (-20.4 after 3.6 M env steps) is kept here as BEFORE: A2C's
RMSprop at 7e-4 in torch's form, 2 epochs x 2 minibatches of whole 5-step trajectories over batches of 80
samples (4 updates per 80 env steps, advantages normalised over 40 samples), clip 0.1. Each variant trains for
--steps env steps (its lr held at its initial value: the first 150,000 steps of the configs' linear decays over 10 M
or 40 M stay within 1.5% of it); then the page records, at its end: the policy's entropy, the explained variance of its value targets,
the clip fraction and approximate KL (train/ scalars of its last logging interval), and how many units of each
ReLU layer of its final network are dead (output <= 0 on every one of 800 frames of random play: a dead unit
gets no gradient and never comes back). The last variant is the shipped configs/appo_pong.yaml.

usage: python -m experiments.appo_pong_diagnosis [--steps 150000]
writes experiments/results/appo_pong.md
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import yaml

from experiments.common import REPO, load, markdown_table, scalar_events, train_run, write_result

BEFORE = {
    "experiment": "appo-pong-before", "seed": 0,
    "env": {"id": "hogshare/Atari-v0", "envs_per_worker": 8,
            "kwargs": {"game": "ALE/Pong-v5", "frame_stack": 4, "repeat_action_probability": 0.0}},
    "model": {"hidden": [256], "activation": "relu", "lstm": False},
    "algorithm": {"name": "appo", "gamma": 0.99, "n_steps": 5, "learners": 1, "batch_trajectories": 2,
                  "slots_per_actor": 2, "epochs": 2, "minibatches": 2, "minibatch_split": "trajectories",
                  "clip_range": 0.1, "targets": "gae", "gae_lambda": 0.95, "entropy_coef": 0.01,
                  "value_coef": 0.5, "max_grad_norm": 0.5},
    "optimizer": {"name": "rmsprop", "lr": 0.0007, "alpha": 0.99, "eps": 0.00001, "lr_decay": "linear"},
    "trainer": {"workers": 2, "start_method": "forkserver", "total_steps": 40_000_000, "target_return": None},
    "logging": {"progress": False, "log_every_s": 10},
}
"""configs/appo_pong.yaml as it was when it did not learn (with minibatches of whole trajectories, as it had)."""

VARIANTS = (
    ("the config that did not learn (torch's RMSprop)", BEFORE, []),
    ("the same, RMSprop in TensorFlow's form", BEFORE, ["optimizer.name=rmsprop_tf_like"]),
    ("the same, TensorFlow's form, advantages not normalised", BEFORE,
     ["optimizer.name=rmsprop_tf_like", "algorithm.normalize_advantages=false"]),
    ("configs/appo_pong.yaml (PPO's Atari settings)", None, []),
)
FRAMES = 800
TAGS = ("train/entropy", "train/explained_variance", "train/clip_fraction", "train/approx_kl", "perf/policy_lag")


def dead_units(run_dir: Path) -> list[str]:
    """'dead/all' for each ReLU layer of the run's final network, over FRAMES frames of random play."""
    import framework
    from framework import algorithms, nn
    from framework.rl.envs import EnvBatch
    from framework.train.checkpoint import load_checkpoint
    from framework.train.config import validate

    config = validate(yaml.safe_load((run_dir / "config.yaml").read_text()))
    model = algorithms.get("appo").build_model(config)
    model.load_state_dict(load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["model"])
    envs = EnvBatch(config["env"]["id"], config["env"]["kwargs"], 8, seed=1)
    rng = np.random.default_rng(0)
    frames = []
    for _ in range(FRAMES // 8):
        frames.append(envs.obs.copy())
        envs.step(rng.integers(0, envs.action_head.size, 8))
    envs.close()
    x = framework.tensor(np.concatenate(frames))
    found = []
    with framework.no_grad():
        for layer in model.body:
            x = layer(x)
            if isinstance(layer, nn.ReLU):
                out = x.numpy().reshape(x.shape[0], x.shape[1], -1)
                alive = (out > 0).any(axis=(0, 2))
                found.append(f"{int((~alive).sum())}/{alive.size}")
    return found


def measure(sets: list[str], base: dict | None, steps: int, logdir: Path) -> list[object]:
    """Train one variant for `steps` env steps; its row of the table."""
    if base is None:
        config = REPO / "configs" / "appo_pong.yaml"
        sets = [*sets, "trainer.target_return=null", "logging.progress=false", "logging.log_every_s=10"]
    else:
        config = logdir / "config.yaml"
        config.write_text(yaml.safe_dump(base))
    sets = [*sets, f"trainer.total_steps={steps}", "trainer.max_seconds=7200", "optimizer.lr_decay=none"]
    run_dir = train_run(config, sets, logdir / "run", 7500)
    summary = json.loads((run_dir / "summary.json").read_text())
    last = [scalar_events(run_dir, tag) for tag in TAGS]
    values = [f"{events[-1].value:.3g}" if events else "-" for events in last]
    first_entropy = scalar_events(run_dir, "train/entropy")
    return [f"{summary['env_steps']:,}", f"{first_entropy[0].value:.2f} → {values[0]}" if first_entropy else "-",
            *values[1:], " / ".join(dead_units(run_dir)), f"{summary['mean_return']:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150_000, help="env steps per variant (default 150000)")
    args = parser.parse_args()
    rows = []
    for name, base, sets in VARIANTS:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append([name, *measure(list(sets), base, args.steps, Path(tmp))])
            print(" | ".join(map(str, rows[-1])), flush=True)
    table = markdown_table(["variant", "env steps", "entropy (first → last)", "explained variance", "clip fraction",
                            "approx KL", "policy lag", "dead units: conv 1 / conv 2 / dense", "mean return"], rows)
    write_result("appo_pong", "APPO on Pong: why the first config did not learn", [
        f"Each variant trained for {args.steps:,} env steps on seed 0 ({load()} at the end). Dead units: ReLU units "
        f"whose output is <= 0 on all of {FRAMES} frames of random play, in the final network. An untrained "
        f"network of this shape (PyTorch's initialisation) has a few: about 2/16, 7/32 and 80/256.", table])


if __name__ == "__main__":
    main()
