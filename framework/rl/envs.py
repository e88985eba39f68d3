"""Gymnasium environments for workers: construction, and a batch of envs stepped together with auto-reset.

`EnvBatch` keeps the current observations of its n environments in one array,
so a worker acts with one batched forward pass per step; episodes that end are
reset in place and their returns and lengths reported. An environment that
raises (or calls sys.exit) is reported as `EnvError` naming the env id and
the worker's rank.

Where gymnasium registers a vector entry point for the id that is the same
environment (same spaces) and can reset a finished env within the step that
ended it (SAME_STEP autoreset, the final observation in info["final_obs"]),
the batch is one vector env: ale-py's AtariVectorEnv steps all of a worker's
games in C++ with the preprocessing built in (its speed against the Python
wrapper chain is in experiments/results/atari.md). Elsewhere n envs are
stepped in a Python loop. Both give the same steps: the reset observation
right after the step that ended an episode, the last observation before it
for bootstrapping on truncation. A NEXT_STEP-only vector env is not used: it
reports the reset observation one call later, when every other env has moved
on too, and cannot reset one env alone. CartPole's (gymnasium's
CartPoleVectorEnv) is, in the version that resets in the same step
(`cartpole_vector`). `vectorize=False` (`env.vectorize: false`) always loops.

A batch made with `render=True` (to record episodes) is always a loop of envs
built with render_mode="rgb_array": its `frames` hold each env's screen after
its reset and after every step, rendered before any auto-reset, so the frame
of an episode's last step is there too. For Atari that is the game screen
(210x160 colour), not the 84x84 observation; a vector env renders none.

An `env.id` is a gymnasium id, module:EnvId or module:Factory (`env_source`
finds what it names, importing the module through
framework.runtime.user_code); building one that fails raises
`EnvBuildError` naming the real cause and the config key at fault: a missing
module and the extra that brings it, gymnasium's own hint for an unknown or
deprecated id, env.kwargs only for a TypeError of arguments the env does not
take. Environments that need an optional extra (Box2D for LunarLander, ale-py
for Atari, MuJoCo) are refused at config validation with the `pip install` to
run, and `hogshare/Atari-v0` is an ALE game with the usual A3C/DQN
preprocessing, as a wrapper chain (`make_atari`) and as a vector env
(`make_atari_vector`); every ALE id is that, with the id as its game.
Observations and actions are read as rl.spaces says: uint8 images (C, H, W)
stay uint8 (the model reads them as [0, 1]); other observations are float32. With a `Normalization` (rl.normalization), the batch
gives normalised observations and scaled rewards, as VecNormalize does, and
reports episode returns in the environment's own units.

Two learning signals of the Atari literature change what the learner sees and
nothing else (episodes, returns and evaluation stay the game's):
`sign_rewards` gives the sign of each reward (-1, 0, 1), as the DQN, A3C and
IMPALA papers clip Atari's; `life_loss_done` marks the step that lost a life
(an env whose info reports `lives`, as ALE's do) in `BatchStep.life_lost`, which
a rollout treats as the end of an episode, as Stable-Baselines3's AtariWrapper
does, while the game goes on.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from framework.rl.cartpole_vector import SameStepCartPoleVectorEnv
from framework.runtime import user_code
from framework.rl.normalization import Normalization
from framework.rl.spaces import ActionHead, ObservationLayout, SpaceError
from framework.runtime.schema import ConfigError, short_repr

ATARI_ID = "hogshare/Atari-v0"

SAME_STEP_VERSIONS = {CartPoleVectorEnv: SameStepCartPoleVectorEnv}
"""Vector entry points that reset one call late (NEXT_STEP), and the version of each that resets in the same
step: EnvBatch uses the latter in their place."""

EXTRAS = {"box2d": ("Box2D", "pygame"), "atari": ("ale_py", "cv2"), "mujoco": ("mujoco", "imageio")}
"""The optional extras (pyproject.toml) that some environments need, and the modules each one installs."""

ALE_ENTRY_POINT = "ale_py.env:AtariEnv"
"""The entry point of every id ale-py registers (ALE/Breakout-v5, BreakoutNoFrameskip-v4, ...)."""

_GYM_ID = r"[\w./-]+"
_KWARGS_TYPE_ERROR = re.compile(r"(unexpected|multiple values for|missing \d+ required|takes \d+ positional)"
                                r".*argument|argument.*(unexpected|required)")
"""The TypeErrors of a call with keyword arguments it does not take (the only ones that blame env.kwargs)."""


class EnvError(RuntimeError):
    """An environment that failed to build, reset or step; names the env id and the worker rank."""


class NoFrames(EnvError):
    """An environment asked to render that gives no rgb_array frames (it has no such render mode)."""


class EnvBuildError(EnvError):
    """An env.id that cannot be built: `key` is the config key at fault (env.id or env.kwargs), `problem` the
    rest of the one-line message, which names the real cause."""

    def __init__(self, env_id: str, rank: int, key: str, problem: str):
        super().__init__(f"environment {env_id} (worker {rank}) could not be built: {problem}")
        self.key, self.problem = key, problem


def extra_needed(env_id: str) -> str | None:
    """The name of the optional extra env_id needs (see EXTRAS), or None."""
    module, _, name = env_id.rpartition(":")
    if module == "ale_py" or name.startswith("ALE/") or name == ATARI_ID:
        return "atari"
    spec = gym.envs.registry.get(name)
    entry = spec.entry_point if spec is not None and isinstance(spec.entry_point, str) else ""
    if entry == ALE_ENTRY_POINT:
        return "atari"
    if entry.startswith("gymnasium.envs.mujoco"):
        return "mujoco"
    return "box2d" if entry.startswith("gymnasium.envs.box2d") else None


def _install(extra: str) -> str:
    return f"pip install -e '.[{extra}]' in a checkout (or pip install 'hogshare[{extra}]')"


def missing_extra_message(env_id: str) -> str | None:
    """What to install when env_id needs an extra that is not installed, else None."""
    extra = extra_needed(env_id)
    missing = [] if extra is None else [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"{env_id} needs the optional '{extra}' extra, which is not installed (module {missing[0]!r} "
            f"missing): run {_install(extra)}")


def env_id_problem(env_id: str) -> str | None:
    """None when env_id has one of the forms of env.id (checked without importing anything), else what is allowed.

    The forms: a gymnasium id (CartPole-v1, ALE/Breakout-v5), module:EnvId (the module registers EnvId when
    imported) and module:Factory (an Env subclass or a callable that returns an Env; env.kwargs go to it).
    """
    module, sep, name = env_id.partition(":")
    if re.fullmatch(_GYM_ID, env_id) or (sep and user_code.ATTRIBUTE_SPEC.fullmatch(f"{module}:x")
                                         and re.fullmatch(_GYM_ID, name)):
        return None
    return "a gymnasium environment id (e.g. CartPole-v1, ALE/Breakout-v5), module:EnvId or module:Factory"


@dataclass(frozen=True)
class EnvSource:
    """What an env.id names, found: a gymnasium id for gym.make, or a factory to call; the kwargs for either.

    An ALE id (ALE/Breakout-v5, BreakoutNoFrameskip-v4) becomes `hogshare/Atari-v0` with the id as its game:
    the A3C/DQN preprocessing and the convolutional model, rl-zoo's convention.
    """

    env_id: str
    gym_id: str | None
    factory: Callable[..., gym.Env] | None
    kwargs: Mapping[str, Any]


def env_source(env_id: str, kwargs: Mapping[str, Any] | None = None) -> EnvSource:
    """Find what env_id names (importing the module of a module:name form: see framework.runtime.user_code);
    ConfigError when the module cannot be imported or names nothing usable."""
    kwargs = dict(kwargs or {})
    module, _, name = env_id.rpartition(":")
    if module:
        imported = user_code.import_module("env.id", env_id, module)
        factory = user_code.find_attribute(imported, name) if user_code.ATTRIBUTE_SPEC.fullmatch(f"m:{name}") \
            else None
        if factory is not None:
            if not callable(factory):
                raise ConfigError(f"config key 'env.id': got {env_id!r}, a {type(factory).__name__}; allowed: a "
                                  f"gymnasium.Env subclass or a callable that returns a gymnasium.Env")
            return EnvSource(env_id, None, factory, kwargs)
        if name not in gym.envs.registry:
            raise ConfigError(f"config key 'env.id': got {env_id!r}; allowed: module:EnvId with an id the module "
                              f"registers, or module:Factory with a name it defines (module {module!r} has "
                              f"neither {name!r})")
    if name not in gym.envs.registry and importlib.util.find_spec("ale_py") is not None:
        importlib.import_module("ale_py")  # registers the ALE ids
    spec = gym.envs.registry.get(name)
    if spec is not None and spec.entry_point == ALE_ENTRY_POINT:
        return EnvSource(env_id, ATARI_ID, None, {"game": name, **kwargs})
    return EnvSource(env_id, name, None, kwargs)


def _missing_module(exc: BaseException) -> str | None:
    """The module whose absence made exc (an ImportError, or gymnasium's DependencyNotInstalled from one)."""
    while exc is not None:
        if isinstance(exc, ImportError) and exc.name:
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


def _build_problem(env_id: str, kwargs: Mapping[str, Any], exc: BaseException) -> tuple[str, str]:
    """(config key at fault, the rest of the message) for an exception raised while building env_id."""
    shown, text = repr(env_id), str(exc).split(" was raised from the environment creator")[0]
    if isinstance(exc, SystemExit):
        return "env.id", (f"got {shown} with env.kwargs {short_repr(dict(kwargs))}, which called sys.exit({exc.code!r}) "
                          f"while being built")
    if isinstance(exc, TypeError) and _KWARGS_TYPE_ERROR.search(text):
        return "env.kwargs", (f"got {short_repr(dict(kwargs))}; allowed: keyword arguments {env_id} "
                              f"accepts (TypeError: {text})")
    if isinstance(exc, gym.error.UnregisteredEnv) or isinstance(exc, gym.error.DeprecatedEnv):
        return "env.id", (f"got {shown}; allowed: a registered gymnasium environment id, e.g. CartPole-v1, "
                          f"Acrobot-v1, Pendulum-v1, ALE/Breakout-v5, or module:EnvId or module:Factory "
                          f"(gymnasium: {exc})")
    module = _missing_module(exc)
    if module is not None:
        extras = [extra for extra, modules in EXTRAS.items() if module in modules]
        install = f" (the '{extras[0]}' extra: {_install(extras[0])})" if extras else ""
        return "env.id", f"got {shown}, which needs module {module!r}, not installed{install}"
    return "env.id", (f"got {shown} with env.kwargs {short_repr(dict(kwargs))}, which could not be built: "
                      f"{type(exc).__name__}: {text}")


def make_atari(game: str = "ALE/Pong-v5", frame_stack: int = 4, screen_size: int = 84, noop_max: int = 30,
               terminal_on_life_loss: bool = False, obs_type: str = "rgb", **kwargs: Any) -> gym.Env:
    """An ALE game preprocessed as in A3C/DQN: up to noop_max no-ops at reset, 4 frames per action (max of the
    last two), 84x84 grayscale uint8, the last frame_stack frames stacked: observations (k, 84, 84).

    With obs_type "ram" the observations are the console's 128 bytes of RAM instead, the last frame_stack of
    them stacked, (k, 128) uint8, which the model reads through its MLP: ALE repeats each action 4 frames
    itself (there is no screen to max-pool or resize), and screen_size, noop_max and terminal_on_life_loss,
    which belong to the screen's preprocessing, are not used. kwargs go to the ALE environment (e.g.
    repeat_action_probability); registered as `hogshare/Atari-v0`.
    """
    importlib.import_module("ale_py")  # registers the ALE/ ids
    if obs_type == "ram":
        return FrameStackObservation(gym.make(game, obs_type="ram", frameskip=4, **kwargs), frame_stack)
    env = gym.make(game, frameskip=1, obs_type=obs_type, **kwargs)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=4, screen_size=screen_size,
                             terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True, scale_obs=False)
    return FrameStackObservation(env, frame_stack)


def make_atari_vector(num_envs: int, game: str = "ALE/Pong-v5", frame_stack: int = 4, screen_size: int = 84,
                      noop_max: int = 30, terminal_on_life_loss: bool = False,
                      autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP, **kwargs: Any) -> gym.vector.VectorEnv:
    """num_envs games of `make_atari` as one ale-py AtariVectorEnv (C++, one thread: a worker owns one core).

    The same preprocessing, unclipped rewards and no FIRE at reset, as the wrapper chain; the game's
    registered settings (sticky actions, frame limit) unless kwargs override them. What still differs is
    said in tests/algorithms/a3c/test_env_batch.py: the no-op counts come from another generator, and
    the stack is padded with zero frames after a reset where the wrapper repeats the first frame.
    """
    importlib.import_module("ale_py")
    from ale_py.vector_env import AtariVectorEnv

    settings = {**gym.spec(game).kwargs, **kwargs}
    settings.pop("frameskip", None)  # frames are skipped (4, max-pooled) as in AtariPreprocessing, not by ALE
    return AtariVectorEnv(settings.pop("game"), num_envs, num_threads=1, autoreset_mode=autoreset_mode,
                          img_height=screen_size, img_width=screen_size, stack_num=frame_stack, frameskip=4,
                          noop_max=noop_max, episodic_life=terminal_on_life_loss, reward_clipping=False,
                          use_fire_reset=False, **settings)


if ATARI_ID not in gym.envs.registry:
    gym.register(ATARI_ID, entry_point=make_atari, vector_entry_point=make_atari_vector)


def make_env(env_id: str, kwargs: Mapping[str, Any] | None = None, rank: int = 0) -> gym.Env:
    """The environment env_id names (see env_source), built with kwargs (gym.make without the passive checker);
    EnvBuildError naming the real cause if it cannot be built."""
    source = env_source(env_id, kwargs)
    with warnings.catch_warnings(record=True) as caught:  # shown only for an env that builds: the error says it
        try:
            if source.factory is None:
                env = gym.make(source.gym_id, disable_env_checker=True, **source.kwargs)
            else:
                env = source.factory(**source.kwargs)
        except (Exception, SystemExit) as exc:  # sys.exit() in an env's __init__ ends no process
            raise EnvBuildError(env_id, rank, *_build_problem(env_id, kwargs or {}, exc)) from exc
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if not isinstance(env, gym.Env):
        raise EnvBuildError(env_id, rank, "env.id", f"got {env_id!r}, which returned a {type(env).__name__}; "
                            f"allowed: a gymnasium.Env subclass or a callable that returns a gymnasium.Env")
    for name in ("observation_space", "action_space"):
        space = getattr(env, name, None)
        if not isinstance(space, gym.spaces.Space):
            env.close()
            raise EnvBuildError(env_id, rank, "env.id", f"got {env_id!r}, whose {name} is "
                                f"{'missing' if space is None else f'a {type(space).__name__}'}; allowed: an Env "
                                f"that sets observation_space and action_space to gymnasium spaces")
    return env


@dataclass
class BatchStep:
    """What one step of every env in a batch produced (observations are in EnvBatch.obs)."""

    rewards: np.ndarray        # (n,) float32
    terminated: np.ndarray     # (n,) bool
    truncated: np.ndarray      # (n,) bool, False where terminated
    truncated_index: np.ndarray  # indices of truncated envs
    truncated_obs: np.ndarray  # their last observations before the reset, for bootstrapping
    episode_index: list[int]   # envs whose episode ended, in order
    episode_returns: list[float]
    episode_lengths: list[int]
    life_lost: np.ndarray      # (n,) bool: lost a life without ending the episode (with life_loss_done only)


class _LoopEnvs:
    """n `gym.make` envs stepped one after the other; an env whose episode ends is reset at once."""

    def __init__(self, env_id: str, kwargs: Mapping[str, Any] | None, n: int, rank: int, render: bool = False):
        self.env_id, self.rank = env_id, rank
        self.lives: np.ndarray | None = None
        """Set to an (n,) int array to have step() keep each env's info["lives"] there (-1 where absent)."""
        with warnings.catch_warnings():
            if render:  # gymnasium's warning for an env without rgb_array: NoFrames says it, in one line
                kwargs = {**(kwargs or {}), "render_mode": "rgb_array"}
                warnings.filterwarnings("ignore", message=".*render_mode='rgb_array' that is not in the possible")
            self.envs = [make_env(env_id, kwargs, rank) for _ in range(n)]
        self.observation_space, self.action_space = self.envs[0].observation_space, self.envs[0].action_space
        self.frames: list[Any] | None = [None] * n if render else None
        """With render: each env's latest rgb_array frame (see the module docstring); else None."""

    def _error(self, i: int, what: str, exc: BaseException) -> EnvError:
        return EnvError(f"environment {self.env_id} (worker {self.rank}, env {i}) raised in {what}: "
                        f"{type(exc).__name__}: {exc}")

    def _reset(self, i: int, seed: int | None = None) -> Any:
        try:
            observation = self.envs[i].reset(seed=seed)[0]
        except (Exception, SystemExit) as exc:
            raise self._error(i, "reset", exc) from exc
        self._render(i)
        return observation

    def _render(self, i: int) -> None:
        """Keep env i's screen in frames, when rendering."""
        if self.frames is None:
            return
        try:
            frame = self.envs[i].render()
        except (Exception, SystemExit) as exc:
            raise self._error(i, "render", exc) from exc
        if not (isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3
                and frame.shape[2] == 3):
            modes = self.envs[i].metadata.get("render_modes")
            raise NoFrames(f"environment {self.env_id} rendered {type(frame).__name__} where an rgb_array frame "
                           f"(height, width, 3) uint8 was asked for (its render modes: {modes})")
        self.frames[i] = frame

    def reset(self, seed: int) -> list[Any]:
        """Reset env i with seed + i; their first observations."""
        for i, env in enumerate(self.envs):
            env.action_space.seed(seed + i)
        return [self._reset(i, seed + i) for i in range(len(self.envs))]

    def step(self, actions: Any) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[Any]]:
        """(observations after any reset, rewards, terminated, truncated, last observations of ended episodes)."""
        n = len(self.envs)
        observations: list[Any] = [None] * n
        final: list[Any] = [None] * n
        rewards = np.zeros(n)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        for i, env in enumerate(self.envs):
            try:
                observation, rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
            except (Exception, SystemExit) as exc:
                raise self._error(i, "step", exc) from exc
            if self.lives is not None:
                self.lives[i] = info.get("lives", -1)
            self._render(i)
            if terminated[i] or truncated[i]:
                final[i] = observation
                observation = self._reset(i)
            observations[i] = observation
        return observations, rewards, terminated, truncated, final

    def close(self) -> None:
        for env in self.envs:
            env.close()


class _VectorEnvs:
    """One vector env from the id's vector entry point, resetting ended episodes in the same step."""

    def __init__(self, vector_env: gym.vector.VectorEnv, env_id: str, rank: int):
        self.vector_env, self.env_id, self.rank = vector_env, env_id, rank
        self.lives: np.ndarray | None = None
        """As _LoopEnvs.lives, from the vector env's info["lives"]."""
        self.observation_space = vector_env.single_observation_space
        self.action_space = vector_env.single_action_space

    @classmethod
    def build(cls, env_id: str, kwargs: Mapping[str, Any] | None, n: int, rank: int) -> "_VectorEnvs | None":
        """The vector env for env_id when one is registered, accepts kwargs, resets in the same step and has
        the spaces of `make_env(env_id, kwargs)`; None otherwise (a loop of envs is then used)."""
        source = env_source(env_id, kwargs)
        spec = None if source.gym_id is None else gym.envs.registry.get(source.gym_id)
        if spec is None or spec.vector_entry_point is None:
            return None
        creator = load_env_creator(spec.vector_entry_point) if isinstance(spec.vector_entry_point, str) \
            else spec.vector_entry_point
        creator = SAME_STEP_VERSIONS.get(creator, creator)
        kwargs = dict(source.kwargs)
        if "autoreset_mode" in inspect.signature(creator).parameters:
            kwargs["autoreset_mode"] = AutoresetMode.SAME_STEP
        elif getattr(creator, "metadata", {}).get("autoreset_mode") != AutoresetMode.SAME_STEP:
            return None
        try:
            vector_env = gym.make_vec(dataclasses.replace(spec, vector_entry_point=creator), num_envs=n,
                                      vectorization_mode="vector_entry_point", **kwargs)
        except TypeError:  # arguments that only the single env takes
            return None
        except (Exception, SystemExit) as exc:
            raise EnvError(f"environment {env_id} (worker {rank}) could not be built as a vector env: {exc}") from exc
        single = make_env(env_id, kwargs=source.kwargs, rank=rank)
        same = (single.observation_space == vector_env.single_observation_space
                and single.action_space == vector_env.single_action_space)
        single.close()
        if same and vector_env.metadata.get("autoreset_mode") == AutoresetMode.SAME_STEP:
            return cls(vector_env, env_id, rank)
        vector_env.close()
        return None

    def _error(self, what: str, exc: BaseException) -> EnvError:
        return EnvError(f"environment {self.env_id} (worker {self.rank}, vector env) raised in {what}: "
                        f"{type(exc).__name__}: {exc}")

    def reset(self, seed: int) -> np.ndarray:
        """Reset every env (env i with seed + i, as gymnasium's vector envs do); their first observations.

        seed is first taken modulo 2**31 - n, so that every env's seed fits the int32 that ALE takes.
        """
        seed %= 2**31 - self.vector_env.num_envs
        self.vector_env.action_space.seed(seed)
        try:
            return self.vector_env.reset(seed=seed)[0]
        except (Exception, SystemExit) as exc:
            raise self._error("reset", exc) from exc

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
        """As _LoopEnvs.step, from one call of the vector env."""
        try:
            observations, rewards, terminated, truncated, info = self.vector_env.step(actions)
        except (Exception, SystemExit) as exc:
            raise self._error("step", exc) from exc
        if self.lives is not None:
            self.lives[...] = info.get("lives", -1)
        done = terminated | truncated
        return observations, np.asarray(rewards, dtype=np.float64), terminated, truncated, \
            info["final_obs"] if done.any() else None

    def close(self) -> None:
        self.vector_env.close()


class EnvBatch:
    """n environments of one id stepped together (one vector env, or a loop of envs: see the module docstring);
    obs holds their current observations as the model reads them (`layout`: rl.spaces.ObservationLayout),
    uint8 for uint8 images (C, H, W) and float32 otherwise; actions are the policy's (`action_head`:
    rl.spaces.ActionHead), given to the envs offset by the space's start or clipped to a Box's bounds.
    With `normalization`, observations and rewards are normalised (see the module docstring).
    With render, `frames` holds each env's latest screen (see the module docstring). With vectorize false the
    envs are a loop even where a vector env would serve. `sign_rewards` and `life_loss_done` change the
    learning signal (see the module docstring).
    """

    def __init__(self, env_id: str, kwargs: Mapping[str, Any] | None, n: int, seed: int, rank: int = 0,
                 normalization: Normalization | None = None, render: bool = False, vectorize: bool = True,
                 sign_rewards: bool = False, life_loss_done: bool = False):
        self.env_id, self.rank, self.normalization = env_id, rank, normalization
        self.sign_rewards = sign_rewards
        if render:  # offscreen: pygame's SDL then opens no window and looks for no display
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        vector = _VectorEnvs.build(env_id, kwargs, n, rank) if vectorize and not render else None
        self.vectorized = vector is not None
        self._envs = vector if vector is not None else _LoopEnvs(env_id, kwargs, n, rank, render)
        self._n = n
        try:
            self.layout = ObservationLayout.of(self._envs.observation_space)
            self.action_head = ActionHead(self._envs.action_space)
        except SpaceError as exc:
            self._envs.close()
            raise EnvError(f"environment {env_id} (worker {rank}): {exc}") from None
        self.action_space = self._envs.action_space
        self.obs_shape: tuple[int, ...] = self.layout.shape
        dtype = self.layout.dtype
        self.obs = np.zeros((n, *self.obs_shape), dtype=dtype)
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)
        self._life_lost = np.zeros(n, dtype=bool)
        self._last_lives: np.ndarray | None = None
        if life_loss_done:  # -1: not known yet (after a reset the next step's info tells)
            self._envs.lives = np.full(n, -1, dtype=np.int64)
            self._last_lives = self._envs.lives.copy()
        self.obs[...] = self._observe(self._envs.reset(seed))

    def __len__(self) -> int:
        return self._n

    @property
    def returns(self) -> np.ndarray:
        """Each env's return so far in the episode under way, in the environment's own units."""
        return self._returns

    @property
    def frames(self) -> list[np.ndarray]:
        """Each env's latest rgb_array frame (H, W, 3) uint8; only for a batch made with render."""
        assert isinstance(self._envs, _LoopEnvs) and self._envs.frames is not None, "a batch made with render"
        return self._envs.frames

    def _observe(self, observations: Any, update: bool = True) -> np.ndarray:
        """Raw observations as a batch, normalised when the batch normalises (merged into the statistics when
        `update`)."""
        batch = self.layout.batch(observations)
        return batch if self.normalization is None else self.normalization.observations(batch, update)

    def step(self, actions: np.ndarray) -> BatchStep:
        """Step every env with its action; finished episodes are reset and their stats returned."""
        observations, rewards, terminated, truncated, final = self._envs.step(self.action_head.for_env(actions))
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool) & ~terminated
        self._returns += rewards
        self._lengths += 1
        ended = np.flatnonzero(terminated | truncated)
        episode_returns = self._returns[ended].tolist()
        episode_lengths = self._lengths[ended].tolist()
        self._returns[ended] = 0.0
        self._lengths[ended] = 0
        truncated_index = np.flatnonzero(truncated)
        self.obs[...] = self._observe(observations)
        if self._last_lives is not None:
            self._lives_lost(ended)
        if self.sign_rewards:
            rewards = np.sign(rewards)
        if self.normalization is not None:
            rewards = self.normalization.rewards(rewards, terminated | truncated)
        return BatchStep(rewards.astype(np.float32), terminated, truncated, truncated_index,
                         self._observe([final[i] for i in truncated_index], update=False), ended.tolist(),
                         episode_returns, episode_lengths, self._life_lost.copy())

    def _lives_lost(self, ended: np.ndarray) -> None:
        """Mark in _life_lost the envs that lost a life in this step without ending their episode."""
        lives, last = self._envs.lives, self._last_lives
        assert lives is not None and last is not None
        if (lives < 0).all():
            raise EnvError(f"environment {self.env_id} (worker {self.rank}) reports no 'lives' in its step info, "
                           f"which env.life_loss_done needs (ALE games report it); allowed: life_loss_done: false "
                           f"for this environment")
        np.logical_and(last >= 0, lives < last, out=self._life_lost)
        self._life_lost[ended] = False
        last[...] = lives
        last[ended] = -1

    def close(self) -> None:
        """Merge the steps' pending normalisation statistics, then close every env."""
        if self.normalization is not None:
            self.normalization.flush()
        self._envs.close()
