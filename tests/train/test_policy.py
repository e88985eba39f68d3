"""A trained run's Policy: acting on one observation or a batch, with the run's normalisation and an LSTM's state,
continuous actions, Dict and Tuple observations with MultiDiscrete and MultiBinary actions (the envs of
tests/support/custom_envs), export to .safetensors (also `evaluate --export`, and of a model.factory's network),
and read_checkpoint; on real short runs."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from safetensors.numpy import load_file, safe_open

import custom_envs
import framework
from framework import algorithms
from framework.train import CheckpointError, ConfigError, Policy, load_policy, read_checkpoint
from framework.train.checkpoint import load_checkpoint
from framework.train.config import load_config
from run_configs import cartpole_config, hogwild_config
from train_cli import only_run_dir, run_cli, write_config


def _train(tmp_path_factory, name: str, config: dict):
    logdir = tmp_path_factory.mktemp(name)
    done = run_cli("train", "--config", write_config(logdir.parent / f"{name}.yaml", config), "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    return only_run_dir(logdir)


@pytest.fixture(scope="module")
def normalized_run(tmp_path_factory):
    """CartPole with env.normalize_obs, trained 3000 steps: statistics far from (0, 1)."""
    return _train(tmp_path_factory, "normalized", cartpole_config(total_steps=3000, env={"normalize_obs": True}))


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    return _train(tmp_path_factory, "lstm", cartpole_config(total_steps=1000, model={"lstm": True, "hidden": [8]}))


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    return _train(tmp_path_factory, "pendulum", cartpole_config(total_steps=1000, env={"id": "Pendulum-v1"}))


@pytest.fixture(scope="module")
def dict_run(tmp_path_factory):
    """custom_envs.DictGoal: Dict observations (a Box and a Discrete), MultiDiscrete([2, 3]) actions."""
    return _train(tmp_path_factory, "dict", cartpole_config(total_steps=1000, env={"id": "custom_envs:DictGoal"}))


@pytest.fixture(scope="module")
def factory_run(tmp_path_factory):
    """MoveToGoal with the network of model.factory custom_envs:tiny_model."""
    return _train(tmp_path_factory, "factory", cartpole_config(
        total_steps=1000, env={"id": "custom_envs:MoveToGoal"},
        model={"factory": "custom_envs:tiny_model", "kwargs": {"width": 8}}))


def _untrained_policy(env_id: str) -> Policy:
    """The Policy of a freshly built (untrained) A3C model for env_id: acting needs no training to be checked."""
    config = load_config(cartpole_config(env={"id": env_id}))
    a3c = algorithms.get("a3c")
    framework.manual_seed(0)
    return Policy(a3c.actor(a3c.build_model(config), config), config)


def _plays_what_evaluate_plays(policy: Policy, env: gym.Env, seeds=(3, 11)) -> None:
    """Greedy episodes of policy.act in env score what the plugin's evaluate scores with the same seeds."""
    a3c = algorithms.get("a3c")
    for seed in seeds:
        expected = a3c.evaluate(policy.model, policy.config, 1, seed).metrics["return_mean"]
        assert _episode(lambda obs: policy.act(obs)[0], seed, env)[0] == expected


def _episode(act, seed: int, env: gym.Env | None = None) -> tuple[float, list]:
    """(return, observations) of one episode of env (CartPole by default) played by act(obs) -> action."""
    env = gym.make("CartPole-v1") if env is None else env
    obs, _ = env.reset(seed=seed)
    total, seen = 0.0, []
    while True:
        seen.append(obs)
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        total += reward
        if terminated or truncated:
            return total, seen


def test_policy_plays_what_evaluate_plays_with_the_runs_normalisation(normalized_run):
    policy = load_policy(normalized_run)
    assert policy.model.obs_norm is not None and policy.config["env"]["normalize_obs"] is True
    a3c = algorithms.get("a3c")
    for seed in (12345, 7):
        expected = a3c.evaluate(policy.model, policy.config, 1, seed).metrics["return_mean"]
        played, seen = _episode(lambda obs: policy.act(obs)[0], seed)
        assert played == expected
    # the episodes' observations and wider ones (where a policy trained briefly may play one action throughout)
    raw = np.concatenate([np.asarray(seen, dtype=np.float32),
                          np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)])
    mean, var, _ = policy.model.obs_norm.statistics()
    normalized = np.clip((raw - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
    assert not np.allclose(normalized, raw, atol=0.1)  # statistics that change what the model sees
    actions = policy.act(raw)[0]
    np.testing.assert_array_equal(actions, np.argmax(policy.model.policy_array(normalized)[0], axis=1))
    # act reads the statistics as they are (a briefly trained policy may play what it plays on raw observations
    # too, so the check is that the actions follow the statistics, not that they differ)
    policy.model.obs_norm.mean.data_array[...] = mean + 2 * np.sqrt(var)
    shifted = np.clip((raw - mean - 2 * np.sqrt(var)) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
    np.testing.assert_array_equal(policy.act(raw)[0], np.argmax(policy.model.policy_array(shifted)[0], axis=1))


def test_one_observation_gives_an_int_and_a_batch_an_array_of_them(normalized_run):
    policy = load_policy(normalized_run)
    assert isinstance(policy.observation_space, gym.spaces.Box) and policy.action_space == gym.spaces.Discrete(2)
    batch = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    actions, state = policy.act(batch)
    assert actions.dtype == np.int64 and actions.shape == (6,) and state is None
    singles = [policy.act(row) for row in batch]
    assert all(type(a) is int and s is None for a, s in singles)
    assert [a for a, _ in singles] == actions.tolist()
    sampled = {tuple(policy.act(batch, deterministic=False)[0]) for _ in range(20)}
    assert len(sampled) > 1
    with pytest.raises(ValueError, match=r"^obs: got an array of shape \(2, 3\); allowed: one observation of shape "
                                         r"\(4,\) or a batch of them, shape \(n, 4\)$"):
        policy.act(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"^state: got a state for a model without an LSTM; allowed: None$"):
        policy.act(batch[0], (np.zeros(4), np.zeros(4)))


def test_an_lstm_policy_carries_its_state(lstm_run):
    policy = load_policy(lstm_run)
    obs = np.array([0.01, 0.2, -0.03, -0.3], dtype=np.float32)
    first, state = policy.act(obs)
    assert isinstance(first, int) and [part.shape for part in state] == [(8,), (8,)]
    _, again = policy.act(obs, state)
    assert not np.allclose(again[0], state[0])  # the state moved on
    batch, batch_state = policy.act(np.stack([obs, obs, obs]))
    assert [part.shape for part in batch_state] == [(3, 8), (3, 8)]
    np.testing.assert_allclose(batch_state[0], np.stack([state[0]] * 3), rtol=1e-6)
    _, batch_again = policy.act(np.stack([obs, obs, obs]), batch_state)
    np.testing.assert_allclose(batch_again[1][0], again[1], rtol=1e-6)
    with pytest.raises(ValueError, match=r"^state: got \[\(3, 8\), \(3, 8\)\]; allowed: \(h, c\), two arrays of "
                                         r"shape \(8,\)"):
        policy.act(obs, batch_state)


def test_continuous_actions_are_the_clipped_mean_or_samples(pendulum_run):
    policy = load_policy(pendulum_run)
    space = policy.action_space
    assert isinstance(space, gym.spaces.Box) and space.shape == (1,)
    obs = np.array([1.0, 0.0, 0.5], dtype=np.float32)
    action, state = policy.act(obs)
    mean = policy.model.policy_array(obs[None])[0][0]
    assert state is None and action.shape == (1,)
    np.testing.assert_array_equal(action, np.clip(mean, space.low, space.high))
    samples = policy.act(np.stack([obs] * 50), deterministic=False)[0]
    assert samples.shape == (50, 1) and len(np.unique(samples)) > 1


def test_continuous_actions_stay_within_the_bounds(pendulum_run):
    policy = load_policy(pendulum_run)
    policy.model.pi.bias.data_array[...] = 50.0  # a mean far above the bounds
    actions = policy.act(np.ones((5, 3), dtype=np.float32), deterministic=False)[0]
    assert actions.shape == (5, 1) and (actions == policy.action_space.high).all()


def test_a_dict_observation_and_multidiscrete_actions(dict_run):
    policy = load_policy(dict_run)
    assert isinstance(policy.observation_space, gym.spaces.Dict)
    assert policy.action_space == gym.spaces.MultiDiscrete([2, 3])
    rng = np.random.default_rng(0)
    batch = {"pos": rng.uniform(-1, 1, (6, 1)).astype(np.float32), "side": rng.integers(0, 2, 6)}
    actions, state = policy.act(batch)
    assert actions.dtype == np.int64 and actions.shape == (6, 2) and state is None
    # the observation as A3C reads a Dict (its entries in order, the Discrete one-hot); greedy per component
    encoded = np.concatenate([batch["pos"], np.eye(2, dtype=np.float32)[batch["side"]]], axis=1)
    head = policy.model.policy_array(encoded)[0]
    np.testing.assert_array_equal(actions, np.stack([head[:, :2].argmax(1), head[:, 2:].argmax(1)], axis=1))
    singles = [policy.act({"pos": batch["pos"][i], "side": int(batch["side"][i])})[0] for i in range(6)]
    assert all(a.shape == (2,) for a in singles) and np.array_equal(np.stack(singles), actions)
    sampled = policy.act(batch, deterministic=False)[0]
    assert all(policy.action_space.contains(a) for a in sampled)
    _plays_what_evaluate_plays(policy, custom_envs.DictGoal())
    with pytest.raises(ValueError, match=r"^obs: got \{'pos': .*\}; allowed: a dict with the keys 'pos', 'side' of "
                                         r"the observation space Dict"):
        policy.act({"pos": batch["pos"]})
    with pytest.raises(ValueError, match=r"^obs: got entries of \[1, 6\] observations; allowed: entries that are "
                                         r"all one observation, or all batches of the same size$"):
        policy.act({"pos": batch["pos"], "side": 1})


def test_tuple_observations_and_actions_offset_by_the_spaces_start():
    policy = _untrained_policy("custom_envs:OffsetGoal")
    space = policy.action_space
    assert space == gym.spaces.MultiDiscrete([2, 3], start=[1, -1])
    pos = np.linspace(-1, 1, 9, dtype=np.float32)[:, None]
    side = (pos[:, 0] > 0).astype(np.int64) - 1
    actions = policy.act((pos, side))[0]
    encoded = np.concatenate([pos, np.eye(2, dtype=np.float32)[side + 1]], axis=1)  # Discrete(2, start=-1)
    head = policy.model.policy_array(encoded)[0]
    greedy = np.stack([head[:, :2].argmax(1), head[:, 2:].argmax(1)], axis=1)
    np.testing.assert_array_equal(actions, greedy + [1, -1])
    sampled = policy.act((pos, side), deterministic=False)[0]
    assert all(space.contains(a) for a in np.concatenate([actions, sampled]))
    _plays_what_evaluate_plays(policy, custom_envs.OffsetGoal())


def test_a_channels_last_image_in_a_dict_and_multibinary_actions():
    policy = _untrained_policy("custom_envs:ImageGoal")
    assert policy.action_space == gym.spaces.MultiBinary(2)
    env = custom_envs.ImageGoal()
    obs = env.reset(seed=0)[0]
    action = policy.act(obs)[0]
    # the image transposed to (channels, height, width) and packed first, then the vector; a bit is set at p > 0.5
    encoded = np.concatenate([obs["image"].transpose(2, 0, 1).reshape(-1).astype(np.float32), obs["pos"]])[None]
    head = policy.model.policy_array(encoded)[0]
    assert action.dtype == np.int8 and action.shape == (2,)
    np.testing.assert_array_equal(action, (head[0] > 0).astype(np.int8))
    _plays_what_evaluate_plays(policy, env)


def test_export_of_a_model_factory_network_holds_its_named_parameters(factory_run, tmp_path):
    policy = load_policy(factory_run)
    assert type(policy.model) is custom_envs.TinyActorCritic
    tensors = load_file(policy.export(tmp_path / "tiny.safetensors"))
    parameters = dict(policy.model.named_parameters())
    assert set(tensors) == set(parameters) == {"body.1.weight", "body.1.bias", "pi.weight", "pi.bias", "v.weight",
                                               "v.bias"}
    for name, value in parameters.items():
        np.testing.assert_array_equal(tensors[name], value.detach().numpy())
    assert tensors["body.1.weight"].shape == (8, 1)
    assert policy.act(np.array([0.5], dtype=np.float32))[0] in (0, 1)


def test_export_holds_the_state_dict_by_name_and_the_statistics_apart(normalized_run, tmp_path):
    policy = load_policy(normalized_run)
    path = policy.export(tmp_path / "policy.safetensors")
    assert path == tmp_path / "policy.safetensors" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    tensors = load_file(path)
    state = {name: value.numpy() for name, value in policy.model.state_dict().items()}
    weights = {name: value for name, value in state.items() if not name.startswith(("obs_norm.", "return_norm."))}
    assert {name for name in tensors if not name.startswith("obs_normalization.")} == set(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(tensors[name], value)
    for stat in ("mean", "var", "count"):
        np.testing.assert_array_equal(tensors[f"obs_normalization.{stat}"], state[f"obs_norm.{stat}"])
    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata()
    assert metadata["format"] == "hogshare-policy" and float(metadata["obs_normalization.clip"]) == 10.0
    assert '"normalize_obs": true' in metadata["config"]


def test_export_refuses_a_missing_directory(normalized_run, tmp_path):
    with pytest.raises(ConfigError, match=r"^export: cannot write '.*/nowhere/p.safetensors' \(no directory "
                                          r"'.*/nowhere'\); allowed: a file in an existing, writable directory$"):
        load_policy(normalized_run).export(tmp_path / "nowhere" / "p.safetensors")


def test_evaluate_export_writes_the_file_and_says_so(normalized_run, tmp_path):
    path = tmp_path / "agent.safetensors"
    done = run_cli("evaluate", "--run", normalized_run, "--export", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"wrote {path}: the policy's weights by their PyTorch names, its observation statistics "
                           f"as obs_normalization.* (read it with safetensors.torch.load_file)\n")
    assert load_file(path).keys() == load_file(load_policy(normalized_run).export(tmp_path / "p.safetensors")).keys()
    refused = run_cli("evaluate", "--run", normalized_run, "--export", tmp_path / "a" / "b.safetensors")
    assert refused.returncode == 2 and refused.stderr.startswith("evaluate: error: export: cannot write ")
    assert refused.stderr.count("\n") == 1


def test_a_hogwild_run_has_no_policy(tmp_path_factory, tmp_path):
    run_dir = _train(tmp_path_factory, "hogwild", hogwild_config(trainer={"max_seconds": 1, "eval_every_s": 0}))
    message = (f"run '{run_dir}' trained algorithm hogwild, which has no environment to act in, so no policy; "
               f"allowed: runs of an algorithm with one (a3c, appo, impala)")
    with pytest.raises(ConfigError) as refused:
        load_policy(run_dir)
    assert str(refused.value) == message
    done = run_cli("evaluate", "--run", run_dir, "--export", tmp_path / "p.safetensors")
    assert done.returncode == 2 and done.stderr == f"evaluate: error: {message}\n"
    assert not (tmp_path / "p.safetensors").exists()


def test_read_checkpoint_gives_the_parameters_by_name(normalized_run, tmp_path):
    saved = load_checkpoint(normalized_run / "checkpoints" / "checkpoint.npz")["model"]
    for source in (normalized_run, normalized_run / "checkpoints" / "checkpoint.npz", str(normalized_run)):
        params = read_checkpoint(source)
        assert params.keys() == saved.keys() and "body.0.weight" in params and "obs_norm.mean" in params
        for name, value in saved.items():
            np.testing.assert_array_equal(params[name], value)
    with pytest.raises(CheckpointError, match="not found"):
        read_checkpoint(tmp_path)
