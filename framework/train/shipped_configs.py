"""The configs hogshare ships, and the one `train --env ID` picks for an environment id.

`train --env ID` trains with the shipped config made for ID (one whose
`env.id` is ID, on the local backend; where several are, the one PREFERRED
names), else with a default chosen by ID's spaces: an Atari game takes
APPO's Pong config (ALE ids: PPO's Atari settings), continuous
(Box) actions `a3c_continuous.yaml`, everything else `a3c.yaml` (image
observations go through the convolutional body in each);
the target return is then the one gymnasium registers for ID
(`spec.reward_threshold`), or none, and the run directory is named after ID
(a3c-mountaincar-v0-...). `env.kwargs` given with `--env` (`--set
env.kwargs.continuous=true`) are taken into account: a shipped config whose
environment they give other spaces (LunarLander-v3's discrete config, for
continuous actions) is passed over for the default for the new spaces, and a
default then sets no target return, since gymnasium's threshold is for the
id as registered (FrozenLake-v1's 0.7 is for the slippery map). The configs live in the checkout's
`configs/` (an editable install) or, installed from a wheel, in
`<prefix>/share/hogshare/configs`.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from framework.runtime.schema import ConfigError, printable, short_repr
from framework.train.config import experiment_name

if TYPE_CHECKING:
    import gymnasium as gym

DEFAULT = "a3c.yaml"
CONTINUOUS_DEFAULT = "a3c_continuous.yaml"
ATARI_DEFAULT = "appo_pong.yaml"
PREFERRED = {"ALE/Pong-v5": "appo_pong.yaml", "ALE/Breakout-v5": "appo_breakout.yaml",
             "HalfCheetah-v5": "appo_halfcheetah.yaml", "Hopper-v5": "appo_hopper.yaml",
             "Walker2d-v5": "appo_walker2d.yaml", "BipedalWalker-v3": "appo_bipedalwalker.yaml"}
"""The config `--env` takes for an id several shipped configs are made for: on 2 cores APPO with PPO's Atari settings
passed rl-zoo's A2C figure on Pong in 33 minutes where IMPALA's config took 91-119 (and A3C's had reached 5.6 after
65, experiments/results/actor_learner.md), and on Breakout scored above rl-zoo's A2C figure where IMPALA's config fell
short; APPO's MuJoCo and BipedalWalker configs learn more in rl-zoo's budget of env steps than A3C's
(experiments/results/zoo.md)."""


def configs_dir() -> Path:
    """The directory of the shipped configs; ConfigError when this installation has none."""
    for candidate in (Path(__file__).resolve().parents[2] / "configs", Path(sys.prefix) / "share/hogshare/configs"):
        if (candidate / DEFAULT).is_file():
            return candidate
    raise ConfigError("--env: this installation has no shipped configs (configs/ of a checkout, or "
                      "share/hogshare/configs of an install); allowed: --config PATH")


@dataclass(frozen=True)
class Choice:
    """A shipped config for an env id, the `--set` overrides that point it at the id, and why it was picked."""

    path: Path
    overrides: tuple[str, ...]
    reason: str


def _shipped_env_id(path: Path) -> str | None:
    """env.id of a shipped local-backend config (None for the ray backend's, or one that names none)."""
    raw = yaml.safe_load(path.read_text()) or {}
    if (raw.get("trainer") or {}).get("backend", "local") != "local":
        return None
    env = raw.get("env") or {}
    game = (env.get("kwargs") or {}).get("game")
    return game if game is not None and env.get("id") == "hogshare/Atari-v0" else env.get("id")


def _quoted(value: object) -> str:
    return yaml.safe_dump(value, default_style='"' if isinstance(value, str) else None).strip().removesuffix("...")\
        .strip()


def _has_image(space: "gym.Space") -> bool:
    """Whether an observation space is, or holds, a uint8 image (which env.normalize_obs must leave alone)."""
    if space.shape is not None and len(space.shape) == 3 and getattr(space.dtype, "name", None) == "uint8":
        return True
    children = getattr(space, "spaces", None)
    values = children.values() if isinstance(children, dict) else children or ()
    return any(_has_image(child) for child in values)


def _spaces(env_id: str, kwargs: dict | None = None) -> tuple["gym.Space", "gym.Space", float | None]:
    """(observation space, action space, registered reward threshold) of env_id made with kwargs; ConfigError if
    it cannot be built."""
    from framework.rl.envs.faults import EnvBuildError
    from framework.rl.envs.ids import env_id_problem, make_env
    problem = env_id_problem(env_id)
    if problem is not None:
        raise ConfigError(f"argument --env: got {printable(repr(env_id))}; allowed: {problem}")
    try:
        env = make_env(env_id, kwargs or {})
    except EnvBuildError as exc:  # names the real cause: an unknown id, a missing module and its extra
        raise ConfigError(f"argument --env: {exc.problem}") from None
    try:
        threshold = getattr(env.spec, "reward_threshold", None)
        return env.observation_space, env.action_space, None if threshold is None else float(threshold)
    finally:
        env.close()


def _made_for(path: Path, kwargs: dict) -> bool:
    """Whether the shipped config at path makes an environment of the same spaces with kwargs added to its own
    env.kwargs as without them."""
    env = yaml.safe_load(path.read_text())["env"]
    own = dict(env.get("kwargs") or {})
    return _spaces(env["id"], own)[:2] == _spaces(env["id"], {**own, **kwargs})[:2]


def choose(env_id: str, kwargs: dict | None = None) -> Choice:
    """The config `train --env env_id` trains with, for the env.kwargs given with it; ConfigError when env_id cannot
    be built."""
    directory = configs_dir()
    kwargs = kwargs or {}
    shipped = [directory / PREFERRED[env_id]] if env_id in PREFERRED and (directory / PREFERRED[env_id]).is_file() \
        else []
    shipped += [path for path in sorted(directory.glob("*.yaml"))
                if path.name != CONTINUOUS_DEFAULT and _shipped_env_id(path) == env_id]
    for path in shipped[:1]:
        if not kwargs or _made_for(path, kwargs):
            return Choice(path, (), f"the shipped config for {env_id}")
    observation, action, threshold = _spaces(env_id, kwargs)
    if kwargs:
        threshold = None  # gymnasium's is for the id as registered
    import gymnasium as gym
    from framework.rl.envs.extras import extra_needed
    if extra_needed(env_id) == "atari":
        name, kind = ATARI_DEFAULT, "Atari games"
    elif isinstance(action, gym.spaces.Box):
        name, kind = CONTINUOUS_DEFAULT, "continuous actions"
    else:
        name, kind = DEFAULT, "discrete actions"
    if shipped and shipped[0].name == name:  # the default for the new spaces is the shipped config itself
        return Choice(shipped[0], (), f"the shipped config for {env_id}")
    default = yaml.safe_load((directory / name).read_text())
    experiment = experiment_name(f"{default['algorithm']['name']}-{env_id}")  # the run directory names env_id
    overrides = (f"env.id={_quoted(env_id)}", "env.kwargs={}", f"trainer.target_return={_quoted(threshold)}",
                 f"experiment={_quoted(experiment)}")
    if _has_image(observation) and default["env"].get("normalize_obs"):
        overrides += ("env.normalize_obs=false",)
    target = "no target return" if threshold is None else f"target return {threshold:g} (gymnasium's)"
    if kwargs:
        target += f" (gymnasium's is for {env_id} as registered, not with env.kwargs {short_repr(kwargs)})"
    if shipped:
        kind += f" ({shipped[0].name} is for {env_id}'s spaces without these env.kwargs)"
    return Choice(directory / name, overrides, f"the default for {kind}, {target}")


def describe(choice: Choice) -> str:
    """One line saying which config `--env` picked."""
    return f"train: {printable(str(choice.path))}, {choice.reason}"
