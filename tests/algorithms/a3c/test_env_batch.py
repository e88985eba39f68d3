"""EnvBatch: batched stepping, auto-reset, truncation vs termination, spaces, and env errors."""
import numpy as np
import pytest

from framework.algorithms.a3c.envs import EnvBatch, EnvError, env_id_problem, make_env


def test_batch_steps_resets_and_reports_episodes():
    batch = EnvBatch("CartPole-v1", {}, n=3, seed=7)
    assert batch.obs.shape == (3, 4) and batch.obs.dtype == np.float32
    returns, lengths, steps = [], [], 0
    while len(returns) < 6:
        out = batch.step(np.ones(3, dtype=np.int64))  # always push right: episodes end quickly
        steps += 3
        returns += out.episode_returns
        lengths += out.episode_lengths
        assert not out.truncated.any()
    assert returns == [float(n) for n in lengths]  # CartPole pays 1 per step
    assert all(5 <= n < 100 for n in lengths)
    assert np.all(np.abs(batch.obs) < 1.0)  # reset observations are small


def test_same_seed_same_trajectory():
    a, b = EnvBatch("CartPole-v1", {}, 2, seed=3), EnvBatch("CartPole-v1", {}, 2, seed=3)
    np.testing.assert_array_equal(a.obs, b.obs)
    for _ in range(20):
        a.step(np.array([0, 1])), b.step(np.array([0, 1]))
    np.testing.assert_array_equal(a.obs, b.obs)


def test_truncation_is_reported_with_the_last_observation():
    batch = EnvBatch("CartPole-v1", {"max_episode_steps": 4}, n=2, seed=0)
    for _ in range(3):
        out = batch.step(np.array([0, 1]))
        assert not out.truncated.any()
    before = batch.obs.copy()
    out = batch.step(np.array([0, 1]))
    assert out.truncated.all() and not out.terminated.any()
    assert out.truncated_index.tolist() == [0, 1]
    assert out.truncated_obs.shape == (2, 4)
    assert not np.allclose(out.truncated_obs, before)  # one step further than before
    assert out.episode_lengths == [4, 4]


def test_discrete_observations_become_one_hot():
    batch = EnvBatch("FrozenLake-v1", {"is_slippery": False}, n=2, seed=0)
    assert batch.obs.shape == (2, 16)
    np.testing.assert_array_equal(batch.obs.sum(axis=1), [1.0, 1.0])
    batch.step(np.array([2, 1]))  # right, down
    assert batch.obs[0, 1] == 1.0 and batch.obs[1, 4] == 1.0


def test_box_actions_are_clipped():
    batch = EnvBatch("Pendulum-v1", {}, n=1, seed=0)
    out = batch.step(np.array([[100.0]]))
    assert np.isfinite(out.rewards).all()


def test_env_that_raises_in_step_names_env_and_worker():
    batch = EnvBatch("fault_envs:RaisingCartPole-v0", {"fail_after": 2}, n=2, seed=0, rank=3)
    batch.step(np.array([0, 0]))
    batch.step(np.array([0, 0]))
    with pytest.raises(EnvError, match=r"RaisingCartPole-v0 \(worker 3, env 0\) raised in step: "
                                       r"RuntimeError: injected fault") as info:
        batch.step(np.array([0, 0]))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_env_that_cannot_be_built_names_env_and_worker():
    with pytest.raises(EnvError, match=r"CartPole-v1 \(worker 2\) could not be built"):
        make_env("CartPole-v1", {"no_such_argument": 1}, rank=2)


def test_env_id_problem():
    assert env_id_problem("CartPole-v1") is None
    assert env_id_problem("fault_envs:RaisingCartPole-v0") is None
    assert "registered gymnasium environment id" in env_id_problem("CartPoel-v1")
    assert "importing 'no_such_module' failed" in env_id_problem("no_such_module:X-v0")
