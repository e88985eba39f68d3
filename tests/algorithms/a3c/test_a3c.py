"""The A3C plugin in one process: the acting path, the rollout's forward pass (body
batched, LSTM unrolled) against the step-by-step one, uint8 frames, updates of the shared model for
discrete/continuous actions and LSTM policies, truncation bootstrapping, non-finite updates, evaluation."""
import gymnasium as gym
import numpy as np
import pytest

import framework
from framework import algorithms, compiler, nn, optim
from framework.rl.model import ActorCritic, FrameConv2d
from framework.algorithms.a3c.worker import Worker
from framework.runtime.algorithm import WorkerContext, build_optimizer, learning_rate
from framework.train.config import validate
from framework.runtime.schema import ConfigError
from framework.runtime.run_stats import SKIPPED, UPDATES, RunStats

A3C = algorithms.get("a3c")


def _worker(**sections):
    raw = {"env": {"envs_per_worker": 3}, "model": {"hidden": [16]}, "algorithm": {"n_steps": 5}}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    config = validate(raw)
    framework.manual_seed(0)
    model = A3C.build_model(config).share_memory()
    optimizer = A3C.build_optimizer(model, config).share_memory()
    stats = RunStats(1, A3C.metrics)
    context = WorkerContext(0, 123, config, model, optimizer, stats.writer(0), A3C.build_shared(config, None, range(1)))
    return Worker(A3C.build_model(config), context), model, stats


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_acting_path_equals_the_model_forward(activation):
    model = ActorCritic(4, [8, 8], activation, False, 3, False)
    obs = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    head, state = model.policy_array(obs)
    np.testing.assert_allclose(head, model(framework.from_numpy(obs))[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert state is None


class _Doubling(nn.Module):
    """A layer with a forward and no array path of its own: acting must still run it."""

    def forward(self, x):
        return x * 2.0


@pytest.mark.parametrize("layer", [lambda: nn.Linear(8, 8), lambda: nn.Tanh(), _Doubling])
def test_acting_follows_a_layer_added_to_the_body(layer):
    """The acting path runs the model's own layers: a layer added to the body changes acting as it changes forward."""
    model = ActorCritic(4, [8], "relu", False, 3, False)
    obs = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    before = model.policy_array(obs)[0]
    model.body.append(layer())
    after = model.policy_array(obs)[0]
    assert not np.allclose(after, before)
    np.testing.assert_allclose(after, model(framework.from_numpy(obs))[0].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_acting_with_lstm_and_images_equals_the_model_forward():
    model = ActorCritic((2, 24, 24), [16], "relu", True, 3, False, conv=((4, 8, 4), (8, 3, 1)))
    obs = np.random.default_rng(3).standard_normal((2, 2, 24, 24)).astype(np.float32)
    state = model.initial_state(2)
    head, new_state = model.policy_array(obs, state)
    expected, _, expected_state = model(framework.from_numpy(obs), state)
    np.testing.assert_allclose(head, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new_state[0].numpy(), expected_state[0].detach().numpy(), rtol=1e-4, atol=1e-5)


def _grads(model, heads, values, weights):
    """The gradient of every parameter of a fixed random function of the heads and values."""
    model.zero_grad()
    ((heads * framework.from_numpy(weights[0])).sum() + (values * framework.from_numpy(weights[1])).sum()).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("lstm,shared_body", [(True, True), (False, True), (False, False)],
                         ids=["lstm", "feedforward", "separate-value-body"])
def test_rollout_forward_equals_the_step_by_step_unroll(lstm, shared_body):
    """forward_rollout runs the body once over all (T+1) x E frames and unrolls only the LSTM cell: the same heads,
    values and gradients as stepping the whole model frame by frame, resetting the state after an episode ends."""
    framework.manual_seed(0)
    model = ActorCritic((2, 24, 24), [16], "relu", lstm, 3, False, conv=((4, 8, 4), (8, 3, 1)), uint8_frames=True,
                        shared_body=shared_body)
    steps, envs = 6, 3
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (steps + 1, envs, 2, 24, 24), dtype=np.uint8)
    keep = np.ones((steps + 1, envs), dtype=np.float32)
    keep[1:] -= rng.random((steps, envs)) < 0.3
    state = tuple(framework.tensor(rng.standard_normal((envs, 16)), dtype=framework.float32) for _ in range(2)) \
        if lstm else None
    rows = (steps + 1) * envs
    weights = (rng.standard_normal((rows, 3)).astype(np.float32), rng.standard_normal(rows).astype(np.float32))

    heads, values = model.forward_rollout(framework.from_numpy(obs), state, keep)
    batched = [heads.detach().numpy(), values.detach().numpy(), *_grads(model, heads, values, weights)]
    heads, values = [], []
    for t in range(steps + 1):
        if lstm:
            mask = framework.from_numpy(keep[t][:, None])
            state = (state[0] * mask, state[1] * mask)
        head, value, state = model(framework.from_numpy(obs[t]), state)
        heads.append(head)
        values.append(value)
    heads, values = framework.cat(heads, axis=0), framework.cat(values, axis=0)
    stepped = [heads.detach().numpy(), values.detach().numpy(), *_grads(model, heads, values, weights)]
    for ours, theirs in zip(batched, stepped):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_a_separate_value_body_keeps_the_policy_and_value_gradients_apart():
    framework.manual_seed(0)
    model = ActorCritic(4, [8, 8], "tanh", False, 2, False, shared_body=False)
    obs = framework.from_numpy(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    policy_side = {name for name, _ in model.named_parameters() if name.startswith(("body.", "pi."))}
    for output, side in ((0, policy_side), (1, {name for name, _ in model.named_parameters()} - policy_side)):
        model.zero_grad()
        model(obs)[output].sum().backward()
        touched = {name for name, p in model.named_parameters() if p.grad is not None and np.any(p.grad.numpy())}
        assert touched == side


def test_a_separate_value_body_is_refused_with_an_lstm():
    with pytest.raises(ConfigError, match=r"^config key 'model.shared_body': got false with model.lstm true; "):
        validate({"model": {"shared_body": False, "lstm": True}})


def test_continuous_actions_start_from_log_std_init():
    config = validate({"env": {"id": "Pendulum-v1"}, "model": {"log_std_init": -1.5}})
    np.testing.assert_array_equal(A3C.build_model(config).log_std.detach().numpy(), [-1.5])


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "vector_envs:Frames-v0"])
def test_orthogonal_init_gives_baselines_gains_and_zero_biases(env_id):
    config = validate({"env": {"id": env_id}, "model": {"orthogonal_init": True, "hidden": [16, 8],
                                                         "shared_body": env_id == "vector_envs:Frames-v0"}})
    framework.manual_seed(0)
    model = A3C.build_model(config)
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    assert any(isinstance(m, nn.Conv2d) for m in layers) == (env_id == "vector_envs:Frames-v0")
    for layer in layers:
        gain = 0.01 if layer is model.pi else 1.0 if layer is model.v else np.sqrt(2)
        w = layer.weight.detach().numpy().reshape(layer.weight.shape[0], -1).astype(np.float64)
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w  # (semi-)orthogonal: the smaller Gram is gain^2 I
        np.testing.assert_allclose(gram, gain ** 2 * np.eye(len(gram)), atol=1e-5 * gain ** 2)
        np.testing.assert_array_equal(layer.bias.detach().numpy(), 0)
    framework.manual_seed(0)
    default = A3C.build_model(validate({"env": {"id": env_id}, "model": {"hidden": [16, 8]}}))
    assert not np.allclose(default.pi.weight.detach().numpy() @ default.pi.weight.detach().numpy().T,
                           1e-4 * np.eye(default.pi.weight.shape[0]), atol=1e-5)


def test_sign_reward_and_life_loss_change_what_the_learner_sees_not_the_episodes():
    """The rollout's learning signal: the signs of the game's rewards, a lost life as the end of the learner's
    episode; the episodes reported are the whole games, in the game's points."""
    worker, _, stats = _worker(env={"id": "custom_envs:Lives", "kwargs": {"lives": 3, "life_steps": 2, "reward": 4.0},
                                    "sign_reward": True, "life_loss_done": True}, algorithm={"n_steps": 6})
    worker.rollout(worker.trajectory)
    np.testing.assert_array_equal(worker.trajectory.rewards, 1.0)
    np.testing.assert_array_equal(worker.trajectory.dones, np.array([[0, 1, 0, 1, 0, 1]] * 3).T)
    returns, lengths = stats.new_episodes(np.zeros(1, dtype=np.int64))
    assert returns.tolist() == [24.0] * 3 and lengths.tolist() == [6] * 3


def test_uint8_frames_are_read_as_floats_by_the_first_convolution():
    worker, model, stats = _worker(env={"id": "vector_envs:Frames-v0"}, model={"lstm": True})
    first = worker.local.body[0]
    assert isinstance(first, FrameConv2d) and worker.trajectory.obs.dtype == np.uint8
    frames = np.random.default_rng(0).integers(0, 256, (2, 2, 24, 24), dtype=np.uint8)
    scaled = framework.conv2d(framework.from_numpy(frames.astype(np.float32) / 255), first.weight, first.bias,
                              first.stride).detach().numpy()
    with framework.no_grad():
        ours = worker.local.body(framework.from_numpy(frames)).numpy()
        theirs = worker.local.body[1:](framework.from_numpy(scaled)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    before = model.arena.data.copy()
    worker.update()
    assert not np.array_equal(model.arena.data, before) and np.isfinite(model.arena.data).all()
    assert stats.snapshot().total(UPDATES) == 1


@pytest.mark.parametrize("sections", [
    {},
    {"model": {"lstm": True}},
    {"env": {"id": "Pendulum-v1"}, "optimizer": {"name": "rmsprop"}},
    {"env": {"id": "Pendulum-v1"}, "model": {"lstm": True}, "optimizer": {"name": "sgd", "lr": 0.01}},
    {"algorithm": {"gae_lambda": 0.95, "normalize_advantages": True}},
    {"model": {"shared_body": False}, "env": {"normalize_obs": True, "normalize_reward": True}},
], ids=["discrete", "lstm", "continuous", "continuous-lstm", "gae", "separate-value-body-normalised"])
def test_an_update_changes_the_shared_parameters_and_reports(sections):
    worker, model, stats = _worker(**sections)
    before = model.arena.data.copy()
    for _ in range(3):
        worker.update()
    assert not np.array_equal(model.arena.data, before)
    assert np.isfinite(model.arena.data).all()
    snap = stats.snapshot()
    assert snap.total(UPDATES) == 3 and snap.total(SKIPPED) == 0
    means = dict(zip(stats.metrics, snap.metric_sums[0] / 3))  # by name: the metrics are A3C.metrics
    assert means["value_loss"] > 0 and means["grad_norm"] > 0 and means["lr"] == pytest.approx(worker.opt_cfg["lr"])
    assert means["entropy"] != 0 and np.isfinite(means["explained_variance"]) and means["explained_variance"] <= 1


@pytest.mark.parametrize("sections", [{}, {"model": {"lstm": True}}, {"env": {"id": "Pendulum-v1"}},
                                      {"model": {"shared_body": False}, "env": {"normalize_obs": True}}],
                         ids=["discrete", "lstm", "continuous", "separate-value-body-normalised"])
def test_compiled_updates_equal_eager_ones_and_stop_recompiling(sections):
    """trainer.compile changes how fast a worker steps, not what it computes; after the first update no guard fails."""
    shared = {}
    for compiled in (False, True):
        compiler.reset()
        worker, model, _ = _worker(trainer={"compile": compiled}, **sections)
        worker.update()
        warm = dict(compiler.counters)
        for _ in range(3):
            worker.update()
        shared[compiled] = model.arena.data.copy()
    np.testing.assert_allclose(shared[True], shared[False], rtol=1e-5, atol=1e-6)
    assert compiler.counters["recompiles"] == warm["recompiles"] and compiler.counters["graph_breaks"] == 0
    graphs = 1 if sections.get("model", {}).get("lstm") else 3  # with an LSTM only the loss is compiled (see Worker)
    assert compiler.counters["cache_hits"] > warm["cache_hits"] and compiler.counters["captures"] >= graphs


def test_a_worker_steps_cartpole_as_one_vector_env_or_a_loop_with_the_same_updates():
    """env.vectorize picks how the worker's envs are stepped, not what they give: the same rollouts, the same
    parameters after the same updates."""
    shared = {}
    for vectorize in (True, False):
        worker, model, _ = _worker(env={"vectorize": vectorize}, trainer={"compile": False})
        assert worker.envs.vectorized == vectorize
        for _ in range(40):  # long enough for episodes to end and restart
            worker.update()
        shared[vectorize] = model.arena.data.copy()
    np.testing.assert_array_equal(shared[True], shared[False])


@pytest.mark.parametrize("continuous", [False, True], ids=["categorical", "normal"])
def test_rollout_actions_are_fresh_samples_of_the_policy(continuous):
    """Each step's actions are new draws from the policy (the rollout's noise is drawn at once, a row per step):
    action 1 about 80% of the time for logits (0, log 4), N(0.3, 0.5^2) for a Normal policy."""
    sections = {"env": {"id": "Pendulum-v1"}} if continuous else {}
    worker, model, _ = _worker(algorithm={"n_steps": 60}, env={"envs_per_worker": 16, **sections.get("env", {})})
    with framework.no_grad():
        worker.local.pi.weight.data_array[...] = 0.0
        worker.local.pi.bias.data_array[...] = [0.3] if continuous else [0.0, np.log(4.0)]
        if continuous:
            worker.local.log_std.data_array[...] = np.log(0.5)
    worker.rollout(worker.trajectory)
    actions = worker.trajectory.actions.reshape(60, 16)
    if continuous:  # 960 samples: the mean within 4 standard errors, the spread within 10%
        assert abs(actions.mean() - 0.3) < 4 * 0.5 / np.sqrt(960) and abs(actions.std() - 0.5) < 0.05
    else:
        assert abs(actions.mean() - 0.8) < 4 * np.sqrt(0.16 / 960)
    changes = (np.diff(actions, axis=0) != 0).mean()  # independent draws change often; reused noise never would
    assert changes > (0.9 if continuous else 0.2)


def test_local_model_syncs_from_the_shared_arena():
    worker, model, _ = _worker()
    model.arena.data[...] = 0.25
    worker.local_arena.copy_from(worker.shared_arena)
    np.testing.assert_array_equal(worker.local.arena.data, 0.25)
    assert worker.local.arena.data.ctypes.data != model.arena.data.ctypes.data


def test_truncation_bootstraps_from_the_last_observation():
    worker, _, _ = _worker(env={"kwargs": {"max_episode_steps": 3}}, algorithm={"n_steps": 3})
    worker.rollout(worker.trajectory)
    np.testing.assert_array_equal(worker.trajectory.dones, [[0, 0, 0], [0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(worker.trajectory.rewards[:2], 1.0)
    assert np.all(worker.trajectory.rewards[2] != 1.0)  # 1 + gamma * V(last observation)


def test_a_lost_life_ends_the_learners_episode_and_rewards_are_signs():
    worker, _, _ = _worker(env={"id": "custom_envs:Lives", "kwargs": {"lives": 3, "life_steps": 2, "reward": 4.0},
                                "sign_reward": True, "life_loss_done": True}, algorithm={"n_steps": 6})
    worker.rollout(worker.trajectory)
    np.testing.assert_array_equal(worker.trajectory.dones, np.array([[0, 1, 0, 1, 0, 1]] * 3).T)
    np.testing.assert_array_equal(worker.trajectory.rewards, 1.0)


def test_non_finite_update_is_not_applied():
    worker, model, stats = _worker(env={"id": "fault_envs:NonFiniteCartPole-v0"})
    before = model.arena.data.copy()
    optimizer_state = [a.copy() for a in worker.ctx.optimizer.state_dict()["state"][0].values()]
    for _ in range(3):
        worker.update()
    np.testing.assert_array_equal(model.arena.data, before)
    for a, b in zip(optimizer_state, worker.ctx.optimizer.state_dict()["state"][0].values()):
        np.testing.assert_array_equal(a, b)
    snap = stats.snapshot()
    assert snap.total(UPDATES) == 0 and snap.total(SKIPPED) == 3


@pytest.mark.parametrize("lstm", [False, True])
def test_evaluate_runs_greedy_episodes(lstm):
    config = validate({"model": {"hidden": [8], "lstm": lstm}, "env": {"kwargs": {"max_episode_steps": 30}}})
    result = A3C.evaluate(A3C.build_model(config), config, episodes=4, seed=0)
    assert set(result.metrics) == {"return_mean", "return_std", "episodes_cut"}
    assert 1 <= result.metrics["return_mean"] <= 30 and result.metrics["episodes_cut"] == 0
    assert result.text.startswith("return over 4 greedy episodes: ")


@pytest.mark.parametrize("vectorize", [False, True])
def test_evaluate_plays_the_most_likely_action(vectorize):
    """A policy that always prefers pushing right scores what pushing right scores in CartPole-v1 envs
    seeded seed + i."""
    config = validate({"model": {"hidden": [8]}, "env": {"vectorize": vectorize}})
    model = A3C.build_model(config)
    with framework.no_grad():
        model.pi.weight.data_array[...] = 0.0
        model.pi.bias.data_array[...] = [0.0, 1.0]
    returns = []
    for i in range(4):
        env = gym.make("CartPole-v1")
        env.reset(seed=7 + i)
        steps, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = env.step(1)
            steps, done = steps + 1, terminated or truncated
        returns.append(steps)
    assert A3C.evaluate(model, config, episodes=4, seed=7).metrics == pytest.approx(
        {"return_mean": np.mean(returns), "return_std": np.std(returns), "episodes_cut": 0})


def test_learning_rate_schedule_and_optimizers():
    section = validate({})["optimizer"]
    assert learning_rate(section, 500, 1000) == section["lr"]
    linear = {**section, "lr_decay": "linear", "lr_end_factor": 0.1, "lr": 1.0}
    assert learning_rate(linear, 0, 1000) == 1.0
    assert learning_rate(linear, 500, 1000) == pytest.approx(0.55)
    assert learning_rate(linear, 5000, 1000) == pytest.approx(0.1)
    model = ActorCritic(4, [8], "relu", False, 2, False)
    for name, cls in (("adam", optim.Adam), ("rmsprop", optim.RMSprop), ("rmsprop_tf_like", optim.RMSpropTFLike),
                      ("sgd", optim.SGD)):
        assert type(build_optimizer(model, {**section, "name": name})) is cls
