"""Atari: `hogshare/Atari-v0`, an ALE game with the usual A3C/DQN preprocessing, as a wrapper chain (`make_atari`)
and as ale-py's C++ vector env (`make_atari_vector`, which EnvBatch steps a worker's games with: its speed against
the wrapper chain is in experiments/results/atari.md). Every ALE id (ALE/Breakout-v5, BreakoutNoFrameskip-v4) is
built as that, with the id as its game (`ids.env_source`): rl-zoo's convention. Importing this module registers
the id."""
from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

ATARI_ID = "hogshare/Atari-v0"

ALE_ENTRY_POINT = "ale_py.env:AtariEnv"
"""The entry point of every id ale-py registers (ALE/Breakout-v5, BreakoutNoFrameskip-v4, ...)."""


def make_atari(game: str = "ALE/Pong-v5", frame_stack: int = 4, screen_size: int = 84, noop_max: int = 30,
               terminal_on_life_loss: bool = False, obs_type: str = "rgb", **kwargs: Any) -> gym.Env:
    """An ALE game preprocessed as in A3C/DQN: up to noop_max no-ops at reset, 4 frames per action (max of the
    last two), 84x84 grayscale uint8, the last frame_stack frames stacked: observations (k, 84, 84).

    With obs_type "ram" the observations are the console's 128 bytes of RAM instead, the last frame_stack of
    them stacked, (k, 128) uint8, which the model reads through its MLP: ALE repeats each action 4 frames
    itself (there is no screen to max-pool or resize), and screen_size, noop_max and terminal_on_life_loss,
    which belong to the screen's preprocessing, are not used. kwargs go to the ALE environment (e.g.
    repeat_action_probability); registered as `hogshare/Atari-v0`.
    """
    importlib.import_module("ale_py")  # registers the ALE/ ids
    if obs_type == "ram":
        return FrameStackObservation(gym.make(game, obs_type="ram", frameskip=4, **kwargs), frame_stack)
    env = gym.make(game, frameskip=1, obs_type=obs_type, **kwargs)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=4, screen_size=screen_size,
                             terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True, scale_obs=False)
    return FrameStackObservation(env, frame_stack)


def make_atari_vector(num_envs: int, game: str = "ALE/Pong-v5", frame_stack: int = 4, screen_size: int = 84,
                      noop_max: int = 30, terminal_on_life_loss: bool = False,
                      autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP, **kwargs: Any) -> gym.vector.VectorEnv:
    """num_envs games of `make_atari` as one ale-py AtariVectorEnv (C++, one thread: a worker owns one core).

    The same preprocessing, unclipped rewards and no FIRE at reset, as the wrapper chain; the game's
    registered settings (sticky actions, frame limit) unless kwargs override them. What still differs is
    said in tests/rl/test_env_batch.py: the no-op counts come from another generator, and
    the stack is padded with zero frames after a reset where the wrapper repeats the first frame.
    """
    importlib.import_module("ale_py")
    from ale_py.vector_env import AtariVectorEnv

    settings = {**gym.spec(game).kwargs, **kwargs}
    settings.pop("frameskip", None)  # frames are skipped (4, max-pooled) as in AtariPreprocessing, not by ALE
    return AtariVectorEnv(settings.pop("game"), num_envs, num_threads=1, autoreset_mode=autoreset_mode,
                          img_height=screen_size, img_width=screen_size, stack_num=frame_stack, frameskip=4,
                          noop_max=noop_max, episodic_life=terminal_on_life_loss, reward_clipping=False,
                          use_fire_reset=False, **settings)


if ATARI_ID not in gym.envs.registry:
    gym.register(ATARI_ID, entry_point=make_atari, vector_entry_point=make_atari_vector)
