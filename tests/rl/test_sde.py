"""Generalized state-dependent exploration (rl.sde, `model.sde`): Stable-Baselines3's distribution, the exploration
matrices' lifetime, the model's policy output, the config's refusals, and acting (training is in
tests/algorithms/test_probe_envs.py)."""
import gymnasium as gym
import numpy as np
import pytest

import framework
from framework.algorithms.a3c.plugin import ALGORITHM
from framework.algorithms.a3c.worker import Worker
from framework.rl import sde
from framework.rl.actor import Actor
from framework.rl.model import ActorCritic
from framework.rl.spaces import ActionHead
from framework.runtime.schema import ConfigError
from framework.train.config import validate
from in_process import InProcessRun

MEAN = np.array([[0.5, -0.25], [1.0, 0.0]])
LATENT = np.array([[0.3, -1.2, 0.7], [0.0, 0.5, -0.4]])
LOG_STD = np.array([[-1.0, -0.5], [0.0, -2.0], [-1.5, 0.25]])
ACTIONS = np.array([[0.1, 0.9], [1.3, -0.2]])
# Stable-Baselines3 2.9.2's StateDependentNoiseDistribution(2) (full_std, no expln, no squashing) with these
# mean, log_std and latent_sde, in float64: log_prob(ACTIONS), entropy(), and the gradient of their sum to log_std
SB3_LOG_PROB = [-2.7781405333806046, -0.7516941660528931]
SB3_ENTROPY = [2.9615886160624925, 1.502730699754807]
SB3_LOG_STD_GRAD = [[8.938433724764316e-04, 5.820319678346404e-02],
                    [4.437817608138962e-01, 4.890720946638764e-02],
                    [1.256363320409591e-02, 1.566677384498955e+00]]


def _head() -> ActionHead:
    return ActionHead(gym.spaces.Box(-3.0, 3.0, (2,), np.float64))


def test_log_prob_entropy_and_their_gradient_are_stable_baselines3s():
    log_std = framework.nn.Parameter(framework.as_tensor(LOG_STD))
    output = framework.as_tensor(np.concatenate([MEAN, LATENT], 1))
    log_prob, entropy = _head().log_prob_entropy(output, framework.as_tensor(ACTIONS), log_std)
    (log_prob.sum() + entropy.sum()).backward()
    np.testing.assert_allclose(log_prob.detach().numpy(), SB3_LOG_PROB, rtol=1e-12)
    np.testing.assert_allclose(entropy.detach().numpy(), SB3_ENTROPY, rtol=1e-12)
    np.testing.assert_allclose(log_std.grad.numpy(), SB3_LOG_STD_GRAD, rtol=1e-10)
    behaviour = _head().behaviour_log_prob(np.concatenate([MEAN, LATENT], 1), ACTIONS, LOG_STD)
    np.testing.assert_allclose(behaviour, SB3_LOG_PROB, rtol=1e-12)


def test_the_state_dependent_std_is_the_closed_form_of_independent_normals():
    expected = np.sqrt((LATENT ** 2) @ np.exp(2 * LOG_STD) + sde.EPSILON)
    np.testing.assert_allclose(sde.scale(LATENT, LOG_STD), expected, rtol=1e-12)
    with framework.no_grad():
        np.testing.assert_allclose(sde.scale(framework.as_tensor(LATENT), framework.as_tensor(LOG_STD)).numpy(),
                                   expected, rtol=1e-12)


def test_an_action_is_the_mean_plus_the_features_times_an_exploration_matrix_normal_with_that_std():
    head, draws = _head(), 40_000
    output = np.repeat(np.concatenate([MEAN, LATENT], 1)[:1], draws, axis=0)
    noise = head.draw_noise((draws,), np.float64, "cpu", latent=3)
    assert noise.shape == (draws, 3, 2)
    actions = head.sample(output, noise, LOG_STD)
    np.testing.assert_allclose(actions[7], MEAN[0] + LATENT[0] @ (np.exp(LOG_STD) * noise[7]), rtol=1e-12)
    std = sde.scale(LATENT[:1], LOG_STD)[0]
    np.testing.assert_allclose(actions.mean(0), MEAN[0], atol=4 * std.max() / np.sqrt(draws))
    np.testing.assert_allclose(actions.std(0), std, rtol=0.02)
    np.testing.assert_array_equal(head.greedy(output[:2]), MEAN[[0, 0]])  # greedy: the mean, features dropped


@pytest.mark.parametrize("every", [1, 3, 10])
def test_each_envs_exploration_matrix_is_kept_for_every_steps(every):
    noise = _head().draw_noise((10, 4), np.float32, "cpu", latent=5, every=every)
    assert noise.shape == (10, 4, 5, 2) and noise.dtype == np.float32
    for t in range(10):
        np.testing.assert_array_equal(noise[t], noise[t - t % every])  # the draw of its window
    starts = range(0, 10, every)
    assert len({noise[t, env].tobytes() for t in starts for env in range(4)}) == len(starts) * 4


def test_the_models_policy_output_carries_its_features_detached_after_the_mean():
    model = ActorCritic(3, [8, 6], "tanh", False, 2, True, shared_body=False, log_std_init=-2.0, sde=True)
    np.testing.assert_array_equal(model.log_std.detach().numpy(), np.full((6, 2), -2.0))
    obs = framework.as_tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    output, _, _ = model(obs)
    assert output.shape == (4, 8)
    with framework.no_grad():
        np.testing.assert_allclose(output.detach().numpy()[:, 2:], model.body(obs).numpy(), rtol=1e-6)
        np.testing.assert_array_equal(model.forward_rollout(obs.reshape(1, 4, 3), None, None)[0].numpy(),
                                      output.detach().numpy())
    output[:, 2:].sum().backward()  # the features' columns train nothing: the exploration does not shape them
    assert all(p.grad is None or not p.grad.numpy().any() for p in model.body.parameters())
    with pytest.raises(ValueError, match="continuous actions"):
        ActorCritic(3, [8], "tanh", False, 2, False, sde=True)


@pytest.mark.parametrize("sections, message", [
    ({"env": {"id": "CartPole-v1"}, "model": {"sde": True}},
     r"^config key 'model.sde': got true with the actions Discrete\(2\); allowed: true for Box actions"),
    ({"env": {"id": "Pendulum-v1"}, "model": {"sde": True, "factory": "custom_envs:tiny_model"}},
     r"^config key 'model.sde': got true with a model.factory; allowed: true for Box actions and the built-in "),
    ({"env": {"id": "Pendulum-v1"}, "model": {"sde": True, "sde_sample_freq": 0}},
     r"model.sde_sample_freq.*0 is not a frequency"),
], ids=["discrete", "factory", "zero-frequency"])
def test_a_config_sde_cannot_serve_is_refused(sections, message):
    with pytest.raises(ConfigError, match=message):
        validate(sections)


@pytest.mark.parametrize("sample_freq, every", [(-1, 6), (2, 2)], ids=["per-rollout", "every-2-steps"])
def test_a_workers_rollout_draws_its_matrices_as_the_config_says(sample_freq, every):
    config = validate({"env": {"id": "Pendulum-v1", "envs_per_worker": 3}, "model": {"hidden": [4], "sde": True,
                                                                                       "sde_sample_freq": sample_freq},
                       "algorithm": {"n_steps": 6}, "trainer": {"workers": 1}})
    run = InProcessRun(config, first_seed=3)
    worker = Worker(run.plugin.build_model(config), run.context(0, "worker"))
    noise = worker._action_noise()
    assert noise.shape == (6, 3, 4, 1)
    assert all(np.array_equal(noise[t], noise[t - t % every]) for t in range(6))
    assert len({noise[t].tobytes() for t in range(6)}) == len(range(0, 6, every))  # a new draw in each window
    worker.update()  # a rollout and an update run with them
    assert np.isfinite(run.model.log_std.detach().numpy()).all()


def test_acting_greedily_plays_the_mean_and_sampling_records_the_state_dependent_log_prob():
    config = validate({"env": {"id": "Pendulum-v1"}, "model": {"hidden": [8], "sde": True, "log_std_init": -1.0}})
    model, env = ALGORITHM.build_model(config), ALGORITHM.env_info(config)
    actor = Actor(model, env)
    obs = actor.observe(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    output = model.policy_array(obs)[0]
    np.testing.assert_array_equal(actor.choose(obs, None, deterministic=True).actions, output[:, :1])
    choice = actor.choose(obs, None, log_probs=True)
    mean, latent = sde.split(output, 1)
    expected = -0.5 * ((choice.actions - mean) / sde.scale(latent, model.log_std.detach().numpy())) ** 2 \
        - np.log(sde.scale(latent, model.log_std.detach().numpy())) - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(choice.log_probs, expected[:, 0], rtol=1e-5)
