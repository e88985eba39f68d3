"""`train --env ID`: the shipped config for ID, else a default chosen by ID's spaces."""
from __future__ import annotations

import pytest
import yaml

from framework.train import read_checkpoint, shipped_configs
from framework.runtime.schema import ConfigError
from extras import ATARI, BOX2D
from train_cli import CONFIGS, only_run_dir, run_cli


@pytest.mark.parametrize("env_id, config", [("Acrobot-v1", "a3c_acrobot.yaml"), ("CartPole-v1", "a3c.yaml"),
                                            ("LunarLander-v3", "a3c_lunarlander.yaml"),
                                            ("ALE/Pong-v5", "appo_pong.yaml"),
                                            ("ALE/Breakout-v5", "appo_breakout.yaml"),
                                            ("HalfCheetah-v5", "appo_halfcheetah.yaml"), ("Hopper-v5", "appo_hopper.yaml"),
                                            ("Walker2d-v5", "appo_walker2d.yaml"),
                                            ("BipedalWalker-v3", "appo_bipedalwalker.yaml")])
def test_an_id_with_a_shipped_config_takes_it_as_it_is(env_id, config):
    choice = shipped_configs.choose(env_id)
    assert (choice.path, choice.overrides) == (CONFIGS / config, ())


def test_the_preferred_configs_are_made_for_their_ids():
    for env_id, name in shipped_configs.PREFERRED.items():
        assert shipped_configs._shipped_env_id(CONFIGS / name) == env_id, name


@ATARI
def test_another_ale_game_takes_appos_pong_config_with_its_id():
    choice = shipped_configs.choose("ALE/SpaceInvaders-v5")
    assert choice.path == CONFIGS / "appo_pong.yaml"
    assert choice.overrides[:2] == ('env.id="ALE/SpaceInvaders-v5"', "env.kwargs={}")


@pytest.mark.parametrize("env_id, config, target", [("MountainCar-v0", "a3c.yaml", "-110.0"),
                                                    ("MountainCarContinuous-v0", "a3c_continuous.yaml", "90.0"),
                                                    ("FrozenLake-v1", "a3c.yaml", "0.7"),
                                                    ("Pendulum-v1", "a3c_pendulum.yaml", None)])
def test_other_ids_take_the_default_for_their_spaces_and_gymnasiums_target(env_id, config, target):
    choice = shipped_configs.choose(env_id)
    assert choice.path == CONFIGS / config
    expected = () if target is None else (f'env.id="{env_id}"', "env.kwargs={}", f"trainer.target_return={target}",
                                          f'experiment="a3c-{env_id.lower()}"')
    assert choice.overrides == expected


def test_image_observations_are_not_normalised_by_the_continuous_default():
    choice = shipped_configs.choose("custom_envs:ImageGoalBox")  # a channels-last image in a Dict, Box actions
    assert choice.path == CONFIGS / "a3c_continuous.yaml"
    assert choice.overrides == ('env.id="custom_envs:ImageGoalBox"', "env.kwargs={}", "trainer.target_return=null",
                                'experiment="a3c-custom_envs-imagegoalbox"', "env.normalize_obs=false")


@BOX2D
def test_env_kwargs_that_change_the_spaces_pass_the_shipped_config_over():
    """LunarLander-v3's shipped config is for its discrete actions: with continuous=true the default for continuous
    actions is taken; kwargs that keep the spaces keep the shipped config."""
    choice = shipped_configs.choose("LunarLander-v3", {"continuous": True})
    assert choice.path == CONFIGS / "a3c_continuous.yaml"
    assert "a3c_lunarlander.yaml is for LunarLander-v3's spaces without these env.kwargs" in choice.reason
    assert shipped_configs.choose("LunarLander-v3", {"enable_wind": True}).path == CONFIGS / "a3c_lunarlander.yaml"


def test_env_kwargs_drop_gymnasiums_target_which_is_for_the_id_as_registered(tmp_path):
    """FrozenLake-v1 registers 0.7 for its slippery map: `--set env.kwargs.is_slippery=false` trains with no
    target (one is set with --set trainer.target_return)."""
    assert "trainer.target_return=0.7" in shipped_configs.choose("FrozenLake-v1").overrides
    done = run_cli("train", "--env", "FrozenLake-v1", "--logdir", tmp_path, "--set", "env.kwargs.is_slippery=false",
                   "--set", "trainer.total_steps=500", "--set", "logging.progress=false", timeout=180)
    assert done.returncode == 0, done.stderr
    assert ("no target return (gymnasium's is for FrozenLake-v1 as registered, not with env.kwargs "
            "{'is_slippery': False})") in done.stderr
    config = yaml.safe_load((only_run_dir(tmp_path) / "config.yaml").read_text())
    assert config["env"]["kwargs"] == {"is_slippery": False} and config["trainer"]["target_return"] is None


def test_an_id_without_a_registered_threshold_trains_without_a_target():
    assert "trainer.target_return=null" in shipped_configs.choose("Blackjack-v1").overrides


def test_an_unknown_id_is_refused_naming_the_argument():
    with pytest.raises(ConfigError, match="argument --env: got 'NoSuchEnv-v0'; allowed: a registered"):
        shipped_configs.choose("NoSuchEnv-v0")


def test_train_env_runs_the_picked_config_with_user_overrides(tmp_path):
    done = run_cli("train", "--env", "MountainCar-v0", "--logdir", tmp_path, "--set", "trainer.max_seconds=2",
                   "--set", "logging.progress=false", timeout=180)
    assert done.returncode == 0, done.stderr
    assert "a3c.yaml, the default for discrete actions, target return -110 (gymnasium's)" in done.stderr
    run_dir = only_run_dir(tmp_path)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (config["env"]["id"], config["trainer"]["target_return"], config["trainer"]["max_seconds"]) == \
        ("MountainCar-v0", -110.0, 2.0)
    assert run_dir.name.startswith("a3c-mountaincar-v0-")  # named after the env, not the default config's task


def test_env_with_config_sets_env_id(tmp_path):
    done = run_cli("train", "--config", CONFIGS / "a3c.yaml", "--env", "Acrobot-v1", "--logdir", tmp_path,
                   "--set", "trainer.max_seconds=2", "--set", "logging.progress=false", timeout=180)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((only_run_dir(tmp_path) / "config.yaml").read_text())
    assert (config["env"]["id"], config["trainer"]["target_return"]) == ("Acrobot-v1", 475.0)
    assert only_run_dir(tmp_path).name.startswith("a3c-acrobot-v1-")  # not a3c-cartpole: named after its env


@pytest.mark.parametrize("argv, message", [
    (["--env", "NoSuchEnv-v0"], "train: error: argument --env: got 'NoSuchEnv-v0'"),
    (["--env", "CartPole-v1", "--resume", "runs/x"], "--env applies to new runs only"),
])
def test_bad_env_arguments_exit_2_with_one_line(tmp_path, argv, message):
    done = run_cli("train", *argv, "--logdir", tmp_path) if "--resume" not in argv else run_cli("train", *argv)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not any(tmp_path.iterdir())


@ATARI
def test_an_ale_game_trains_on_its_ram_with_an_mlp(tmp_path):
    """obs_type=ram: the console's 128 bytes (the last 4 stacked), read by the MLP; the screen's preprocessing
    (frame pooling, resizing) is not applied to them."""
    done = run_cli("train", "--env", "ALE/Pong-v5", "--logdir", tmp_path, "--set", "env.kwargs.obs_type=ram",
                   "--set", "trainer.workers=1", "--set", "env.envs_per_worker=2", "--set", "trainer.total_steps=400",
                   "--set", "logging.progress=false", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "restarting" not in done.stderr
    run_dir = only_run_dir(tmp_path)
    saved = read_checkpoint(run_dir)
    assert saved["body.1.weight"].shape[1] == 4 * 128  # the MLP (after Flatten) reads the stacked RAM
    evaluated = run_cli("evaluate", "--run", run_dir, "--episodes", 1, "--max-steps", 200, timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr
