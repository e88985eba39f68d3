"""What an actor-critic plugin on gymnasium environments is, besides its loss and worker loop.

`ActorCriticAlgorithm` owns the `env` and `model` sections and the return
target (`trainer.target_return`, `target_window`): it describes the
environment once per process (`env_info`: rl.envs.info, which builds and
resets the one environment the main process builds), builds the model from
that description (the built-in `ActorCritic`, image observations through
the A3C paper's two convolutions or the Nature CNN's three first
(`model.conv`), or a `model.factory`'s network: `rl.model_factory`,
docs/models.md), hands the description to every process of the run
(`build_shared`: `ActorCriticShared`), evaluates and records the model
greedily (`rl.evaluation`) and acts with it (`rl.actor`). A subclass (A3C;
IMPALA and APPO through `rl.actor_learner`) adds its name, its `algorithm`
keys (ROLLOUT_SCHEMA's among them) and `run_worker`, whose model is
`worker_model(ctx)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from framework import nn
from framework.runtime import user_code
from framework.runtime.algorithm import (DEFAULT_WINDOW, MLP_SCHEMA, Algorithm, Config, Evaluation,
                                         EvaluationBounds, FrameSink, WorkerContext)
from framework.runtime.schema import ConfigError, Field
from framework.rl import evaluation, model_factory
from framework.rl.actor import Actor
from framework.rl.envs.atari import ATARI_ID
from framework.rl.envs.ids import env_id_problem
from framework.rl.envs.info import EnvInfo, env_info
from framework.rl.model import CONVOLUTIONS, ActorCritic, ActorCriticBase, conv_output_sides
from framework.rl.normalization import Normalization
from framework.rl.spaces import ObservationLayout
from framework.rl.trajectories import TrajectoryBuffer

ROLLOUT_SCHEMA: dict[str, Field] = {
    "gamma": Field("float", 0.99, low=0.0, high=1.0, doc="discount"),
    "n_steps": Field("int", 20, low=1, high=100_000, doc="steps of each env per rollout (and per update)"),
}
"""`algorithm` keys a `RolloutWorker` reads: the discount and the steps of each env per rollout."""

SECTIONS: dict[str, Any] = {
    "env": {
        "id": Field("str", "CartPole-v1", check=env_id_problem,
                    doc="a registered gymnasium id (any ALE game id gets the Atari preprocessing), `module:EnvId` "
                        "(imports `module`, which registers the id) or `module:Factory` (an Env subclass or a "
                        "callable returning an Env; `env.kwargs` go to it); see [environments.md](environments.md)"),
        "kwargs": Field("mapping", {}, doc="keyword arguments for `gym.make` (or the factory)"),
        "envs_per_worker": Field("int", 4, low=1, high=4096,
                                 doc="environments each worker steps in a batch (as one vector env where the id "
                                     "registers one that resets in the same step, e.g. Atari's AtariVectorEnv, or "
                                     "CartPole's CartPoleVectorEnv in hogshare's same-step version; else a loop of "
                                     "envs)"),
        "vectorize": Field("bool", True,
                           doc="`false` steps the batch as a loop of envs even where a vector env would serve "
                               "(CartPole's steps the same episodes as the loop, to the bit; Atari's differ in its "
                               "no-op counts)"),
        "normalize_obs": Field("bool", False,
                               doc="standardise observations with running statistics shared by all workers, clipped "
                                   "to ±`clip_obs` (as Stable-Baselines3's VecNormalize; not for image "
                                   "observations)"),
        "clip_obs": Field("float", 10.0, low=0.0, low_open=True,
                          doc="with `normalize_obs`, the bound of standardised observations"),
        "normalize_reward": Field("bool", False,
                                  doc="divide rewards by the running std of the discounted return, clipped to "
                                      "±`clip_reward`; episode returns are still reported in the env's units"),
        "clip_reward": Field("float", 10.0, low=0.0, low_open=True,
                             doc="with `normalize_reward`, the bound of normalised rewards"),
        "sign_reward": Field("bool", False,
                             doc="learn from the sign of each reward (-1, 0, 1), as the DQN, A3C and IMPALA papers "
                                 "clip Atari's (before `normalize_reward` when both are on); episode returns still "
                                 "count the env's own rewards"),
        "life_loss_done": Field("bool", False,
                                doc="learn as if the loss of a life ended the episode (no bootstrapping across it; an "
                                    "LSTM's state starts again), as Stable-Baselines3's AtariWrapper does, while the "
                                    "game goes on: episodes, their returns and evaluation stay whole games. Needs an "
                                    "env whose step info reports `lives` (ALE games do); one that does not is "
                                    "refused at its first step"),
    },
    "model": {**MLP_SCHEMA,
              "lstm": Field("bool", False, doc="an LSTM cell after the body"),
              "shared_body": Field("bool", True,
                                   doc="`false`: the value head gets a body of its own (same layers, trained apart "
                                       "from the policy's; not with an LSTM)"),
              "conv": Field("str", "a3c", choices=tuple(CONVOLUTIONS),
                            doc="the convolutions image observations go through first: `a3c` (the A3C paper's "
                                "16x8x8/4, 32x4x4/2; images of at least 20x20) or `nature` (the DQN Nature paper's "
                                "32x8x8/4, 64x4x4/2, 64x3x3/1, which PPO's Atari results use with `hidden: [512]`; "
                                "at least 36x36)"),
              "orthogonal_init": Field("bool", False,
                                       doc="`true`: orthogonal weights as OpenAI Baselines and Stable-Baselines3 "
                                           "initialise them (gain sqrt(2) in the bodies, 0.01 in the policy head, 1 "
                                           "in the value head), zero biases; `false`: PyTorch's initialisation"),
              "log_std_init": Field("float", 0.0, low=-20.0, high=2.0,
                                    doc="initial log standard deviation of continuous actions (a learned "
                                        "parameter)"),
              "sde": Field("bool", False,
                           doc="`true`: continuous actions explore with generalized state-dependent noise (gSDE, "
                               "Stable-Baselines3's `use_sde`): the noise is the policy's last features times an "
                               "exploration matrix per env, drawn every `sde_sample_freq` steps, with a learned "
                               "(features x dimensions) log std; for Box actions and the built-in model"),
              "sde_sample_freq": Field("int", -1, low=-1, high=100_000,
                                       check=lambda v: "0 is not a frequency" if v == 0 else None,
                                       doc="with `sde`, env steps between draws of the exploration matrices; "
                                           "-1: one draw per rollout (Stable-Baselines3's default)"),
              "factory": Field("str", None, nullable=True, check=lambda v: user_code.spec_problem(v, "function"),
                               doc="`module:function` building your own network from the spaces (see "
                                   "[models.md](models.md)); `null`: the built-in one"),
              "kwargs": Field("mapping", {}, doc="options passed to `model.factory`")},
    "trainer": {
        "target_return": Field("float", 475.0, nullable=True,
                               doc="stop once the mean of the last `target_window` episode returns reaches it "
                                   "(`null`: never)"),
        "target_window": Field("int", DEFAULT_WINDOW, low=1, high=100_000,
                               doc="episodes in the window of recent returns that is logged, reported and compared "
                                   "with `target_return`"),
    },
}
"""The config sections of an actor-critic plugin: its environment, its model, its return target."""


@dataclass(frozen=True)
class ActorCriticShared:
    """What every process of an actor-critic run gets as ctx.shared, made once by `build_shared` where the
    processes are started: the description of the environment (rl.envs.info), and an actor-learner run's
    trajectory buffer (None for A3C)."""

    env: EnvInfo
    buffer: TrajectoryBuffer | None = None


def _conv_layers(config: Config, layout: ObservationLayout) -> tuple[tuple[int, int, int], ...]:
    """model.conv's convolutions for observations with an image, none for others; ConfigError when the images
    are too small for them."""
    if layout.image_shape is None:
        return ()
    conv = CONVOLUTIONS[config["model"]["conv"]]
    if min(conv_output_sides(layout.image_shape[1:], conv)) < 1:
        side = 1
        while min(conv_output_sides((side, side), conv)) < 1:
            side += 1
        raise ConfigError(f"config key 'env.id': got {config['env']['id']!r} with images of shape "
                          f"{layout.image_shape}; allowed: (channels, height, width) images of at least "
                          f"{side}x{side} for the convolutions of model.conv: {config['model']['conv']} (or "
                          f"gymnasium.wrappers.ResizeObservation)")
    return conv


class ActorCriticAlgorithm(Algorithm):
    """The part of an actor-critic plugin that is not its loss: environment, model, evaluation, acting."""

    sections = SECTIONS

    def default_experiment(self, config: Config) -> str:
        """<name>-<env id>, e.g. a3c-cartpole-v1 (a factory's `module:Name` becomes module-name; hogshare/Atari-v0
        is named after its game: impala-ale-breakout-v5)."""
        env = config["env"]
        game = env["kwargs"].get("game") if env["id"] == ATARI_ID else None
        return f"{self.name}-{game if isinstance(game, str) else env['id']}"

    def window(self, config: Config) -> int:
        return config["trainer"]["target_window"]

    def target_return(self, config: Config) -> float | None:
        return config["trainer"]["target_return"]

    def env_info(self, config: Config) -> EnvInfo:
        """The description of config's environment, made once in this process (rl.envs.info.env_info)."""
        return env_info(config)

    def check_config(self, config: Config) -> None:
        """The environment must build (with env.kwargs), reset once and have spaces the model reads (images of at
        least 20x20); a separate value body needs no LSTM, env.normalize_obs observations that are not uint8 images; a
        model.factory's model must have the members of ActorCriticBase (checked on one forward pass)."""
        env = self.env_info(config)
        layout = env.layout
        _conv_layers(config, layout)
        if not config["model"]["shared_body"] and config["model"]["lstm"]:
            raise ConfigError("config key 'model.shared_body': got false with model.lstm true; allowed: true with "
                              "an LSTM (the policy and the value share the LSTM's state)")
        if config["model"]["sde"] and (not env.action_head.continuous or config["model"]["factory"] is not None):
            got = "a model.factory" if env.action_head.continuous else f"the actions {env.action_head.space}"
            raise ConfigError(f"config key 'model.sde': got true with {got}; allowed: true for Box actions and "
                              f"the built-in model (a model.factory's model explores as it is written)")
        if layout.dtype == np.uint8 and env.normalize_obs:
            raise ConfigError(f"config key 'env.normalize_obs': got true for {env.id!r}, whose "
                              f"observations are uint8 images (read as [0, 1] by the first convolution); "
                              f"allowed: false for image observations")
        spec = config["model"]["factory"]
        if spec is not None:
            model_factory.check_model(spec, self.model_for(config, env), env)

    def build_model(self, config: Config) -> ActorCriticBase:
        return self.model_for(config, self.env_info(config))

    def model_for(self, config: Config, env: EnvInfo) -> ActorCriticBase:
        """The model.factory's model for the described environment, or the built-in ActorCritic."""
        m, layout, head = config["model"], env.layout, env.action_head
        if m["factory"] is not None:
            return model_factory.add_statistics(model_factory.build(m["factory"], layout, head.space, m), env)
        packed = layout.image_shape is not None and layout.vector_size > 0
        return ActorCritic(layout.shape, m["hidden"], m["activation"], m["lstm"], head.size, head.continuous,
                           _conv_layers(config, layout), uint8_frames=layout.dtype == np.uint8,
                           normalize_obs=env.normalize_obs, normalize_returns=env.normalize_reward,
                           shared_body=m["shared_body"], log_std_init=m["log_std_init"],
                           image_shape=layout.image_shape if packed else None, orthogonal_init=m["orthogonal_init"],
                           sde=m["sde"])

    def worker_model(self, ctx: WorkerContext) -> ActorCriticBase:
        """A worker process's local model, from the description of the environment it received (ctx.shared)."""
        return self.model_for(ctx.config, ctx.shared.env)

    def build_shared(self, config: Config, context: Any, ranks: range) -> ActorCriticShared:
        """The environment's description, for every process of the run."""
        return ActorCriticShared(self.env_info(config))

    def evaluate(self, model: nn.Module, config: Config, episodes: int, seed: int) -> Evaluation:
        """Greedy episodes, one per environment of a batch (`rl.evaluation.evaluate`)."""
        return evaluation.evaluate(model, self.env_info(config), EvaluationBounds.of(config), episodes, seed)

    def record(self, model: nn.Module, config: Config, episodes: int, seed: int, frames: FrameSink) -> Evaluation:
        """evaluate's episodes, one at a time, rendered (`rl.evaluation.record`)."""
        return evaluation.record(model, self.env_info(config), EvaluationBounds.of(config), episodes, seed, frames)

    def actor(self, model: nn.Module, config: Config) -> Actor:
        """The model acting in config's environment, as evaluation and the workers act (rl.actor)."""
        return Actor(model, self.env_info(config))

    def scalars(self, model: nn.Module, config: Config) -> dict[str, float]:
        """The normalisation statistics, when the model has any (see rl.normalization)."""
        normalization = Normalization.for_model(model, self.env_info(config))
        return {} if normalization is None else normalization.scalars()
