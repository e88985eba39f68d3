"""CartPole variants that fail on purpose, for the fault tests: use them as `fault_envs:<id>` in a config.

tests/support is on sys.path in the test process (pyproject's pytest `pythonpath`) and on
PYTHONPATH in the `train` subprocesses the tests start.
"""
import multiprocessing
import os
import resource
import sys
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class RaisingCartPole(CartPoleEnv):
    """Raises RuntimeError in step once it has taken `fail_after` steps."""

    def __init__(self, fail_after: int = 50, **kwargs):
        super().__init__(**kwargs)
        self.fail_after, self.steps = fail_after, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.fail_after:
            raise RuntimeError("injected fault in step")
        return super().step(action)


class UnrenderedCartPole(CartPoleEnv):
    """A CartPole with no render mode, whose render gives None (as third-party environments may)."""

    metadata = {**CartPoleEnv.metadata, "render_modes": []}

    def render(self):
        return None


class NonFiniteCartPole(CartPoleEnv):
    """Puts `value` ('nan', 'inf' or '-inf') into the reward or the observation every `every` steps.

    The step count runs across episodes, so `every: 1` poisons every rollout
    and a larger `every` only some of them.
    """

    def __init__(self, where: str = "reward", value: str = "nan", every: int = 1, **kwargs):
        super().__init__(**kwargs)
        if where not in ("reward", "observation"):
            raise ValueError(f"where must be 'reward' or 'observation', got {where!r}")
        self.where, self.value, self.every, self.steps = where, float(value), every, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.steps % self.every == 0:
            if self.where == "reward":
                reward = self.value
            else:
                obs = obs.copy()
                obs[0] = self.value
        return obs, reward, terminated, truncated, info


class StallingCartPole(CartPoleEnv):
    """Sleeps `seconds` in step once it has taken `stall_after` steps: a worker that cannot stop in time."""

    def __init__(self, stall_after: int = 50, seconds: float = 60.0, **kwargs):
        super().__init__(**kwargs)
        self.stall_after, self.seconds, self.steps = stall_after, seconds, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.stall_after:
            time.sleep(self.seconds)
        return super().step(action)


class EvaluationFaultCartPole(CartPoleEnv):
    """Raises RuntimeError in step in the main process only (where runs evaluate), never in a worker.

    A worker's step sleeps `worker_step_s`, so that a run of N steps lasts at least N * worker_step_s / workers
    seconds however fast the machine: long enough for the periodic evaluations a test expects to fail.
    """

    def __init__(self, worker_step_s: float = 0.0005, **kwargs):
        super().__init__(**kwargs)
        self.worker_step_s = worker_step_s

    def step(self, action):
        if multiprocessing.parent_process() is None:
            raise RuntimeError("injected fault in an evaluation")
        time.sleep(self.worker_step_s)
        return super().step(action)


class BlasThreadsCartPole(CartPoleEnv):
    """Writes the BLAS thread counts of the process that steps it (threadpoolctl's view) to `report` on its first
    step in a worker: what a worker's GEMMs run on."""

    def __init__(self, report: str = "", **kwargs):
        super().__init__(**kwargs)
        self.report = report

    def step(self, action):
        if self.report and multiprocessing.parent_process() is not None:
            from threadpoolctl import threadpool_info

            with open(self.report, "w") as f:
                f.write(" ".join(str(pool["num_threads"]) for pool in threadpool_info()))
            self.report = ""
        return super().step(action)


class MemoryReuseCartPole(CartPoleEnv):
    """On its first step in a worker, makes and frees 40 and 20 MiB blocks six times, as an update's temporaries,
    and writes to `report` how many pages the last five rounds faulted in (the process's minor faults)."""

    def __init__(self, report: str = "", **kwargs):
        super().__init__(**kwargs)
        self.report = report

    @staticmethod
    def _temporaries() -> None:
        first, second = np.ones(40 << 20, np.uint8), np.ones(20 << 20, np.uint8)
        del first, second

    def step(self, action):
        if self.report and multiprocessing.parent_process() is not None:
            self._temporaries()  # the first round grows the heap
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(5):
                self._temporaries()
            with open(self.report, "w") as f:
                f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
            self.report = ""
        return super().step(action)


class SlowToMakeCartPole(CartPoleEnv):
    """Takes `seconds` to make in the main process (config checks and model building make one there), saying so on
    stderr first: a start-up that is known to be in progress."""

    def __init__(self, seconds: float = 60.0, **kwargs):
        super().__init__(**kwargs)
        if multiprocessing.parent_process() is None:
            print("making SlowToMakeCartPole", file=sys.stderr, flush=True)
            time.sleep(seconds)


class EndlessCartPole(CartPoleEnv):
    """A CartPole whose episodes never end (never terminated; registered without a time limit). The cart and the
    pole are held within CartPole's bounds, so that it renders however long it runs."""

    def step(self, action):
        obs, reward, _, _, info = super().step(action)
        self.steps_beyond_terminated = None  # CartPole warns once stepped past its end
        self.state = np.clip(self.state, -2.0, 2.0)
        return self.state.astype(np.float32), reward, False, False, info


class SwallowingRenderCartPole(EndlessCartPole):
    """An endless CartPole whose render swallows whatever is raised while it draws, BaseException too, as a
    library's callback into Python may: a stop signal's exception raised in it never reaches the caller."""

    def render(self):
        try:
            time.sleep(0.2)  # most of a frame's time: a signal almost always lands here
        except BaseException:
            pass
        return super().render()


class HugeRewardCartPole(CartPoleEnv):
    """A CartPole whose every step gives a reward of `reward` (1e300 by default): returns of a few hundred digits."""

    def __init__(self, reward: float = 1e300, **kwargs):
        super().__init__(**kwargs)
        self.reward = reward

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, self.reward, terminated, truncated, info


class ExitingCartPole(CartPoleEnv):
    """Ends its worker process with os._exit(`code`) (0 by default: "success") after `exit_after` steps, as a C
    library calling exit() would; in the main process it never exits."""

    def __init__(self, exit_after: int = 20, code: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.exit_after, self.code, self.steps = exit_after, code, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.exit_after and multiprocessing.parent_process() is not None:
            os._exit(self.code)
        return super().step(action)


class SlowStepCartPole(CartPoleEnv):
    """Sleeps `step_s` in every step: a run of N env steps on W workers lasts at least N * step_s / W seconds
    however fast the machine, long enough for what a test does to it meanwhile."""

    def __init__(self, step_s: float = 0.001, **kwargs):
        super().__init__(**kwargs)
        self.step_s = step_s

    def step(self, action):
        time.sleep(self.step_s)
        return super().step(action)


class SpacelessEnv(gym.Env):
    """An env class that never sets `observation_space` (only its action space)."""

    def __init__(self):
        self.action_space = gym.spaces.Discrete(2)


class EmptyBoxCartPole(CartPoleEnv):
    """A CartPole whose `space` ('observation' or 'action') is a Box of shape (0,)."""

    def __init__(self, space: str = "observation", **kwargs):
        super().__init__(**kwargs)
        setattr(self, f"{space}_space", gym.spaces.Box(-1.0, 1.0, (0,), np.float32))


class ExitingOnBuildCartPole(CartPoleEnv):
    """Calls sys.exit(`code`) in its __init__, as a library that gives up may."""

    def __init__(self, code: int = 3, **kwargs):
        sys.exit(code)


class RaisingOnResetCartPole(CartPoleEnv):
    """Raises RuntimeError in every reset (`where`: "everywhere"), or in a worker's only ("workers"): an env that
    cannot start an episode, which config checks in the main process see or do not."""

    def __init__(self, where: str = "everywhere", **kwargs):
        super().__init__(**kwargs)
        self.where = where

    def reset(self, *, seed=None, options=None):
        if self.where == "everywhere" or multiprocessing.parent_process() is not None:
            raise RuntimeError("injected fault in reset")
        return super().reset(seed=seed, options=options)


gym.register("RaisingCartPole-v0", entry_point=RaisingCartPole, max_episode_steps=500)
gym.register("UnrenderedCartPole-v0", entry_point=UnrenderedCartPole, max_episode_steps=500)
gym.register("NonFiniteCartPole-v0", entry_point=NonFiniteCartPole, max_episode_steps=500)
gym.register("StallingCartPole-v0", entry_point=StallingCartPole, max_episode_steps=500)
gym.register("SlowToMakeCartPole-v0", entry_point=SlowToMakeCartPole, max_episode_steps=500)
gym.register("BlasThreadsCartPole-v0", entry_point=BlasThreadsCartPole, max_episode_steps=500)
gym.register("MemoryReuseCartPole-v0", entry_point=MemoryReuseCartPole, max_episode_steps=500)
gym.register("EvaluationFaultCartPole-v0", entry_point=EvaluationFaultCartPole, max_episode_steps=500)
gym.register("EndlessCartPole-v0", entry_point=EndlessCartPole)  # no max_episode_steps: no time limit
gym.register("SwallowingRenderCartPole-v0", entry_point=SwallowingRenderCartPole)
gym.register("HugeRewardCartPole-v0", entry_point=HugeRewardCartPole, max_episode_steps=500)
gym.register("ExitingCartPole-v0", entry_point=ExitingCartPole, max_episode_steps=500)
gym.register("SlowStepCartPole-v0", entry_point=SlowStepCartPole, max_episode_steps=500)
