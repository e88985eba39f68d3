"""A trained run's policy for the user's own loop: `load_policy(run_dir, checkpoint="latest") -> Policy`.

`Policy.act(obs, state=None, deterministic=True) -> (action, state)` has the
shape of Stable-Baselines3's `predict`. It acts through the algorithm's
actor (`rl.actor.Actor`), the code `evaluate` plays with, so the run's
observation normalisation is applied and a greedy action is the one
`evaluate` would take. `Policy.export(path)` writes the weights by their
PyTorch names, and the observation statistics apart under
`obs_normalization.`, as a `.safetensors` file (docs/python-api.md shows the
PyTorch side).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

import framework
from framework import algorithms, nn
from framework.runtime.algorithm import Algorithm
from framework.device import to_device, to_host
from framework.train.config import Config, ConfigError, validate
from framework.train.run_dir import check_replaceable, write_atomically
from framework.train.trust import read_run_config
from framework.runtime.schema import printable, short_repr
from framework.train.run_checkpoint import checkpoint_path, read_checkpoint

EXPORT_FORMAT = "hogshare-policy"
"""The `format` entry of an exported file's metadata."""

State = tuple[np.ndarray, ...] | None
"""A recurrent model's state: an LSTM's (h, c), each (hidden,) for one observation or (n, hidden) for a batch;
None without one."""


def load_trained(run_dir: str | Path, checkpoint: str = "latest",
                 trust_code: bool = False) -> tuple[Config, Algorithm, nn.Module]:
    """(config, algorithm, model holding the parameters of the latest or best checkpoint) of a run directory;
    ConfigError or CheckpointError when it is not one made by train or the checkpoint is missing or does not fit,
    and ConfigError when its config names code to import that neither this user's train wrote nor `trust_code`
    trusts (framework.train.trust)."""
    run_dir = Path(run_dir)
    checkpoint_path(run_dir, checkpoint)  # a name that is neither is refused before anything is read
    config = validate(read_run_config(run_dir, trust_code))
    algorithm = algorithms.get(config["algorithm"]["name"])
    model = algorithm.build_model(config)
    read_checkpoint(run_dir, config, model, sum(a.nbytes for a in algorithm.build_state(config).values()), checkpoint)
    return config, algorithm, model


def load_policy(run_dir: str | Path, checkpoint: str = "latest", trust_code: bool = False) -> "Policy":
    """The policy of a run directory's latest checkpoint (checkpoint="best": of its best one, `trainer.keep_best`);
    ConfigError for a run of an algorithm without an environment, or one whose config names code to import that
    this user's train did not write, unless `trust_code` (framework.train.trust)."""
    config, algorithm, model = load_trained(run_dir, checkpoint, trust_code)
    if not algorithm.can_act():
        acting = ", ".join(n for n in algorithms.names() if algorithms.get(n).can_act())
        raise ConfigError(f"run '{printable(str(run_dir))}' trained algorithm {algorithm.name}, which has no "
                          f"environment to act in, so no policy; allowed: runs of an algorithm with one ({acting})")
    return Policy(algorithm.actor(model, config), config)


class Policy:
    """A trained model acting in its environment's spaces, as `evaluate` plays it (see the module docstring)."""

    def __init__(self, actor: Any, config: Config):
        self._actor = actor
        self.config = config
        """The run's resolved config (what its config.yaml holds)."""

    @property
    def model(self) -> nn.Module:
        """The network (a framework nn.Module; its state_dict names follow PyTorch's)."""
        return self._actor.model

    @property
    def observation_space(self) -> gym.Space:
        return self._actor.observation_space

    @property
    def action_space(self) -> gym.Space:
        return self._actor.action_space

    def act(self, obs: Any, state: State = None, deterministic: bool = True) -> tuple[Any, State]:
        """(action, new state) for one observation, or (actions, new state) for a batch of them.

        One observation is as the env gives it: an array of the space's shape (an int for Discrete), a dict of
        them for a Dict space, a tuple for a Tuple space. A batch has one more, first, axis: an array of n of
        them, or a dict (tuple) of such arrays, as Stable-Baselines3 takes them. Actions are the env's: an int (an
        int64 array for a batch) for Discrete spaces, int64 arrays for MultiDiscrete, int8 0/1 arrays for
        MultiBinary, float32 arrays clipped to the bounds for Box. Greedy (the most likely action of each
        component, or the mean) unless deterministic is False, which samples (with `model.sde`, from exploration
        matrices drawn anew at each call, not kept for a rollout as training keeps them). `state` is the recurrent
        (LSTM) state returned by the previous call (None at an episode's start; always None without an LSTM).
        """
        observations, batched = _observations(self.observation_space, obs)
        actions, new_state = self._actor.act(self._actor.encode(observations),
                                             self._model_state(state, len(observations), batched), deterministic)
        if new_state is not None:
            new_state = tuple(to_host(part.data_array, copy=True) if batched else to_host(part.data_array)[0].copy()
                              for part in new_state)
        if batched:
            return actions, new_state
        return (int(actions[0]) if isinstance(self.action_space, gym.spaces.Discrete) else actions[0]), new_state

    def _model_state(self, state: State, n: int, batched: bool) -> Any:
        """The model's recurrent state for a batch of n from the user's state; ValueError when it does not fit."""
        template = self._actor.initial_state(n)
        if state is None:
            return template
        if template is None:
            raise ValueError("state: got a state for a model without an LSTM; allowed: None")
        want = [tuple(part.shape) if batched else tuple(part.shape[1:]) for part in template]
        if len(state) != len(want) or any(np.shape(part) != shape for part, shape in zip(state, want)):
            raise ValueError(f"state: got {[np.shape(part) for part in state]}; allowed: "
                             f"{_shapes_text(want)}, as the previous act returned, or None at an episode's start")
        return tuple(framework.as_tensor(to_device(np.asarray(part, dtype=to_host(like.data_array).dtype)
                                                   .reshape(like.shape), self.model.device))
                     for part, like in zip(state, template))

    def export(self, path: str | Path) -> Path:
        """Write the weights and observation statistics as a .safetensors file, atomically; ConfigError naming the
        path when its directory is missing or not writable, or when it is not a regular file (a symbolic link, a
        device, a FIFO: `run_dir.check_replaceable`). Returns the path."""
        from safetensors.numpy import save

        path = Path(path)
        if not path.parent.is_dir():
            raise ConfigError(f"export: cannot write '{printable(str(path))}' (no directory "
                              f"'{printable(str(path.parent))}'); allowed: a file in an existing, writable directory")
        check_replaceable(path, "export")
        arrays = {name: np.ascontiguousarray(value) for name, value in self._actor.named_arrays().items()}
        metadata = {"format": EXPORT_FORMAT, "config": json.dumps(self.config),
                    **{key: repr(value) for key, value in self._actor.normalization_settings().items()}}
        data = save(arrays, metadata=metadata)
        try:
            write_atomically(path, lambda f: f.write(data))
        except OSError as exc:
            raise ConfigError(f"export: cannot write '{printable(str(path))}' ({exc.strerror or exc}); allowed: a "
                              f"file in an existing, writable directory") from None
        return path


def _shapes_text(shapes: list[tuple[int, ...]]) -> str:
    """What a state of these shapes is, in words: '(h, c), two arrays of shape (8,)'."""
    count = {1: "one array", 2: "(h, c), two arrays"}.get(len(shapes), f"{len(shapes)} arrays")
    if len(set(shapes)) == 1:
        return f"{count} of shape {shapes[0]}"
    return f"{count} of shapes {', '.join(map(str, shapes))}"


def _observations(space: gym.Space, obs: Any) -> tuple[Any, bool]:
    """(the n observations of obs, as a sequence, and whether obs was a batch) for the env's observation space;
    ValueError saying what one observation and a batch look like when obs is neither."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        if isinstance(space, gym.spaces.Dict):
            keys, fits = list(space.spaces), isinstance(obs, Mapping) and set(obs) == set(space.spaces)
        else:
            keys = list(range(len(space.spaces)))
            fits = isinstance(obs, (tuple, list)) and len(obs) == len(keys)
        if not fits:
            kind = "dict with the keys" if isinstance(space, gym.spaces.Dict) else "tuple with the entries"
            raise ValueError(f"obs: got {short_repr(obs)}; allowed: a {kind} {', '.join(map(repr, keys))} of the "
                             f"observation space {space}, each one observation or a batch of them")
        parts = {key: _observations(space.spaces[key], obs[key]) for key in keys}
        sizes = {(len(values), batched) for values, batched in parts.values()}
        if len(sizes) > 1:
            raise ValueError(f"obs: got entries of {sorted(n for n, _ in sizes)} observations; allowed: entries "
                             f"that are all one observation, or all batches of the same size")
        n, batched = sizes.pop()
        rows = [{key: parts[key][0][i] for key in keys} for i in range(n)]
        if isinstance(space, gym.spaces.Tuple):
            rows = [tuple(row.values()) for row in rows]
        return rows, batched
    array = np.asarray(obs)
    shape = tuple(space.shape)
    batched = array.ndim == len(shape) + 1
    if array.shape[batched:] != shape or (batched and array.shape[0] == 0):
        raise ValueError(f"obs: got an array of shape {array.shape}; allowed: one observation of shape {shape} or "
                         f"a batch of them, shape ({', '.join(['n', *map(str, shape)])})")
    return array if batched else array[None], batched
