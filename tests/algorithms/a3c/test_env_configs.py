"""The shipped configs: each validates through the real schema (or names the extra to install), short runs of the
classic-control ones, and the Atari pieces (image model, preprocessing) behind the Pong config."""
import importlib.util
import json
import tomllib

import numpy as np
import pytest
import yaml

import framework
from framework.rl.model import IMAGE_CONV, ActorCritic
from framework.train.config import ConfigError, load_config, validate
from framework.rl.envs.extras import EXTRAS, extra_needed, missing_extra_message
from train_cli import CHECKOUT, CONFIGS, run_cli

SHIPPED = sorted(CONFIGS.glob("*.yaml"))
FAST = ["--set", "trainer.start_method=fork", "--set", "logging.progress=false", "--set", "trainer.max_seconds=60"]


def installed(extra: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[extra])


def test_the_new_configs_are_shipped():
    names = {p.name for p in SHIPPED}
    assert {"hogwild_mlp.yaml", "hogwild_svm.yaml", "a3c_acrobot.yaml", "a3c_lunarlander.yaml",
            "a3c_pendulum.yaml", "a3c_pong.yaml", "a3c_breakout.yaml", "a3c_halfcheetah.yaml", "a3c_hopper.yaml",
            "a3c_walker2d.yaml", "a3c_bipedalwalker.yaml", "impala_pong.yaml", "appo_pong.yaml",
            "impala_breakout.yaml", "appo_breakout.yaml", "appo_halfcheetah.yaml", "appo_hopper.yaml",
            "appo_walker2d.yaml", "appo_bipedalwalker.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_config_validates_or_names_the_missing_extra(path):
    try:
        config = load_config(path)
    except ConfigError as exc:
        extra = extra_needed(load_raw_env_id(path))
        assert extra is not None and not installed(extra), exc
        assert f"pip install -e '.[{extra}]'" in str(exc) and str(exc).startswith("config key 'env.id'")
        return
    assert config["algorithm"]["name"] == path.stem.split("_")[0]  # a config is named after its algorithm


def load_raw_env_id(path) -> str:
    return yaml.safe_load(path.read_text())["env"]["id"]


@pytest.mark.parametrize("config, extra", [("a3c_lunarlander.yaml", "box2d"), ("a3c_pong.yaml", "atari")])
def test_missing_extra_is_exit_2_with_the_pip_command(tmp_path, config, extra):
    if installed(extra):
        pytest.skip(f"the {extra} extra is installed here")
    done = run_cli("train", "--config", CONFIGS / config, "--logdir", tmp_path)
    assert done.returncode == 2
    assert f"needs the optional '{extra}' extra" in done.stderr and f"pip install -e '.[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr and not any(tmp_path.iterdir())


def test_extras_are_recognised_by_env_id():
    assert extra_needed("LunarLander-v3") == "box2d" and extra_needed("BipedalWalker-v3") == "box2d"
    assert extra_needed("hogshare/Atari-v0") == extra_needed("ale_py:ALE/Pong-v5") == "atari"
    assert extra_needed("CartPole-v1") is None and missing_extra_message("Pendulum-v1") is None
    assert extra_needed("HalfCheetah-v5") == "mujoco" and extra_needed("ALE/Breakout-v5") == "atari"


def test_every_extra_a_message_names_is_declared_in_pyproject():
    """missing_extra_message tells users to pip install '.[extra]': each such extra must exist."""
    declared = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    assert declared["mujoco"][0] == "gymnasium[mujoco]"


@pytest.mark.parametrize("config, steps", [("a3c_acrobot.yaml", 12_000), ("a3c_pendulum.yaml", 10_000)])
def test_classic_control_config_runs_end_to_end(tmp_path, config, steps):
    done = run_cli("train", "--config", CONFIGS / config, "--logdir", tmp_path, *FAST,
                   "--set", f"trainer.total_steps={steps}")
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "total_steps reached" and summary["env_steps"] >= steps
    assert summary["episodes"] > 0 and np.isfinite(summary["mean_return"]) and summary["skipped_updates"] == 0


def test_image_observations_get_the_conv_lstm_model():
    framework.manual_seed(0)
    model = ActorCritic((4, 84, 84), [256], "relu", True, 6, False, IMAGE_CONV)
    assert [tuple(p.shape) for p in model.parameters()][:4] == [(16, 4, 8, 8), (16,), (32, 16, 4, 4), (32,)]
    assert model.body[-2].in_features == 32 * 9 * 9  # 84 -> 20 -> 9 after the two convolutions
    obs = np.random.default_rng(0).random((3, 4, 84, 84), dtype=np.float32)
    head, value, state = model(framework.from_numpy(obs), model.initial_state(3))
    assert head.shape == (3, 6) and value.shape == (3,) and state[0].shape == (3, 256)
    with framework.no_grad():
        acting, _ = model.policy_array(obs, model.initial_state(3))
    np.testing.assert_allclose(acting, head.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_atari_preprocessing_gives_stacked_84x84_frames():
    if not installed("atari"):
        pytest.skip("the atari extra (ale-py, opencv) is not installed")
    from framework.rl.envs.batch import EnvBatch
    from framework.rl.envs.info import env_info
    config = validate({"env": {"id": "hogshare/Atari-v0", "kwargs": {"game": "ALE/Pong-v5", "frame_stack": 4}}})
    envs = EnvBatch(env_info(config), 2, seed=0)
    try:
        assert envs.obs.shape == (2, 4, 84, 84) and envs.obs.dtype == np.uint8 and envs.obs.max() > 0
        out = envs.step(np.zeros(2, dtype=np.int64))
        assert out.rewards.shape == (2,)
    finally:
        envs.close()
