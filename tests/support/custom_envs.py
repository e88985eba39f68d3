"""A user's own environments, networks and plugin, as tests name them in configs (`custom_envs:NAME`).

MoveToGoal: a point on a line moves left or right to a goal (Box observation, Discrete action), solved in a
few seconds. DictGoal: the same with a Dict observation (a Box and a Discrete) and MultiDiscrete actions (the
second component ignored). ImageGoal: a Dict of a (height, width, channels) image and a vector, MultiBinary
actions; ImageGoalBox acts with a Box instead. OffsetGoal: a Tuple observation (a Box and a Discrete starting at -1) and MultiDiscrete actions that
start at [1, -1]. TextObservation: a Text observation space, which A3C cannot read. MyA3C, CountingA3C and WatchedA3C:
plugins (CountingA3C keeps arrays of its own, `build_state`; WatchedA3C has a second role, `roles`).
DyingImpala: IMPALA whose actor or learner is SIGKILLed once while it holds trajectory slots. tiny_model: a
user's network; nan_model: the same with NaN policy weights.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from framework import nn
from framework.rl.model import ActorCriticBase
from framework.algorithms.a3c.plugin import A3C
from framework.algorithms.a3c.worker import Worker
from framework.algorithms.impala.plugin import Impala, ImpalaLearner
from framework.runtime.algorithm import Role
from framework.rl.actor_learner import TrajectoryActor


class MoveToGoal(gym.Env):
    """Reach position 0 from a random start in [-1, 1] with steps of 0.1; reward -0.01 a step, 1 at the goal."""

    def __init__(self, max_steps: int = 50, render_mode: str | None = None):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.max_steps, self.render_mode = max_steps, render_mode

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.pos, self.steps = float(self.np_random.uniform(-1, 1)), 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.pos], dtype=np.float32)

    def _move(self, direction: int) -> tuple[float, bool, bool]:
        self.pos = float(np.clip(self.pos + (0.1 if direction else -0.1), -2, 2))
        self.steps += 1
        reached = abs(self.pos) < 0.05
        return (1.0 if reached else -0.01), reached, self.steps >= self.max_steps

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward, terminated, truncated = self._move(int(action))
        return self._obs(), reward, terminated, truncated, {}


def make_move_to_goal(max_steps: int = 50) -> gym.Env:
    """A factory function: MoveToGoal with a time limit."""
    return MoveToGoal(max_steps)


def not_an_env() -> int:
    return 42


gym.register("MoveToGoal-v0", entry_point=MoveToGoal)


class Lives(gym.Env):
    """A game of `lives` lives that each last `life_steps` steps, paying `reward` a step and reporting info["lives"]
    as ALE's games do; it ends when the last life is lost."""

    def __init__(self, lives: int = 3, life_steps: int = 2, reward: float = 4.0):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.start_lives, self.life_steps, self.reward = lives, life_steps, reward

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.lives, self.steps = self.start_lives, 0
        return np.zeros(1, np.float32), {"lives": self.lives}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        if self.steps % self.life_steps == 0:
            self.lives -= 1
        return np.zeros(1, np.float32), self.reward, self.lives == 0, False, {"lives": self.lives}


class DictGoal(MoveToGoal):
    """MoveToGoal observed as a Dict (position, and a Discrete side), acting with MultiDiscrete([2, 3])."""

    def __init__(self, max_steps: int = 50):
        super().__init__(max_steps)
        self.observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-2.0, 2.0, (1,), np.float32),
                                                  "side": gym.spaces.Discrete(2)})
        self.action_space = gym.spaces.MultiDiscrete([2, 3])

    def _obs(self) -> dict:
        return {"pos": np.array([self.pos], dtype=np.float32), "side": int(self.pos > 0)}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        assert action.shape == (2,) and 0 <= action[1] < 3
        reward, terminated, truncated = self._move(int(action[0]))
        return self._obs(), reward, terminated, truncated, {}


class ImageGoal(MoveToGoal):
    """MoveToGoal observed as a Dict of a 24x24 RGB image (channels last) and the position; MultiBinary(2) actions
    (the first bit moves right)."""

    def __init__(self, max_steps: int = 20):
        super().__init__(max_steps)
        self.observation_space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (24, 24, 3), np.uint8),
                                                  "pos": gym.spaces.Box(-2.0, 2.0, (1,), np.float32)})
        self.action_space = gym.spaces.MultiBinary(2)

    def _obs(self) -> dict:
        image = np.zeros((24, 24, 3), dtype=np.uint8)
        image[:, int((self.pos + 2) * 5.75), 0] = 255
        return {"image": image, "pos": np.array([self.pos], dtype=np.float32)}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        assert action.shape == (2,) and set(np.unique(action)) <= {0, 1}
        reward, terminated, truncated = self._move(int(action[0]))
        return self._obs(), reward, terminated, truncated, {}


class ImageGoalBox(ImageGoal):
    """ImageGoal acting with a Box(-1, 1, (1,)) action: a positive one moves right."""

    def __init__(self, max_steps: int = 20):
        super().__init__(max_steps)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        reward, terminated, truncated = self._move(int(float(np.asarray(action).reshape(-1)[0]) > 0))
        return self._obs(), reward, terminated, truncated, {}


class OffsetGoal(MoveToGoal):
    """MoveToGoal observed as a Tuple (position, side -1 or 0), acting with MultiDiscrete([2, 3], start=[1, -1]):
    a first component of 2 moves right; the env refuses any action outside its space."""

    def __init__(self, max_steps: int = 50):
        super().__init__(max_steps)
        self.observation_space = gym.spaces.Tuple((gym.spaces.Box(-2.0, 2.0, (1,), np.float32),
                                                   gym.spaces.Discrete(2, start=-1)))
        self.action_space = gym.spaces.MultiDiscrete([2, 3], start=[1, -1])

    def _obs(self) -> tuple:
        return np.array([self.pos], dtype=np.float32), int(self.pos > 0) - 1

    def step(self, action: Any) -> tuple[tuple, float, bool, bool, dict]:
        assert self.action_space.contains(np.asarray(action)), action
        reward, terminated, truncated = self._move(int(action[0]) - 1)
        return self._obs(), reward, terminated, truncated, {}


class TextObservation(MoveToGoal):
    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Text(8)


class TinyActorCritic(ActorCriticBase):
    """A user's network: one hidden layer of model.kwargs.width units, a policy and a value head."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, section: dict):
        super().__init__()
        size = int(np.prod(observation_space.shape))
        width = section["kwargs"].get("width", 16)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(size, width), nn.Tanh())
        self.pi = nn.Linear(width, int(action_space.n))
        self.v = nn.Linear(width, 1)

    def forward(self, obs: Any, state: Any = None) -> tuple[Any, Any, Any]:
        h = self.body(obs)
        return self.pi(h), self.v(h)[:, 0], None


def tiny_model(observation_space: gym.Space, action_space: gym.Space, section: dict) -> TinyActorCritic:
    return TinyActorCritic(observation_space, action_space, section)


def nan_model(observation_space: gym.Space, action_space: gym.Space, section: dict) -> TinyActorCritic:
    """tiny_model with NaN policy weights: every policy output is NaN (the values stay finite)."""
    model = TinyActorCritic(observation_space, action_space, section)
    model.pi.weight.data_array[...] = np.nan
    return model


class NoValue(TinyActorCritic):
    """A network whose value has the wrong shape (B, 1)."""

    def forward(self, obs: Any, state: Any = None) -> tuple[Any, Any, Any]:
        h = self.body(obs)
        return self.pi(h), self.v(h), None


def model_without_value(observation_space: gym.Space, action_space: gym.Space, section: dict) -> NoValue:
    return NoValue(observation_space, action_space, section)


def linear_module(observation_space: gym.Space, action_space: gym.Space, section: dict) -> nn.Module:
    """A Module that is no actor-critic (it has forward only)."""
    return nn.Linear(int(np.prod(observation_space.shape)), int(action_space.n))


class MyA3C(A3C):
    """A user's plugin: A3C with another default experiment name."""

    experiment = "my-a3c"


class CountingA3C(A3C):
    """A plugin with arrays of its own (`build_state`): A3C whose workers count their updates, one slot per rank."""

    name = "counting_a3c"

    def build_state(self, config):
        return {"updates": np.zeros(config["trainer"]["workers"], dtype=np.int64)}

    def run_worker(self, ctx):
        worker = Worker(self.worker_model(ctx), ctx)
        update = worker.update

        def counted():
            update()
            ctx.state["updates"][ctx.rank] += 1

        worker.update = counted
        worker.run()


class WatchedA3C(A3C):
    """A plugin with two roles: `trainer.workers` A3C workers, then one `watcher` process. Each process marks its
    slot of the `seen` array (a worker 1, the watcher 100 + its index); the watcher then waits for the run to
    stop. With HOGSHARE_WATCHER_FAILS_ONCE=PATH the watcher raises on its first start (it creates PATH)."""

    name = "watched_a3c"

    def roles(self, config):
        return (Role("worker", config["trainer"]["workers"]), Role("watcher", 1, "run_watcher"))

    def build_state(self, config):
        return {"seen": np.zeros(config["trainer"]["workers"] + 1, dtype=np.int64)}

    def run_worker(self, ctx):
        ctx.state["seen"][ctx.rank] = 1
        super().run_worker(ctx)

    def run_watcher(self, ctx):
        ctx.state["seen"][ctx.rank] = 100 + ctx.index
        marker = os.environ.get("HOGSHARE_WATCHER_FAILS_ONCE")
        if marker and not Path(marker).exists():
            Path(marker).touch()
            raise RuntimeError("the watcher fails")
        while not ctx.stats.should_stop():
            time.sleep(0.05)


def _first_start(variable: str) -> bool:
    """Whether the file named by environment variable `variable` is missing (created now: true once only)."""
    path = os.environ.get(variable)
    if not path or Path(path).exists():
        return False
    Path(path).touch()
    return True


class DyingActor(TrajectoryActor):
    """With HOGSHARE_ACTOR_DIES_ONCE=PATH, actor 0 is SIGKILLed on its first start with a slot half written."""

    def rollout(self, into) -> None:
        if self.ctx.index == 0 and _first_start("HOGSHARE_ACTOR_DIES_ONCE"):
            os.kill(os.getpid(), signal.SIGKILL)
        super().rollout(into)


class DyingLearner(ImpalaLearner):
    """With HOGSHARE_LEARNER_DIES_ONCE=PATH, learner 0 is SIGKILLed on its first start holding a batch it took."""

    def take_batch(self):
        if self.ctx.index == 0 and _first_start("HOGSHARE_LEARNER_DIES_ONCE"):
            self.buffer.take(0, 1, 60.0, self.ctx.stats.should_stop)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().take_batch()


class DyingImpala(Impala):
    """IMPALA whose actor 0 or learner 0 dies once holding trajectory slots (see DyingActor, DyingLearner)."""

    name = "dying_impala"
    actor_class = DyingActor
    learner_class = DyingLearner
