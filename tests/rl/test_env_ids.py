"""The forms of `env.id` (rl.envs.ids): a gymnasium id, module:Class, module:factory and module:RegisteredId, each
resolved to what builds the env (the runs of each form in spawned workers: tests/train/test_user_code.py)."""
import gymnasium as gym
import pytest

from framework.rl.envs.faults import EnvBuildError
from framework.rl.envs.ids import env_source, make_env
from framework.runtime.schema import ConfigError


@pytest.mark.parametrize("env_id, gym_id, factory", [
    ("CartPole-v1", "CartPole-v1", None),
    ("custom_envs:MoveToGoal", None, "MoveToGoal"),
    ("custom_envs:make_move_to_goal", None, "make_move_to_goal"),
    ("custom_envs:MoveToGoal-v0", "MoveToGoal-v0", None),  # importing the module registered it
])
def test_each_form_names_what_builds_its_env(env_id, gym_id, factory):
    source = env_source(env_id)
    assert source.gym_id == gym_id
    assert (source.factory and source.factory.__name__) == factory
    env = make_env(env_id)
    assert isinstance(env, gym.Env) and env.reset(seed=0)[0] in env.observation_space
    env.close()


def test_a_module_that_names_nothing_usable_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="module 'custom_envs' has neither 'Nowhere'"):
        env_source("custom_envs:Nowhere")
    with pytest.raises(EnvBuildError, match="which returned a int; allowed: a gymnasium.Env subclass or a callable"):
        make_env("custom_envs:not_an_env")
