"""Stable-Baselines3's A2C or PPO with rl-baselines3-zoo's hyperparameters for a task, trained for a budget of env
steps on one seed, then scored as zoo.py scores hogshare's runs: 10 greedy episodes (the normalisation statistics
frozen), printed as one JSON line with the mean of its last 100 training episodes. Runs in a venv with
`stable-baselines3[extra] rl_zoo3`, from the checkout's root:
`$HOGSHARE_SB3_PYTHON -m experiments.sb3_score --algo ppo ENV_ID STEPS --seed 0`. It checks what rl-zoo's own
settings reach on this machine and this version of the env, beside rl-zoo's published figure.
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread, as each hogshare worker runs

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from experiments.sb3_speed import make_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("a2c", "ppo"), default="ppo", help="Stable-Baselines3's algorithm")
    parser.add_argument("env_id", help="the task, as gymnasium (or, for Atari, rl-zoo) names it")
    parser.add_argument("steps", type=float, help="env steps of training (the budget)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=10, help="greedy episodes of the score")
    args = parser.parse_args()
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    model, described = make_model(args.algo, args.env_id, args.seed)
    started = time.perf_counter()
    model.learn(total_timesteps=int(args.steps))
    seconds = time.perf_counter() - started
    env = model.get_env()
    if isinstance(env, VecNormalize):
        env.training, env.norm_reward = False, False
    mean, std = evaluate_policy(model, env, n_eval_episodes=args.episodes, deterministic=True)
    training = [episode["r"] for episode in model.ep_info_buffer]
    print(json.dumps({"hyperparameters": described, "env_id": args.env_id, "seed": args.seed,
                      "env_steps": model.num_timesteps, "seconds": round(seconds, 1), "greedy_mean": float(mean),
                      "greedy_std": float(std), "last_100_training_mean": float(np.mean(training))}))


if __name__ == "__main__":
    main()
