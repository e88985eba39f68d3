"""Observation and reward normalisation: the running statistics, their use by the envs, their sharing across
worker processes, checkpoints, resume, evaluation and TensorBoard."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sharing
from framework.algorithms.a3c.plugin import ALGORITHM
from framework.rl.actor import Actor
from framework.rl.envs.batch import EnvBatch
from framework.rl.normalization import EPSILON, Normalization, RunningMeanStd
from framework.train.checkpoint import load_checkpoint
from framework.train.config import default_config
from run_configs import cartpole_config
from train_cli import run_cli, scalars, summary, train, write_config



def _normalised_config(**env) -> dict:
    config = default_config("a3c")
    config["env"].update({"normalize_obs": True, "normalize_reward": True, **env})
    return config


@settings(max_examples=30, deadline=None)
@given(st.lists(hnp.arrays(np.float64, st.tuples(st.integers(1, 6), st.just(3)),
                           elements=st.floats(-1e3, 1e3)), min_size=1, max_size=5))
def test_running_statistics_equal_those_of_all_batches_together(batches):
    stats = RunningMeanStd((3,), prior_count=0.0)
    for batch in batches:
        stats.update(batch)
    everything = np.concatenate(batches)
    mean, var, count = stats.statistics()
    np.testing.assert_allclose(mean, everything.mean(axis=0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(var, everything.var(axis=0), rtol=1e-7, atol=1e-6)
    assert count == len(everything)


def test_observations_are_standardised_and_clipped_with_the_statistics_after_the_update():
    normalization = Normalization(RunningMeanStd((2,), prior_count=0.0), None, n=3, clip_obs=1.3,
                                  clip_reward=10.0, gamma=0.9, update=True)
    raw = np.array([[0.0, 10.0], [1.0, 10.0], [2.0, 40.0]], dtype=np.float32)
    out = normalization.observations(raw)
    mean, var = raw.mean(axis=0), raw.var(axis=0)
    expected = np.clip((raw - mean) / np.sqrt(var + EPSILON), -1.3, 1.3)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    assert out[2, 1] == np.float32(1.3)  # (40 - 20) / 14.1 = 1.41, clipped
    frozen = Normalization(normalization.obs_stats, None, 3, 1.3, 10.0, 0.9, update=False)
    before = normalization.obs_stats.statistics()[2]
    frozen.observations(raw * 100)
    assert normalization.obs_stats.statistics()[2] == before  # evaluation reads the statistics, never moves them


def test_rewards_are_divided_by_the_std_of_the_discounted_return_which_restarts_after_an_episode():
    normalization = Normalization(None, RunningMeanStd((1,), prior_count=0.0), n=2, clip_obs=10.0,
                                  clip_reward=100.0, gamma=0.5, update=True)
    running, history = np.zeros(2), []
    for rewards, done in (([1.0, 2.0], [False, True]), ([1.0, 2.0], [False, False]), ([4.0, 0.0], [True, False])):
        rewards, done = np.array(rewards), np.array(done)
        running = running * 0.5 + rewards
        history += running.tolist()
        out = normalization.rewards(rewards, done)
        np.testing.assert_allclose(out, rewards / np.sqrt(np.var(history) + EPSILON), rtol=1e-6)
        running[done] = 0.0
    frozen = Normalization(None, normalization.return_stats, 2, 10.0, clip_reward=2.5, gamma=0.5, update=False)
    assert frozen.rewards(np.array([1e3, -1e3]), np.zeros(2, bool)).tolist() == [2.5, -2.5]


def _update_in_child(stats: RunningMeanStd, batch: np.ndarray) -> None:
    stats.update(batch)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_statistics_in_shared_memory_are_updated_by_every_process(method):
    model = ALGORITHM.build_model(_normalised_config())
    model.share_memory()
    ctx = sharing.get_context(method)
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (50, 4)), rng.normal(-1.0, 0.5, (70, 4))]
    for batch in batches:  # one after the other: each sees what the one before merged
        proc = ctx.Process(target=_update_in_child, args=(model.obs_norm, batch))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
    mean, var, count = model.obs_norm.statistics()
    everything = np.concatenate(batches)
    np.testing.assert_allclose(mean, everything.mean(axis=0), rtol=1e-4)
    np.testing.assert_allclose(var, everything.var(axis=0), rtol=1e-4)
    assert count == pytest.approx(120, abs=1e-3)


def test_the_acting_path_normalises_what_it_observes_and_the_rewards_keep_episode_returns_in_the_envs_own_units():
    """What a worker's rollout does with each step (rl.rollout): its Actor observes the batch's observations,
    merging them into the statistics, and its rewards are scaled; the batch's episodes stay the env's."""
    config = _normalised_config()
    model = ALGORITHM.build_model(config)
    env = ALGORITHM.env_info(config)
    normalization = Normalization.for_model(model, env, 4, config["algorithm"]["gamma"], update=True,
                                            flush_every=config["algorithm"]["n_steps"])
    actor = Actor(model, env, normalization)
    batch = EnvBatch(env, 4, seed=5)
    seen, returns = [batch.obs.copy()], []
    observed = actor.observe(batch.obs, update=True)
    for _ in range(300):
        out = batch.step((batch.obs[:, 2] > 0).astype(np.int64))
        seen.append(batch.obs.copy())
        observed = actor.observe(batch.obs, update=True)
        rewards = normalization.rewards(out.rewards, out.terminated | out.truncated)
        assert out.rewards.tolist() == [1.0] * 4  # the env's own
        returns += out.episode_returns
        np.testing.assert_allclose(rewards, min(1.0 / model.return_norm.std()[0], 10.0), rtol=1e-5)
    assert returns  # episodes ended, reported in CartPole's units (1 per step)
    mean, var, count = model.obs_norm.statistics()  # merged once per n_steps steps: the last few still pending
    merged_steps = len(seen) - len(seen) % config["algorithm"]["n_steps"]
    assert count == pytest.approx(4 * merged_steps, abs=1e-3)
    np.testing.assert_allclose(observed, np.clip((batch.obs - mean) / np.sqrt(var + EPSILON), -10, 10),
                               rtol=1e-5, atol=1e-6)
    batch.close()
    normalization.flush()  # what a worker does at its end: merges what is pending
    seen = np.concatenate(seen)
    mean, var, count = model.obs_norm.statistics()
    assert count == pytest.approx(len(seen), abs=1e-3)
    np.testing.assert_allclose(mean, seen.mean(axis=0), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(var, seen.var(axis=0), rtol=1e-3)


def test_evaluation_normalises_with_the_models_statistics():
    """A model that normalises acts as the same model without statistics whose first layer does the
    standardising: (W / std) x + (b - W mean / std)."""
    config = _normalised_config(clip_obs=1e6)
    model = ALGORITHM.build_model(config)
    model.obs_norm.update(np.random.default_rng(1).normal([0.5, -1.0, 0.1, 2.0], [0.3, 2.0, 0.05, 1.5], (500, 4)))
    plain_config = default_config("a3c")
    plain = ALGORITHM.build_model(plain_config)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if "norm" not in k})
    first = plain.body[0]
    mean, std = model.obs_norm.statistics()[0], model.obs_norm.std()
    weight = first.weight.detach().numpy() / std.astype(np.float32)
    first.weight.data_array[...] = weight
    first.bias.data_array[...] = first.bias.detach().numpy() - weight @ mean.astype(np.float32)
    assert (ALGORITHM.evaluate(model, config, 3, seed=4).metrics
            == ALGORITHM.evaluate(plain, plain_config, 3, seed=4).metrics)


def test_image_observations_cannot_be_normalised(tmp_path):
    config = write_config(tmp_path / "c.yaml", cartpole_config(env={"id": "vector_envs:Frames-v0",
                                                                    "normalize_obs": True}))
    done = run_cli("train", "--config", config, "--logdir", tmp_path / "runs")
    assert done.returncode == 2
    assert done.stderr.startswith("train: error: config key 'env.normalize_obs': got true for "
                                  "'vector_envs:Frames-v0', whose observations are uint8 images"), done.stderr


def _normaliser_state(run_dir) -> dict[str, np.ndarray]:
    model = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["model"]
    return {k: v for k, v in model.items() if "norm" in k}


def test_a_run_shares_its_statistics_across_workers_logs_them_and_resumes_with_them(tmp_path):
    config = cartpole_config(total_steps=8000, env={"normalize_obs": True, "normalize_reward": True})
    done, run_dir = train(tmp_path, config)
    assert done.returncode == 0, done.stderr
    steps = summary(run_dir)["env_steps"]
    first = _normaliser_state(run_dir)
    # Both workers' steps are in the counts (a rare concurrent update may be lost, lock-free).
    assert 0.8 * steps < first["obs_norm.count"][0] <= steps + 8 + 1
    assert 0.8 * steps < first["return_norm.count"][0] <= steps + 1
    for tag in ("normalization/obs_mean/0", "normalization/obs_std/3", "normalization/return_std"):
        assert scalars(run_dir, tag), tag
    assert scalars(run_dir, "normalization/obs_std/0")[-1] == pytest.approx(np.sqrt(first["obs_norm.var"][0]),
                                                                            rel=0.2)

    resumed = run_cli("train", "--resume", run_dir, "--set", "trainer.total_steps=16000")
    assert resumed.returncode == 0, resumed.stderr
    after = _normaliser_state(run_dir)
    more = summary(run_dir)["env_steps"] - steps
    assert after["obs_norm.count"][0] > first["obs_norm.count"][0] + 0.8 * more  # continued, not started again

    refused = run_cli("train", "--resume", run_dir, "--set", "env.normalize_obs=false")
    assert refused.returncode == 2
    assert "config key 'env.normalize_obs'" in refused.stderr


@pytest.mark.parametrize("key,value", [("clip_obs", 0), ("clip_reward", -1.0), ("normalize_obs", "yes")])
def test_normalisation_keys_are_validated(tmp_path, key, value):
    config = write_config(tmp_path / "c.yaml", cartpole_config(env={key: value}))
    done = run_cli("train", "--config", config, "--logdir", tmp_path / "runs")
    assert done.returncode == 2
    assert done.stderr.startswith(f"train: error: config key 'env.{key}': got "), done.stderr
