"""The one acting path (rl.actor): what workers, actors, evaluation and Policy run from observation to action."""
import gymnasium as gym
import numpy as np
import pytest

import framework
from framework.algorithms.a3c.plugin import ALGORITHM
from framework.rl.actor import Actor
from framework.rl.spaces import ActionHead
from framework.train.config import validate


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "custom_envs:DictGoal"])
def test_choose_draws_with_the_given_noise_and_records_the_log_probability_of_what_it_drew(env_id):
    config = validate({"env": {"id": env_id}, "model": {"hidden": [8]}})
    model, env = ALGORITHM.build_model(config), ALGORITHM.env_info(config)
    actor = Actor(model, env)
    obs = actor.observe(np.random.default_rng(0).standard_normal((5, *env.layout.shape)).astype(np.float32))
    noise = env.action_head.draw_noise((5,), np.float32, "cpu")
    choice = actor.choose(obs, None, noise=noise, log_probs=True)
    head = model.policy_array(obs)[0]
    log_std = None if model.log_std is None else model.log_std.data_array
    np.testing.assert_array_equal(choice.actions, env.action_head.sample(head, noise, log_std))
    with framework.no_grad():
        expected = env.action_head.log_prob(framework.as_tensor(head), framework.as_tensor(choice.actions),
                                            model.log_std).numpy()
    np.testing.assert_allclose(choice.log_probs, expected, rtol=1e-6)
    assert actor.choose(obs, None, noise=noise).log_probs is None  # recorded only when asked for
    greedy = actor.choose(obs, None, deterministic=True).actions
    np.testing.assert_array_equal(greedy, env.action_head.greedy(head))


def test_a_row_whose_policy_output_is_not_finite_still_acts_and_records_a_nan_log_probability():
    head = ActionHead(gym.spaces.Discrete(3))
    outputs = np.array([[0.0, 1.0, 2.0], [np.nan, 1.0, 0.0], [3.0, 0.0, 0.0]], dtype=np.float32)
    actions = head.sample(outputs, head.noise(np.full((3, 3), 0.5, dtype=np.float32)))
    log_probs = head.behaviour_log_prob(outputs, actions)
    assert np.isnan(log_probs[1]) and np.isfinite(log_probs[[0, 2]]).all()
    assert actions.tolist()[0] == 2 and 0 <= actions[1] < 3
