"""`evaluate_policy(policy, env, episodes, seed, deterministic)`: the return of a trained policy in gymnasium envs and
vector envs, the same as `evaluate`'s on the same env and seeds (real runs and envs)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from framework.runtime.formatting import significant
from framework.train import evaluate_policy, load_policy
from framework.train.policy import load_trained
from run_configs import cartpole_config
from train_cli import only_run_dir, run_cli, write_config


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    """A short CartPole run of an LSTM policy; read-only."""
    logdir = tmp_path_factory.mktemp("lstm")
    config = write_config(logdir.parent / "lstm.yaml", cartpole_config(total_steps=3000, model={"lstm": True}))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    return only_run_dir(logdir)


def _evaluate(run_dir, episodes, seed):
    config, algorithm, model = load_trained(run_dir)
    metrics = algorithm.evaluate(model, config, episodes, seed).metrics
    return metrics["return_mean"], metrics["return_std"]


@pytest.mark.parametrize("which", ["finished_run", "lstm_run"])
def test_evaluate_policy_agrees_with_evaluate_on_the_same_env_and_seeds(which, request):
    run_dir = request.getfixturevalue(which)
    policy = load_policy(run_dir)
    expected = _evaluate(run_dir, 6, 11)
    assert evaluate_policy(policy, gym.make("CartPole-v1"), episodes=6, seed=11) == expected
    vector = gym.make_vec("CartPole-v1", num_envs=6, vectorization_mode="sync")
    assert evaluate_policy(policy, vector, episodes=6, seed=11) == expected
    done = run_cli("evaluate", "--run", run_dir, "--episodes", "6", "--seed", "11")
    assert done.stdout.startswith(f"return over 6 greedy episodes: {significant(expected[0])} ± "
                                  f"{significant(expected[1])}")


@pytest.mark.parametrize("which", ["finished_run", "lstm_run"])
def test_every_autoreset_mode_of_a_vector_env_plays_the_same_episodes(which, request):
    """Two envs play seven episodes (three and four): the autoresets are read as each mode makes them."""
    policy = load_policy(request.getfixturevalue(which))
    played = {}
    for mode in gym.vector.AutoresetMode:
        envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode})
        played[mode] = evaluate_policy(policy, envs, episodes=7, seed=5, return_episode_rewards=True)
    returns, lengths = played[gym.vector.AutoresetMode.NEXT_STEP]
    assert len(returns) == len(lengths) == 7 and returns == [float(n) for n in lengths]  # CartPole: 1 a step
    assert all(episodes == played[gym.vector.AutoresetMode.NEXT_STEP] for episodes in played.values()), played
    single = evaluate_policy(policy, gym.make("CartPole-v1"), episodes=2, seed=5, return_episode_rewards=True)
    assert [returns[0], returns[3]] == single[0]  # each env's first episode is seeded as evaluate seeds it


class StepCounter:
    """A policy whose recurrent state counts the steps of each env's episode so far (and keeps what it was given):
    it always pushes left, so a CartPole episode lasts about ten steps."""

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def act(self, obs, state, deterministic=True):
        counts = np.zeros((len(obs), 1)) if state is None else state[0]
        self.seen.append(counts[:, 0].copy())
        return np.zeros(len(obs), dtype=np.int64), (counts + 1,)


@pytest.mark.parametrize("mode", list(gym.vector.AutoresetMode))
def test_a_recurrent_state_starts_each_episode_of_a_vector_env_afresh(mode):
    policy = StepCounter()
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode})
    returns, lengths = evaluate_policy(policy, envs, episodes=6, seed=3, return_episode_rewards=True)
    seen = np.array(policy.seen)
    for j in range(2):
        counts = seen[:, j]
        starts = np.flatnonzero(counts == 0)
        assert len(starts) >= 3, counts  # each of its three episodes starts from a state of None's zeros
        acted = np.diff(starts) - (1 if mode == gym.vector.AutoresetMode.NEXT_STEP else 0)  # the reset step
        assert list(acted[:2]) == lengths[3 * j:3 * j + 2], (counts, lengths)


def test_sampled_actions_and_unseeded_episodes(finished_run):
    policy = load_policy(finished_run)
    env = gym.make("CartPole-v1")
    mean, std = evaluate_policy(policy, env, episodes=3, deterministic=False)
    assert mean >= 1 and std >= 0
    assert isinstance(mean, float) and isinstance(std, float)


@pytest.mark.parametrize("kwargs, message", [
    ({"episodes": 0}, "episodes: got 0; allowed: an integer >= 1"),
    ({"seed": -1}, "seed: got -1; allowed: None or an integer >= 0"),
    ({"env": "CartPole-v1"}, "env: got 'CartPole-v1'; allowed: a gymnasium Env or VectorEnv"),
    ({"policy": None}, "policy: got None; allowed: a Policy (load_policy, Run.policy) or an object with act(obs, "
                       "state, deterministic)"),
])
def test_bad_arguments_are_refused_in_one_line(finished_run, kwargs, message):
    arguments = {"policy": load_policy(finished_run), "env": gym.make("CartPole-v1"), **kwargs}
    with pytest.raises(ValueError) as refused:
        evaluate_policy(**arguments)
    assert str(refused.value) == message


def test_returns_are_the_envs_own(finished_run):
    """A reward scale the env applies is in the returns as it is (evaluate_policy normalises nothing)."""
    policy = load_policy(finished_run)
    plain = evaluate_policy(policy, gym.make("CartPole-v1"), episodes=3, seed=0, return_episode_rewards=True)
    scaled = gym.wrappers.TransformReward(gym.make("CartPole-v1"), lambda r: 2.0 * r)
    doubled = evaluate_policy(policy, scaled, episodes=3, seed=0, return_episode_rewards=True)
    assert doubled[0] == [2 * r for r in plain[0]] and doubled[1] == plain[1]
    assert np.mean(plain[0]) == evaluate_policy(policy, gym.make("CartPole-v1"), episodes=3, seed=0)[0]
