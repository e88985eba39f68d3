"""CartPole that counts its constructions: each one appends a line (its process id) to the file `count_file` names,
so a test reads back how many environments a whole run built, in every process.

`counting_envs:CountingCartPole` is the env class (built as a loop of envs);
`counting_envs:CountingCartPole-v0` is registered with a vector entry point (a SyncVectorEnv of counting envs that
resets in the same step), so a worker builds its envs as one vector env.
"""
import os

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv


class CountingCartPole(CartPoleEnv):
    """CartPole that appends its process id to count_file when it is built."""

    def __init__(self, count_file: str, **kwargs):
        super().__init__(**kwargs)
        with open(count_file, "a") as f:
            f.write(f"{os.getpid()}\n")


def counting_vector(num_envs: int, count_file: str, autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP):
    """num_envs counting CartPoles as one vector env."""
    return SyncVectorEnv([lambda: gym.wrappers.TimeLimit(CountingCartPole(count_file), 500) for _ in range(num_envs)],
                         autoreset_mode=autoreset_mode)


def constructions(count_file: str) -> int:
    """How many counting environments were built so far."""
    return len(open(count_file).read().split()) if os.path.exists(count_file) else 0


gym.register("CountingCartPole-v0", entry_point=CountingCartPole, max_episode_steps=500,
             vector_entry_point=counting_vector)
