"""Greedy evaluation of an actor-critic model: batched episodes for `evaluate`, one at a time for a recording.

Both play the `Actor`'s greedy actions (the most likely one of each
component, or the mean: rl.actor, the workers' acting path) in batches of
the run's described environment (rl.envs.info) and stop where
`EvaluationBounds` says: an episode that never ends is cut at
`trainer.eval_max_steps` steps or `trainer.eval_max_seconds` and counts its
return so far.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from framework import nn
from framework.runtime.algorithm import Evaluation, EvaluationBounds, FrameSink
from framework.runtime.formatting import significant
from framework.runtime.schema import ConfigError
from framework.rl.actor import Actor
from framework.rl.envs.batch import BatchStep, EnvBatch
from framework.rl.envs.faults import NoFrames
from framework.rl.envs.info import EnvInfo


def greedy_steps(actor: Actor, envs: EnvBatch) -> Iterator[BatchStep]:
    """Step envs with the actor's greedy actions, for ever."""
    state = actor.initial_state(len(envs))
    while True:
        choice = actor.choose(actor.observe(envs.obs), state, deterministic=True)
        state = choice.state
        yield envs.step(choice.actions)


def _evaluation(returns: np.ndarray, cut: int, bounds: EvaluationBounds) -> Evaluation:
    """The metrics and line of greedy episodes' returns, `cut` of them at the bounds (their return so far)."""
    mean, std = float(returns.mean()), float(returns.std())
    text = f"return over {returns.size} greedy episodes: {significant(mean)} ± {significant(std)}"
    if cut:
        text += (f" ({cut} cut short, at trainer.eval_max_steps = {bounds.max_steps} steps or "
                 f"trainer.eval_max_seconds = {bounds.max_seconds:g} s)")
    return Evaluation({"return_mean": mean, "return_std": std, "episodes_cut": float(cut)}, text)


def evaluate(model: nn.Module, env: EnvInfo, bounds: EvaluationBounds, episodes: int, seed: int) -> Evaluation:
    """Greedy episodes, one per environment of a batch seeded from seed."""
    envs = EnvBatch(env, episodes, seed=seed)
    returns = np.full(episodes, np.nan)
    try:
        for out in bounds.steps(greedy_steps(Actor(model, env), envs)):
            for i, ret in zip(out.episode_index, out.episode_returns):
                if np.isnan(returns[i]):
                    returns[i] = ret
            if not np.isnan(returns).any():
                break
        cut = np.isnan(returns)
        returns[cut] = np.asarray(envs.returns, dtype=np.float64)[cut]
    finally:
        envs.close()
    return _evaluation(returns, int(cut.sum()), bounds)


def record(model: nn.Module, env: EnvInfo, bounds: EvaluationBounds, episodes: int, seed: int,
           frames: FrameSink) -> Evaluation:
    """evaluate's episodes, one at a time in an environment that renders rgb_array frames: episode i is seeded
    with seed + i, as there, so they are the same episodes wherever evaluate's envs are seeded one by one: a loop
    of envs, or CartPole's vector env (not Atari's, whose no-op counts have a generator of their own)."""
    returns: list[float] = []
    cut = 0
    for i in range(episodes):
        try:
            envs = EnvBatch(env, 1, seed=seed + i, render=True)
        except NoFrames as exc:
            raise ConfigError(f"config key 'env.id': {exc}; allowed: an environment with the rgb_array render "
                              f"mode, to record") from None
        episode_return = None
        try:
            more = frames(envs.frames[0])
            steps = greedy_steps(Actor(model, env), envs)
            for out in bounds.steps(steps) if more else ():
                more = frames(envs.frames[0])
                if out.episode_index:
                    episode_return = out.episode_returns[0]
                if not more or episode_return is not None:
                    break
            cut += episode_return is None and more
            returns.append(float(envs.returns[0]) if episode_return is None else episode_return)
        finally:
            envs.close()
        if not more:
            break
    return _evaluation(np.asarray(returns), cut, bounds)
