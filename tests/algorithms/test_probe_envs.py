"""Every actor-critic algorithm, feed-forward and with an LSTM, learns each probe environment's exact value and
right action within a bounded number of updates (tests/support/probe_envs.py says what each probe isolates).

The workers' own code runs in this process (A3C's worker; IMPALA's and APPO's actor and learner taking turns on
the shared buffer): what is under test is the learning code (rollouts, bootstrapping at truncations and episode
ends, GAE, V-trace, the losses, the update), not the processes around it, which the run tests cover.
"""
from typing import Iterator

import numpy as np
import pytest

import framework
import probe_envs
from in_process import InProcessRun
from framework import algorithms
from framework.train.config import validate

ALGORITHMS = {
    "a3c": {"gae_lambda": 1.0},
    "impala": {"batch_trajectories": 1},
    "appo": {"batch_trajectories": 1, "epochs": 2, "minibatches": 2, "clip_range": 0.2},
    "appo-decoupled": {"name": "appo", "batch_trajectories": 1, "epochs": 2, "minibatches": 2, "clip_range": 0.2,
                       "decoupled": True},
}
UPDATES = 600
"""Updates a run may take (a rollout of 8 envs x 5 steps each): a few times what the slowest probe needs."""
CHECK_EVERY = 50
"""Updates between two checks of what the model has learned; a run stops once two checks in a row find it right."""


def _config(algorithm: str, probe: str, lstm: bool, **model: object) -> dict:
    return validate({
        "env": {"id": f"probe_envs:{probe}", "envs_per_worker": 8},
        "model": {"hidden": [32], "lstm": lstm, "activation": "tanh", **model},
        "algorithm": {"name": algorithm, "gamma": probe_envs.GAMMA, "n_steps": 5, "entropy_coef": 0.0,
                      "max_grad_norm": 10.0, **ALGORITHMS[algorithm]},  # a variant's entry names its plugin
        "optimizer": {"name": "adam", "lr": 0.003},
        "trainer": {"workers": 1, "target_return": None}})


def _training(config: dict) -> Iterator[framework.nn.Module]:
    """Up to UPDATES updates of the config's algorithm, its workers' code in this process: the shared model after
    every CHECK_EVERY of them."""
    run = InProcessRun(config, first_seed=11)
    if config["algorithm"]["name"] == "a3c":
        worker = algorithms.a3c.worker.Worker(run.plugin.build_model(config), run.context(0, "worker"))
        steps = [worker.update]
    else:
        actor, learner = run.actor_and_learner()
        steps = [actor.update, lambda: learner.learn(learner.take_batch())]
    for update in range(1, UPDATES + 1):
        for step in steps:
            step()
        if update % CHECK_EVERY == 0:
            yield run.model


def _greedy_episodes(model: framework.nn.Module, probe: str, episodes: int = 6) -> list[tuple[float, float, int]]:
    """(observation, V, greedy action) at every step of greedy episodes of the probe, the LSTM state carried."""
    env = getattr(probe_envs, probe)()
    seen = []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        state = model.initial_state(1)
        done = False
        while not done:
            with framework.no_grad():
                head, value, state = model(framework.tensor(obs[None]), state)
            action = int(np.argmax(head.numpy()[0]))
            seen.append((float(obs[0]), float(value.numpy()[0]), action))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    return seen


def _mistakes(model: framework.nn.Module, probe: str) -> list[str]:
    """What the model gets wrong at the probe: values off by more than a tenth, wrong greedy actions."""
    expected_values, expected_actions = probe_envs.VALUES[probe], probe_envs.ACTIONS.get(probe, {})
    mistakes = []
    for obs, value, action in _greedy_episodes(model, probe):
        if value != pytest.approx(expected_values[obs], abs=0.1 * max(1.0, abs(expected_values[obs]))):
            mistakes.append(f"V({obs}) = {value:.3f}, expected {expected_values[obs]}")
        if obs in expected_actions and action != expected_actions[obs]:
            mistakes.append(f"greedy action {action} at observation {obs}, expected {expected_actions[obs]}")
    return mistakes


@pytest.mark.parametrize("lstm", [False, True], ids=["feed-forward", "lstm"])
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("probe", sorted(probe_envs.VALUES))
def test_each_algorithm_learns_each_probes_value_and_action(probe, algorithm, lstm):
    right_in_a_row, mistakes = 0, ["no check ran"]
    for model in _training(_config(algorithm, probe, lstm)):
        mistakes = _mistakes(model, probe)
        right_in_a_row = 0 if mistakes else right_in_a_row + 1
        if right_in_a_row == 2:
            return
    pytest.fail(f"after {UPDATES} updates: " + "; ".join(sorted(set(mistakes))))


@pytest.mark.parametrize("sample_freq", [-1, 2], ids=["per-rollout", "every-2-steps"])
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_each_algorithm_learns_a_continuous_action_with_state_dependent_exploration(algorithm, sample_freq):
    config = _config(algorithm, "ContinuousObservationTarget", False, sde=True, sde_sample_freq=sample_freq,
                     log_std_init=-2.0)
    means = {}
    for model in _training(config):
        with framework.no_grad():
            head = model.policy(framework.tensor([[-1.0], [1.0]]))[0].numpy()
        means = {obs: float(head[i, 0]) for i, obs in enumerate((-1.0, 1.0))}
        if all(abs(means[obs] - target) < 0.05 for obs, target in probe_envs.TARGETS.items()):
            return
    pytest.fail(f"after {UPDATES} updates the greedy actions are {means}, expected {probe_envs.TARGETS}")
