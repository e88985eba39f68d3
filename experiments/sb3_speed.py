"""Stable-Baselines3's A2C or PPO with rl-baselines3-zoo's hyperparameters for a task, for a number of wall seconds:
its env steps/s, printed as one JSON line. Runs in a venv with `stable-baselines3[extra] rl_zoo3` (zoo.py calls it,
from the checkout's root: `$HOGSHARE_SB3_PYTHON -m experiments.sb3_speed --algo ppo ENV_ID SECONDS`).

rl-zoo's hyperparameters come from the a2c.yml or ppo.yml that rl_zoo3 ships: the entry of ENV_ID, else of the same
task under another version (HalfCheetah-v5 takes HalfCheetah-v4's or -v3's), else `atari` for a NoFrameskip id.
"""
from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any


def hyperparameters(algo: str, env_id: str) -> tuple[str, dict]:
    """(the <algo>.yml key used, its entry) for env_id."""
    import rl_zoo3
    import yaml

    table = yaml.load((Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml").read_text(), Loader=yaml.UnsafeLoader)
    if env_id in table:
        return env_id, dict(table[env_id])
    stem = re.sub(r"-v\d+$", "", env_id)
    versions = sorted((k for k in table if re.sub(r"-v\d+$", "", k) == stem), reverse=True)
    if versions:
        return versions[0], dict(table[versions[0]])
    if "NoFrameskip" in env_id:
        return "atari", dict(table["atari"])
    raise SystemExit(f"no {algo}.yml entry for {env_id}")


def schedule(value: object) -> object:
    """rl-zoo's 'lin_X' strings as SB3 schedules (linear from X to 0)."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress: progress * start
    return value


def stop_after(seconds: float) -> Any:
    """An SB3 callback that stops training after `seconds` of it (`.started`: when training started)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAfter(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.started = 0.0

        def _on_training_start(self) -> None:
            self.started = time.perf_counter()

        def _on_step(self) -> bool:
            return time.perf_counter() - self.started < seconds
    return StopAfter()


def make_model(algo: str, env_id: str, seed: int | None = None) -> tuple[Any, str]:
    """Stable-Baselines3's `algo` on env_id as rl-zoo trains it: its vector env (VecNormalize with the
    algorithm's gamma where rl-zoo normalises, as rl-zoo does), its hyperparameters; and which entry they are."""
    import gymnasium
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    key, params = hyperparameters(algo, env_id)
    for unused in ("n_timesteps", "env_wrapper"):
        params.pop(unused, None)
    n_envs = params.pop("n_envs", 1)
    normalize = params.pop("normalize", False)
    frame_stack = params.pop("frame_stack", None)
    policy = params.pop("policy")
    if isinstance(params.get("policy_kwargs"), str):
        from torch import nn  # noqa: F401  (names the kwargs may use)
        from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike  # noqa: F401
        params["policy_kwargs"] = eval(params["policy_kwargs"])
    for name in ("learning_rate", "clip_range"):
        if name in params:
            params[name] = schedule(params[name])
    if "NoFrameskip" in env_id:
        import ale_py
        gymnasium.register_envs(ale_py)  # the ALE's ids are not gymnasium's own
        env = make_atari_env(env_id, n_envs=n_envs, seed=seed)
    else:
        env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if frame_stack:
        env = VecFrameStack(env, frame_stack)
    if isinstance(normalize, str):  # a2c.yml writes some as "{'norm_obs': True, 'norm_reward': False}"
        normalize = eval(normalize)
    if normalize:
        settings = normalize if isinstance(normalize, dict) else {}
        env = VecNormalize(env, **{"gamma": params.get("gamma", 0.99), **settings})
    model = {"a2c": A2C, "ppo": PPO}[algo](policy, env, device="cpu", seed=seed, **params)
    return model, f"{algo}.yml {key}, {n_envs} envs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("a2c", "ppo"), default="a2c", help="Stable-Baselines3's algorithm")
    parser.add_argument("env_id", help="the task, as gymnasium (or, for Atari, rl-zoo) names it")
    parser.add_argument("seconds", type=float, help="seconds of training")
    args = parser.parse_args()
    model, described = make_model(args.algo, args.env_id)
    stop = stop_after(args.seconds)
    model.learn(total_timesteps=10**9, callback=stop)
    elapsed = time.perf_counter() - stop.started
    print(json.dumps({"hyperparameters": described, "seconds": elapsed,
                      "env_steps": model.num_timesteps, "steps_per_second": model.num_timesteps / elapsed}))


if __name__ == "__main__":
    main()
