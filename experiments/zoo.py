"""hogshare's shipped configs on the tasks rl-baselines3-zoo reports, against its published A2C and PPO figures.

Each row trains the task's shipped config for rl-zoo's budget of env steps, one seed at a time, then scores the
final policy as rl-zoo does: the mean return of evaluation episodes (10, greedy, as `evaluate` plays them) for
MuJoCo and Box2D; for Atari, whose rl-zoo figures come from sampled actions, the mean of the last 100 training
episodes (sampled actions of the policy of the run's last minutes). Results accumulate in
experiments/results/zoo.json, one entry per task, so rows can be measured on different days; zoo.md and
zoo_<task>.png (mean return of the last 100 episodes against env steps, rl-zoo's final A2C and PPO figures as
lines) are rewritten from every row measured so far.

--speed-seconds S times the speed columns, one after the other, each alone on the machine for S seconds: the
task's config (its steady env steps/s, logged past its first SPEED_WARMUP_S seconds), and Stable-Baselines3's
A2C and PPO with rl-zoo's hyperparameters (in the interpreter HOGSHARE_SB3_PYTHON names, default
/tmp/sb3/bin/python: a venv with `stable-baselines3[extra] rl_zoo3 gymnasium[mujoco,box2d]`, see
../shared/baselines/README.md). The learning runs' own rate is shown beside it: it counts whatever else the
machine ran meanwhile. --speed-only times a measured row without training it again.

usage: python -m experiments.zoo --task halfcheetah [--seeds 3] [--first-seed 0] [--max-seconds S]
           [--speed-seconds 60 [--speed-only]] [--set KEY=VALUE ...]
       python -m experiments.zoo --task pong --score RUN_DIR [RUN_DIR ...] [--add]   (runs trained, or resumed, by hand)
       python -m experiments.zoo --write     (only rewrite zoo.md and the plots from zoo.json)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiments.common import (REPO, RESULTS, load, machine_line, markdown_table, steady_mean, train_run,
                                window_events)

SB3_PYTHON = os.environ.get("HOGSHARE_SB3_PYTHON", "/tmp/sb3/bin/python")
RUNS = REPO / "runs" / "zoo"
"""Where each seed's run directory is kept (one folder per run; runs/ is not tracked)."""
EVAL_EPISODES = 10
SPEED_WARMUP_S = 10.0
CURVE_POINTS = 200
SESSION_GAP_S = 60.0
"""Logged intervals further apart than this belong to two sessions of a run (it was stopped, then resumed)."""


@dataclass(frozen=True)
class Task:
    name: str
    env_id: str           # as hogshare trains it
    zoo_env: str          # as rl-zoo reports it
    config: str
    budget: int           # env steps (rl-zoo's n_timesteps)
    a2c: float | None     # rl-zoo's published mean return, None where it has no A2C row
    ppo: float
    seeds: int
    needs: str            # the module of the extra the task needs
    atari: bool = False
    goal: float | None = None  # the mean a row must reach where rl-zoo's PPO figure is the game's ceiling

    @property
    def target(self) -> float:
        """The mean over seeds a row must reach: its goal, else rl-zoo's PPO figure."""
        return self.ppo if self.goal is None else self.goal


TASKS = {t.name: t for t in (
    Task("halfcheetah", "HalfCheetah-v5", "HalfCheetah-v3", "appo_halfcheetah.yaml", 1_000_000, 3041, 5819, 3,
         "mujoco"),
    Task("hopper", "Hopper-v5", "Hopper-v3", "appo_hopper.yaml", 1_000_000, 733, 2410, 3, "mujoco"),
    Task("walker2d", "Walker2d-v5", "Walker2d-v3", "appo_walker2d.yaml", 1_000_000, None, 3479, 3, "mujoco"),
    Task("bipedalwalker", "BipedalWalker-v3", "BipedalWalker-v3", "appo_bipedalwalker.yaml", 5_000_000, 300, 213, 3,
         "Box2D"),
    Task("pong", "hogshare/Atari-v0 (pong)", "PongNoFrameskip-v4", "appo_pong.yaml", 10_000_000, 17.3, 21.0, 2,
         "ale_py", atari=True, goal=20.0),
    Task("breakout", "hogshare/Atari-v0 (breakout)", "BreakoutNoFrameskip-v4", "appo_breakout.yaml", 10_000_000,
         280, 398, 2, "ale_py", atari=True),
)}
EXTRAS = {"mujoco": "mujoco", "Box2D": "box2d", "ale_py": "atari"}
A3C_MUJOCO = ("A3C's MuJoCo configs came first (`a3c_{task}.yaml`: 2 workers of 2 envs, 5-step rollouts, Adam "
              "7e-4, 64-64 tanh bodies apart, observations and rewards normalised; 100,000 updates in the budget): "
              "3 seeds on 2026-12-02 scored {a3c}, below rl-zoo's figure. ")
TRIED = {
    "halfcheetah": A3C_MUJOCO.format(task="halfcheetah", a3c="1,299 ± 1,139 (seeds split between a gait that "
                                     "runs, about 2,900, and ones that settle at 300-1,000)")
                   + "Before those settings, on seed 0: 8 envs x 8 steps with a shared body -407, the same with "
                   "separate bodies 1,120, Adam decaying to 0 562 ± 806, rl-zoo's A2C settings as they are (1 env "
                   "per worker, 5 steps, RMSprop 7e-4) 360, orthogonal initialisation 817 ± 1,020. APPO with "
                   "rl-zoo's PPO settings for the task as far as an asynchronous learner took them (10 epochs of "
                   "64-sample minibatches at Adam 1e-4, the actors never waiting for an update) scored 5,381, 4,318 "
                   "and 3,611 (4,437 ± 728, 2026-12-04): PPO's epochs over each batch get more from the budget's env "
                   "steps than A3C's one update, but a learner slower than the actors took each trajectory about 2.5 "
                   "batches after it was acted (see Walker2d). ppo.yml's own settings came next (2026-12-06), 20 "
                   "epochs at Adam 2.06e-5, with the actors and the learner taking turns (`algorithm.synchronous`): "
                   "5,019, 5,149 and 4,475 (4,881 ± 292), every seed above rl-zoo's A2C figure, the mean 84% of its "
                   "PPO figure, the seeds' spread down from 728 to 292; they ran at once beside the Walker2d row's "
                   "(6 runs on 2 cores). rl-zoo's own layout taking turns (one actor of one env, 512-step rollouts, "
                   "8 minibatches of 64 each batch; 2026-12-06, seeds 0-2 at once) scored 3,430, 6,700 and 5,190 "
                   "(5,107 ± 1,340): one seed above rl-zoo's PPO figure, the mean within that config's spread, seed "
                   "0's greedy episodes split between running and flipping over (± 2,090 over its 10); the shipped "
                   "layout of 16 envs keeps the seeds closer. Stable-Baselines3 2.9.2's PPO itself with rl-zoo's "
                   "settings (ppo.yml's HalfCheetah-v4 entry) on HalfCheetah-v5, on this machine "
                   "(`experiments.sb3_score --algo ppo HalfCheetah-v5 1e6 --seed N`; 2026-12-06, seeds 0 and 1 at "
                   "once, 34 minutes each), scored 6,941 and 5,023 greedy (4,727 and 4,190 over their last 100 "
                   "training episodes, where that config's seeds stand at 4,380 to 4,817): as spread as hogshare in "
                   "rl-zoo's one-env layout, and above that config's mean by more than its training returns are. "
                   "That config with generalized state-dependent exploration (`model.sde`, a new exploration matrix "
                   "every 4 steps as rl-zoo's PPO on PyBullet's HalfCheetah has it; 2026-12-06, seed 0) scored 2,690 "
                   "against its 5,019 on that seed: its noise, the sum over 256 ReLU features, grew (entropy from "
                   "2.3 to 5.5 within 240 k steps, 3.8 at 1 M) and its training return was 1,934 at 1 M steps. The "
                   "row (2026-12-07) is that config with Adam at 4.12e-5, twice ppo.yml's lr: 5,298, 5,054 and 5,320 "
                   "(5,224 ± 121), every seed above that config's mean, its training returns ahead of that config's "
                   "from the first 100 k steps (3,190-3,470 at 275 k, 4,660-5,110 at 1 M) while the policy's std "
                   "shrank (entropy from -3.5 to -9.3 to -9.5) and its updates clipped 0.47-0.74 of each batch "
                   "(approximate KL 0.012-0.08); its 3 seeds ran at once beside the 3 of a BipedalWalker trial. At 4 "
                   "times ppo.yml's lr (Adam 8.24e-5; 2026-12-07, seeds 0-2 at once) the training returns rose no "
                   "faster, one seed's fell from 3,800 to 2,000 at 0.93 M steps, and the seeds scored 3,226, 2,967 "
                   "and 4,492 (3,562 ± 666). From that lr decaying linearly to 0 (2026-12-07, seeds 0-2 at once beside "
                   "3 BipedalWalker runs) they scored 6,654, 3,974 and 4,476 (5,034 ± 1,160): seed 0 above rl-zoo's "
                   "PPO figure (training return 5,560 at 1 M steps) after its training return fell from 2,400 to "
                   "540 at 0.27 M, seed 2's falling from 4,370 to 3,690 in the last 0.2 M. At 3 times "
                   "ppo.yml's lr, constant (Adam 6.18e-5; 2026-12-07, likewise), they scored 4,581, 4,614 and 5,265 "
                   "(4,820 ± 315), training returns 3,970-4,750 at 1 M; decaying from there to 0 (2026-12-08, seeds "
                   "0-2 at once beside 3 BipedalWalker runs) 3,937, 4,706 and 5,460 (4,701 ± 622).",
    "hopper": A3C_MUJOCO.format(task="hopper", a3c="445 ± 56")
              + "APPO then, seed 0: with first settings of its own (Adam 3e-4, 10 epochs, gamma 0.99, GAE(0.95), "
              "clip 0.2) its training return reached 740 at 300 k steps and fell back to about 250; with rl-zoo's PPO "
              "settings for Hopper (Adam 1e-4, 5 epochs, gamma 0.999, GAE(0.99): the shipped config) it scored "
              "1,010 in a trial run; with those at gamma 0.99, GAE(0.95), 10 epochs and no entropy bonus it reached "
              "870 at 155 k steps and fell back to 300-420 by 700 k. The shipped config's score is a policy that "
              "keeps its balance for the whole 1,000 steps and hardly moves (two greedy episodes of the trial run: "
              "returns 1,015 and 1,016, of which 15 and 16 for moving forward; Hopper pays 1 a step for staying "
              "up): it meets rl-zoo's A2C figure without hopping, where rl-zoo's PPO (2,410) hops. Synchronous, "
              "the actors waiting for each update as PPO's collection does (`algorithm.synchronous`, sample-factory's "
              "MuJoCo setting; 2026-12-06, seed 0), it stood as well: 1,020 greedy after 1 M steps with the shipped "
              "layout and rl-zoo's 32-sample minibatches (160 updates per 1,024 samples, as rl-zoo's 80 per 512), "
              "1,020 after 0.92 M with rl-zoo's own layout (one env per actor, 512-step rollouts). Stable-Baselines3 "
              "2.9.2's PPO itself, with rl-zoo's Hopper settings (ppo.yml's Hopper-v4 entry) on Hopper-v5, seed 0, on "
              "this machine (`experiments.sb3_score --algo ppo Hopper-v5 1e6 --seed 0`), scored 997 ± 4 over 10 "
              "greedy episodes after 1 M steps (857 over its last 100 training episodes): it stands too, rl-zoo's "
              "settings fall short on this version of the env. The row (2026-12-06) is PPO's settings as cleanrl's "
              "ppo_continuous_action.py has them for MuJoCo: Stable-Baselines3's default policy (64-64 tanh bodies "
              "apart, orthogonal initialisation, log std from 0), gamma 0.99, GAE(0.95), clip 0.2 for the policy and "
              "the value, 10 epochs of 64-sample minibatches over each 2,048-step trajectory of one env, Adam 3e-4 "
              "decaying linearly to 0, the actor and the learner taking turns: every seed hops, above rl-zoo's PPO "
              "figure (training return above 1,800 by 400 k steps; clip fraction 0.08-0.16, approximate KL "
              "0.006-0.012). Its 3 seeds ran at once beside the BipedalWalker trial's 3 (6 runs on 2 cores).",
    "pong": "The row (2026-12-07) is APPO with PPO's Atari settings as cleanrl's ppo_atari.py has them "
            "(`appo_pong.yaml`: 2 actors of 8 games writing 128-step trajectories, 4 epochs of 4 minibatches of 256 "
            "samples over each, Adam 2.5e-4 decaying linearly to 0, clip 0.1 for the policy and the value, orthogonal"
            " initialisation, the A3C paper's network) with 2 learners, each taking a trajectory and updating the "
            "shared model lock-free, as Hogwild workers: with one, the learner was the slower side and a run stepped "
            "723 env steps/s on these 2 cores, with 2 about 1,020. On seed 0 (trained as appo_pong.yaml was before, "
            "with `--set algorithm.learners=2`, the value it now ships), alone on the machine apart from short tests,"
            " its mean return passed -15 at 1.19 M env steps (19 minutes), 0 at 1.81 M (29), rl-zoo's A2C figure at "
            "2.04 M (33), 19 at 2.15 M (35) and 20 at 2.64 M (44); it scored 20.9 at 10 M (165 minutes, 1,010 env "
            "steps/s), its best mean 21.0 at 9.8 M. Seed 1 (2026-12-07, the shipped config, alone apart from short "
            "tests) learned more slowly: -15 at 1.16 M (19), 0 at 2.07 M (34), rl-zoo's A2C figure at 4.18 M (69), "
            "18 at 4.81 M (80), 19 at 5.78 M (96), 20 at 7.71 M (128); it scored 19.9 at 10 M. Pong at 20 within 30 "
            "minutes on these cores is not reached: seed 0's 44 minutes is the best. Half the learning per sample (2 "
            "epochs of 8 minibatches of 128; seed 0, 2026-12-07, alone) stepped 1,519 env steps/s instead of 1,010 "
            "but learned less per step: -15 at 1.45 M (16 minutes), 0 at 2.57 M (28), 10 at 3.09 M (34) and 15.4 "
            "at 3.65 M, when it stopped at 40 minutes. Before it"
            " the row was IMPALA's (`impala_pong.yaml`, 2 seeds): 17.8 and 18.7 (18.2 ± 0.5), rl-zoo's A2C figure "
            "reached at 119 and 91 minutes (after about 6.3 M env steps each), 20 never. IMPALA rather than A3C: on 2"
            " cores its Pong config reached 18 in 51 minutes (5.9 M env steps) where A3C's was at 5.6 after 65 "
            "(experiments/results/actor_learner.md). Runs before IMPALA's shipped config, all seed 0: with torch's "
            "RMSprop (that 51-minute config) a run lost every unit of its first convolution (all below zero for every"
            " frame) and played at random for 4.3 M env steps, when it was stopped; with RMSprop in TensorFlow's form"
            " (`rmsprop_tf_like`) and the lr decaying to 0 over the 10 M steps, the mean return rose from -21 to -10 "
            "by 4 M steps, then only to 3.4 at 10 M (2.2 hours, the cores shared with the MuJoCo rows; `--set "
            "optimizer.lr_decay=linear`). IMPALA's row was its shipped config, which keeps the lr constant as "
            "rl-zoo's A2C on Atari does, on seed 0: its first 5.17 M env steps shared the cores with other work "
            "(400-2,000 env steps/s; -20 at 1.6 M, -7 at 4.0 M, 4.4 at 5.17 M), it was stopped and continued with "
            "`train --resume` alone at about 1,850 env steps/s (17 at 6.3 M, 18.5 at 7.4 M, 19.0 at 9.6 M): above "
            "rl-zoo's A2C figure, 3.2 points short of its PPO's. IMPALA's seed 1 (2026-12-06) ran once "
            "through, with the code after the design pass and the ray backend's merge, beside other work for about "
            "half of its 125 minutes (a Hopper trial, a Stable-Baselines3 reference run and the test suites; "
            "530-2,100 env steps/s): -12 at 3.4 M, 11.7 at 5.2 M, 17.5 at 6.5 M, 18.7 at 10 M. Both seeds were above "
            "rl-zoo's A2C figure; their mean was 2.8 points short of its PPO's. APPO's first Pong config (A2C's "
            "RMSprop, 4 updates of every 80-sample batch) did not learn in 65 minutes: docs/actor-learner.md says why.",
    "breakout": "IMPALA's Pong config with the game changed, and the learning signals of rl-zoo's AtariWrapper: "
                "rewards' signs and a lost life as the end of the learner's episode (`env.sign_reward`, "
                "`env.life_loss_done`); its returns are whole games in points, as rl-zoo's. As first measured, on "
                "seed 0, it missed rl-zoo's A2C figure by 2 points (0.7%), its mean return still climbing at the end "
                "of the budget (200 at 9.6 M steps, 278 over the last 100 games at 10 M); the run shared the 2 cores "
                "with the MuJoCo and BipedalWalker rows and the test suite for its first 80 minutes of 140. Seed 1 "
                "(2026-12-06, the same config, alone apart from short tests in its first 20 minutes and two test "
                "suites later) scored 245, also still climbing (119 at 7.4 M, 188 at 9.3 M): the row's mean is 66% "
                "of rl-zoo's PPO figure and both seeds are below its A2C one. Both curves suggest a longer budget, "
                "not a plateau; rl-zoo's PPO gets more from the same budget with its epochs over each batch. The row "
                "(2026-12-07) is APPO (hogshare's PPO) with PPO's Atari settings, Pong's APPO config with the game "
                "changed (`appo_breakout.yaml`), each seed run alone apart from short tests in its first minutes and "
                "stopped and continued with `train --resume` (seed 0 in 3 sessions, seed 1 in 2): seed 0 passed 100 "
                "at 4.47 M env steps, 200 at 5.98 M and rl-zoo's A2C figure at 7.37 M, seed 1 100 at 4.59 M, 200 at "
                "6.35 M and 280 at 7.74 M, and they scored 335.7 and 341.0 (both above rl-zoo's A2C figure, which "
                "IMPALA's seeds never reached; the mean 85% of its PPO figure), still climbing: 300 at 7.81 M and "
                "8.40 M, 326-348 and 341-363 over the last 0.4 M (926 and 893 env steps/s over their sessions).",
    "bipedalwalker": "A3C with rl-zoo's A2C settings for the task came first (`a3c_bipedalwalker.yaml`: 16 envs as 2 "
                     "workers of 8, 8-step rollouts, GAE 0.9, RMSprop 9.6e-4 decaying to 0, log std from -2, "
                     "observations and rewards normalised): 3 seeds on 2026-12-04 scored 107 ± 131 (276, -45, 88): "
                     "seed 0 found a gait after 3 M steps, seed 2 only in the last 0.5 M, seed 1 never left the -120 "
                     "to -50 of a walker that stumbles or stands. APPO with rl-zoo's PPO settings for the task as far "
                     "as an asynchronous learner takes them, the lr constant as rl-zoo's (2026-12-06): every seed "
                     "walked within 1.7 M steps (training return above 200) and then lost it and found it again by "
                     "turns, 187, 141 and -30 greedy at 5 M (99 ± 90). With the lr decaying linearly to 0 over the "
                     "budget (the asynchronous config) the 3 seeds scored 238, 224 and 267 (243 ± 18): every seed "
                     "above rl-zoo's PPO figure, within 4-8 minutes, none at its A2C figure; seed 2 went from -30 to "
                     "267. The same seed with PPO's turns (`algorithm.synchronous`, 4 trajectories of 512 samples a "
                     "batch) learned more slowly (210 at 3.1 M, when it was stopped). With Stable-Baselines3's "
                     "orthogonal initialisation (`model.orthogonal_init`; 2026-12-06, seeds 0-2 at once) it scored "
                     "200, 176 and 145 (174 ± 23): its updates clipped more of each batch (0.6-0.74 against 0.4-0.5 "
                     "from 2 M steps on) and no seed kept a gait as well. Hopper's recipe (cleanrl's settings: taking "
                     "turns, gamma 0.99, clip 0.2 for the policy and the value, orthogonal initialisation; 2 actors x "
                     "8 envs x 128 steps a batch, 10 epochs of 32 minibatches, Adam 3e-4 decaying) scored 275 on seed "
                     "0, its training return at 278 from 1.7 M steps on; on seeds 1 and 2 (2026-12-06, at once) the "
                     "policy's std kept shrinking (entropy -8 to -9 by 3.3 M steps), its updates clipped 0.62-0.68 of "
                     "each batch at an approximate KL of 0.14-0.26, and both lost their gait (training return 223 and "
                     "277 at 0.75 M, 55-102 and -27 to 1 from 2.2 M on; stopped at 3.3 M). That recipe with the epochs "
                     "stopped at a KL of 0.02 from the batch's start (`algorithm.target_kl`, Stable-Baselines3's rule; "
                     "1,157-1,523 of the 2,441 batches stopped early; the row before, 2026-12-06): clip fraction "
                     "0.16-0.21 and approximate KL 0.011-0.015 until the decaying lr brings them down, the std still "
                     "large at 2.2 M steps (entropy 1.5-2.6), and every seed above the asynchronous config on the same "
                     "seed: 300, 274 and 301 (291 ± 13). Each policy walked its greedy episodes at 297-311 (seed 1's "
                     "fastest, in about 680 steps); what the 10 scored episodes counted besides was a fall: one of "
                     "seed 1's (274), and on `evaluate_policy`'s episodes (seeds 12345-12354) one of seed 0's and a "
                     "stumble of seed 2's instead (264, 309 and 277). Its 3 seeds ran at once (about 1,400 env steps/s "
                     "each). hogshare has rl-zoo's A2C exploration since, generalized state-dependent exploration "
                     "(a2c.yml's `use_sde`, `model.sde`; 2026-12-06): rl-zoo's A2C settings with it, as A2C runs them "
                     "(one worker of 16 envs, one update per 128 samples: `a3c_bipedalwalker.yaml` now), scored 317, "
                     "270 and 71 (219 ± 103; seeds 0 and 1 at once, seed 2 beside other runs): seed 0's policy walked "
                     "every greedy episode to the end (317 ± 0.9, no fall), seed 1 was still climbing (training return "
                     "234 at 5 M steps), seed 2 found its gait only after 4 M; seeds 3 and 4 scored 256 and 208. "
                     "Stable-Baselines3 2.9.2's A2C itself with those settings (`experiments.sb3_score --algo a2c "
                     "BipedalWalker-v3 5e6 --seed N`, this machine) scored 315, 321 and 3 on seeds 0-2 (213 ± 150; "
                     "seed 2's training return 0.3 at 5 M): as spread. As 2 asynchronous workers of 8 envs with it, "
                     "seed 0 scored 250 (276 without it), and the KL-stopped config with it (log std from -2) 280 on "
                     "seed 0 against its 300 without: the exploration lifted A2C's settings (from 107 ± 131), not "
                     "PPO's. With ppo.yml's gamma of 0.999 for 0.99 in the KL-stopped config, a horizon over which a "
                     "fall costs the rest of the course (2026-12-07, seeds 0-2 at once beside 3 HalfCheetah runs), it "
                     "scored 215, 266 and 255 (245 ± 22), its training return 235-256 at 5 M steps (that config's "
                     "about 270-290). The row before (2026-12-07) was the KL-stopped config with 16 envs per actor for "
                     "8, batches of 4,096 samples in 64 minibatches of 64 (the same updates per sample; 507-605 of the "
                     "1,221 batches stopped early, clip fraction 0.10-0.19 and approximate KL 0.007-0.013 from 2 M to "
                     "4 M steps, entropy 2.6-4.6 there): 304, 292 and 300 (299 ± 5), every greedy episode of the 30 "
                     "walked to the end (± 1.1-1.2 over each seed's 10), seed 1's gait the slowest; the mean is 1 "
                     "short of rl-zoo's A2C figure, seed 1 8. Its 3 seeds ran at once beside 3 HalfCheetah runs (6 "
                     "runs on 2 cores, about 1,360 env steps/s each). With 32 envs per actor (batches of 8,192 "
                     "samples, 128 minibatches; 2026-12-07, likewise) it scored 271, 292 and 298 (287 ± 12): seed 0's "
                     "greedy episodes counted a fall (± 53 over its 10), the other two walked each to the end. Seed "
                     "1's greedy gait of that config is not slower (750-766 steps against 722-783) but pays more for "
                     "torque (70.5-71.4 of its return against 57-66): its policy's std grew back toward 1 (entropy 5.3 "
                     "at 5 M steps, seed 0's 3.4), a noise under which the mean's own torque costs little. With the "
                     "log std from -1 (2026-12-08) the std collapsed (entropy -3 by 1.8 M steps) and no seed walked "
                     "(training return 75-85, stopped at 1.8 M); with GAE(0.98) (log std from 0) the seeds scored 277, "
                     "237 and 287 (267 ± 21). The row (2026-12-08) is the 16-env config with the log std from -0.5: "
                     "every seed walked within 0.6 M steps (training return 265-276), the entropy stayed at 0.8-2.4, "
                     "and the seeds scored 301, 310 and 304 (305 ± 4), each above rl-zoo's A2C figure, in 38 minutes "
                     "each (3 runs at once on 2 cores); their greedy gaits paid 53-62 for torque.",
    "walker2d": A3C_MUJOCO.format(task="walker2d", a3c="586 ± 102")
                + "rl-zoo has no A2C row for it: the row is against its PPO figure. APPO with settings first taken "
                "for rl-zoo's (256-256 ReLU bodies apart, log std from -2, 10 epochs of 64-sample minibatches, Adam "
                "1e-4, asynchronous: HalfCheetah's and Hopper's policy, which ppo.yml's Walker2d entry does not use) "
                "scored 1,641, 2,084 and 2,996 (2,241 ± 564, 2026-12-04): a learner slower than the actors takes "
                "each trajectory about 2.5 batches after it was acted (a policy lag of 200 updates), and with a "
                "std of e^-2 those updates move the policy far enough that 0.63-0.70 of each batch's samples were "
                "clipped (Stable-Baselines3's PPO with rl-zoo's settings clips 0.10-0.20, its approximate KL "
                "0.003-0.005 against 0.04-0.12). Tried on seeds 0-2 (2026-12-06, three runs at once): 20 epochs "
                "(policy lag 400, clip fraction 0.8) 746, 555 and 525; PPO's turns (`algorithm.synchronous`, 1,024 "
                "samples a batch) 749, 2,910 and 304. The row is ppo.yml's own Walker2d settings: Stable-Baselines3's "
                "default policy (64-64 tanh bodies apart, orthogonal initialisation, log std from 0), 20 epochs of "
                "32-sample minibatches at Adam 5.05e-5, taking turns (clip fraction 0.19-0.23, approximate KL "
                "0.003-0.004); its 3 seeds ran at once beside the HalfCheetah trial (6 runs on 2 cores).",
}


def train(task: Task, seed: int, logdir: Path, max_seconds: float, overrides: list[str]) -> Path:
    """One training run of the task's config for its budget; its run directory."""
    sets = [f"seed={seed}", f"trainer.total_steps={task.budget}", f"trainer.max_seconds={max_seconds:g}",
            "trainer.target_return=null", "logging.progress=false", "logging.log_every_s=5", *overrides]
    try:
        return train_run(REPO / "configs" / task.config, sets, logdir, max_seconds + 600)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def evaluation(task: Task, run_dir: Path, summary: dict) -> tuple[float, str]:
    """The run's score as rl-zoo scores it, and how it was taken."""
    if task.atari:
        return summary["mean_return"], "last 100 training episodes (sampled actions)"
    from framework.train.policy import load_trained
    config, algorithm, model = load_trained(run_dir)
    result = algorithm.evaluate(model, config, EVAL_EPISODES, 12345)
    return result.metrics["return_mean"], f"{EVAL_EPISODES} greedy episodes"


def curve(run_dir: Path) -> list[tuple[int, float]]:
    """(env steps, mean return of the last 100 episodes), at most CURVE_POINTS of them."""
    events = window_events(run_dir)
    stride = max(1, len(events) // CURVE_POINTS)
    return [(e.step, e.value) for e in events[::stride]] + [(e.step, e.value) for e in events[-1:]]


def run_seed(task: Task, seed: int, max_seconds: float, overrides: list[str]) -> dict:
    """One seed trained and scored; its run directory stays under RUNS (TensorBoard: tensorboard --logdir runs/zoo)."""
    RUNS.mkdir(parents=True, exist_ok=True)
    run_dir = train(task, seed, Path(tempfile.mkdtemp(prefix=f"{task.name}-seed{seed}-", dir=RUNS)), max_seconds,
                    overrides)
    return scored(task, seed, run_dir)


def reached(task: Task, run_dir: Path) -> dict[str, float | None]:
    """The wall seconds at which the run's mean return of the last 100 training episodes first reached rl-zoo's A2C
    and PPO figures (None: never). Seconds count the run's own sessions: a gap of more than SESSION_GAP_S between
    two logged intervals is a pause between a run and its resume, and is left out."""
    events = window_events(run_dir)
    figures = {"a2c": task.a2c, "ppo": task.ppo}
    found: dict[str, float | None] = {name: None for name in figures}
    elapsed, last = 0.0, None
    for event in events:
        if last is not None and event.wall_time - last <= SESSION_GAP_S:
            elapsed += event.wall_time - last
        last = event.wall_time
        for name, figure in figures.items():
            if figure is not None and found[name] is None and event.value >= figure:
                found[name] = elapsed
    return found


def scored(task: Task, seed: int, run_dir: Path) -> dict:
    """A finished run of the task's config, scored: its entry in a row's runs."""
    summary = json.loads((run_dir / "summary.json").read_text())
    score, how = evaluation(task, run_dir, summary)
    sessions = len(list(run_dir.glob("events.out.tfevents.*")))  # a resume adds one event file
    where = run_dir.relative_to(REPO) if run_dir.is_relative_to(REPO) else run_dir
    result = {"seed": seed, "score": score, "scored_by": how, "env_steps": summary["env_steps"],
              "wall_seconds": summary["wall_seconds"], "steps_per_second": summary["steps_per_second"],
              "stop_reason": summary["stop_reason"], "curve": curve(run_dir), "run": str(where),
              "sessions": sessions, "reached": reached(task, run_dir)}
    print(f"{task.name} seed {seed}: {score:.1f} ({how}) after {result['env_steps']:,} env steps in "
          f"{result['wall_seconds']:.0f} s ({result['steps_per_second']:,.0f}/s, {result['stop_reason']})", flush=True)
    return result


def alone_speed(task: Task, seconds: float, overrides: list[str]) -> dict:
    """The task's config trained alone for `seconds`: its steady env steps/s."""
    with tempfile.TemporaryDirectory() as logdir:
        sets = [f"trainer.total_steps={task.budget}", f"trainer.max_seconds={seconds:g}", "trainer.target_return=null",
                "logging.progress=false", "logging.log_every_s=1", *overrides]
        run_dir = train_run(REPO / "configs" / task.config, sets, Path(logdir), seconds + 600)
        rate = steady_mean(run_dir, "perf/env_steps_per_s", SPEED_WARMUP_S)
    return {"seconds": seconds, "steps_per_second": rate, "load": load()}


def sb3_speed(task: Task, seconds: float, algo: str) -> dict:
    """Stable-Baselines3's `algo` (a2c or ppo, rl-zoo's hyperparameters) on the task for `seconds`: its env steps/s."""
    if not Path(SB3_PYTHON).exists():
        raise SystemExit(f"--speed-seconds: no interpreter at {SB3_PYTHON}; set HOGSHARE_SB3_PYTHON to a venv with "
                         f"stable-baselines3[extra] and rl_zoo3")
    done = subprocess.run([SB3_PYTHON, "-m", "experiments.sb3_speed", "--algo", algo,
                           task.zoo_env if task.atari else task.env_id, str(seconds)],
                          capture_output=True, text=True, timeout=seconds + 600, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"sb3_speed.py --algo {algo} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def speeds(task: Task, seconds: float, overrides: list[str]) -> dict:
    """The speed columns, each side alone for `seconds`: hogshare's config, SB3's A2C and SB3's PPO."""
    return {"alone": alone_speed(task, seconds, overrides), "sb3": sb3_speed(task, seconds, "a2c"),
            "sb3_ppo": sb3_speed(task, seconds, "ppo")}


def seeds_named(seeds) -> str:
    """'seed 0' or 'seeds 0, 2'."""
    seeds = sorted(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def with_earlier_runs(earlier: dict | None, entry: dict) -> dict:
    """A row made of entry's runs and those of the row measured before with the same config and overrides (the new
    run of a seed replaces its earlier one); when, where and how loaded each part was measured is kept."""
    if earlier is None or (earlier["config"], earlier["overrides"]) != (entry["config"], entry["overrides"]):
        shown = "none" if earlier is None else " + ".join([earlier["config"], *earlier["overrides"]])
        raise ValueError(f"no earlier row of {' + '.join([entry['config'], *entry['overrides']])} to add to "
                         f"(the row measured before: {shown})")
    new_seeds = {r["seed"] for r in entry["runs"]}
    kept = [r for r in earlier["runs"] if r["seed"] not in new_seeds]
    if not kept:
        return entry
    before, now = seeds_named(r["seed"] for r in kept), seeds_named(new_seeds)
    joined = {key: earlier[key] if earlier[key] == entry[key] else f"{earlier[key]} ({before}) and {entry[key]} ({now})"
              for key in ("measured", "machine", "load")}
    return {**earlier, **entry, **joined, "runs": sorted(kept + entry["runs"], key=lambda r: r["seed"])}


def mean_std(values: list[float], digits: int = 0) -> str:
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):,.{digits}f} ± {std:,.{digits}f}"


def verdict(task: Task, scores: list[float]) -> str:
    """Against the task's target (rl-zoo's PPO figure, or its goal) as a mean over seeds with no seed below rl-zoo's
    A2C figure (its PPO one where it has no A2C row): met, or by how much not."""
    floor, floor_name = (task.a2c, "A2C") if task.a2c is not None else (task.ppo, "PPO")
    target_name = "PPO's" if task.goal is None else f"{task.goal:g}"
    mean = statistics.mean(scores)
    below = sum(s < floor for s in scores)
    if mean >= task.target and below == 0:
        return f"met: mean at {target_name} or above, no seed below {floor_name}'s"
    short = f"mean {mean - task.target:+,.1f} ({mean / task.target:.0%} of {target_name})"
    parts = [] if mean >= task.target else [short]
    if below:
        parts.append(f"{below} of {len(scores)} seeds below {floor_name}'s")
    return "**not met**: " + "; ".join(parts)


def time_to(runs: list[dict], name: str) -> str:
    """Each seed's minutes to a figure (- where it never got there)."""
    times = [r.get("reached", {}).get(name) for r in runs]
    return " / ".join("-" if t is None else f"{t / 60:.0f}" for t in times)


def projected(task: Task, speed: dict | None) -> str:
    """SB3 PPO's env steps/s alone and the wall time its budget would take at that rate."""
    if speed is None:
        return "-"
    return f"{speed['steps_per_second']:,.0f} ({task.budget / speed['steps_per_second'] / 60:,.0f} min)"


def row(task: Task, entry: dict) -> list[str]:
    runs = entry["runs"]
    scores = [r["score"] for r in runs]
    digits = 1 if task.atari else 0
    sb3, alone = entry.get("sb3"), entry.get("alone")
    config = " + ".join(f"`{part}`" for part in [entry["config"], *entry["overrides"]])
    return [task.zoo_env, config,
            f"{task.budget / 1e6:g} M", str(len(runs)), mean_std(scores, digits),
            "-" if task.a2c is None else f"{task.a2c:g}", f"{task.ppo:g}", verdict(task, scores),
            mean_std([r["wall_seconds"] / 60 for r in runs], 1) + " min", time_to(runs, "a2c"), time_to(runs, "ppo"),
            "-" if alone is None else f"{alone['steps_per_second']:,.0f}",
            f"{statistics.mean(r['steps_per_second'] for r in runs):,.0f}",
            "-" if sb3 is None else f"{sb3['steps_per_second']:,.0f}", projected(task, entry.get("sb3_ppo"))]


def plot(task: Task, entry: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for r in entry["runs"]:
        if r["curve"]:
            xs, ys = zip(*r["curve"])
            ax.plot(xs, ys, alpha=0.85, label=f"hogshare seed {r['seed']}")
    if task.a2c is not None:
        ax.axhline(task.a2c, color="tab:red", linestyle="--", linewidth=1, label=f"rl-zoo A2C {task.a2c:g}")
    ax.axhline(task.ppo, color="gray", linestyle=":", linewidth=1, label=f"rl-zoo PPO {task.ppo:g}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean return, last 100 episodes")
    ax.set_title(f"{task.zoo_env}: configs/{entry['config']}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(results: dict) -> Path:
    """zoo.md and the plots, from every row of zoo.json, in TASKS' order."""
    measured = [(TASKS[name], results[name]) for name in TASKS if name in results]
    for task, entry in measured:
        plot(task, entry, RESULTS / f"zoo_{task.name}.png")
    table = markdown_table(["task (rl-zoo's id)", "hogshare config", "budget", "seeds", "hogshare return",
                            "rl-zoo A2C", "rl-zoo PPO", "against rl-zoo", "wall time",
                            "minutes to A2C's figure, per seed", "minutes to PPO's figure, per seed",
                            "env steps/s alone", "env steps/s of the runs", "SB3 A2C env steps/s alone",
                            "SB3 PPO env steps/s alone (its budget at that rate, projected)"],
                           [row(t, e) for t, e in measured])
    missing = [t for t in TASKS.values() if t.name not in results]
    own_goals = "; ".join(f"{t.zoo_env}: {t.goal:g}, rl-zoo's PPO figure of {t.ppo:g} being the game's ceiling"
                          for t in TASKS.values() if t.goal is not None)
    lines = [
        "# hogshare on rl-baselines3-zoo's tasks", "",
        "rl-zoo's figures are from its benchmark.md: the mean return of evaluation episodes after its budget of "
        "env steps (greedy, except Atari). hogshare's: each seed trains the shipped config for the same budget "
        f"(2 workers on this machine's 2 cores), then plays {EVAL_EPISODES} greedy episodes as `evaluate` does; "
        "for Atari, the mean of the last 100 training episodes (sampled actions). The return column is mean ± std "
        f"over seeds. The goal: a mean at rl-zoo's PPO figure or above ({own_goals}), no seed below its A2C figure. "
        "Minutes to a figure: the wall time at which a run's mean return of its last 100 training episodes first "
        "reached it, the pauses of a resumed run left out. Speed: each side alone on the machine for the seconds "
        "each row gives (`--speed-seconds`), and the learning runs' own rate, which counts whatever else ran "
        "beside them. `python -m experiments.zoo --task NAME --seeds N` measures a row, `--score RUN_DIR ...` "
        "scores runs trained (and resumed) by hand; each row says when and how loaded the machine was below.", "",
        table, "",
    ]
    if missing:
        lines += ["Not measured yet: " + ", ".join(f"{t.zoo_env} (`--task {t.name}`)" for t in missing) + ".", ""]
    for task, entry in measured:
        lines += [f"## {task.zoo_env}", "",
                  f"Measured {entry['measured']} on {entry['machine']}; {entry['load']}. Scored by "
                  f"{entry['runs'][0]['scored_by']}. Per seed: "
                  + "; ".join(f"seed {r['seed']} {r['score']:,.1f} after {r['env_steps']:,} steps in "
                              f"{r['wall_seconds'] / 60:.1f} min"
                              + (f" (resumed: {r['sessions']} sessions)" if r.get("sessions", 1) > 1 else "")
                              for r in entry["runs"]) + ".", ""]
        if entry.get("alone"):
            a = entry["alone"]
            lines += [f"hogshare alone for {a['seconds']:.0f} s: {a['steps_per_second']:,.0f} env steps/s past its "
                      f"first {SPEED_WARMUP_S:g} s ({a['load']} at the end).", ""]
        if entry.get("sb3"):
            s = entry["sb3"]
            lines += [f"Stable-Baselines3 A2C, rl-zoo's hyperparameters ({s['hyperparameters']}), alone for "
                      f"{s['seconds']:.0f} s: {s['env_steps']:,} env steps, {s['steps_per_second']:,.0f}/s.", ""]
        if entry.get("sb3_ppo"):
            s = entry["sb3_ppo"]
            lines += [f"Stable-Baselines3 PPO, rl-zoo's hyperparameters ({s['hyperparameters']}), alone for "
                      f"{s['seconds']:.0f} s: {s['steps_per_second']:,.0f} env steps/s; at that rate its budget of "
                      f"{task.budget:,} env steps would take {task.budget / s['steps_per_second'] / 60:,.0f} minutes "
                      f"(a projection, not a run).", ""]
        if task.name in TRIED:
            lines += [TRIED[task.name], ""]
        lines += [f"![{task.zoo_env}](zoo_{task.name}.png)", ""]
    path = RESULTS / "zoo.md"
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), help="the row to measure")
    parser.add_argument("--seeds", type=int, help="runs (default: 3 for MuJoCo and Box2D, 2 for Atari)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=6 * 3600, help="wall-second cap of each run")
    parser.add_argument("--speed-seconds", type=float, default=0,
                        help="also time the config, SB3's A2C and SB3's PPO, each alone, for this long (0: not)")
    parser.add_argument("--speed-only", action="store_true",
                        help="only time the two sides (for --speed-seconds) and add them to the task's measured row")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an override of the shipped config (a trial; the row says so)")
    parser.add_argument("--add", action="store_true",
                        help="with --score: add the runs to the row measured before with the same config and "
                             "overrides, replacing its runs of the same seeds")
    parser.add_argument("--write", action="store_true", help="only rewrite zoo.md and the plots from zoo.json")
    parser.add_argument("--score", nargs="+", type=Path, metavar="RUN_DIR",
                        help="with --task: make the row from these finished run directories of its config (each "
                             "trained for its budget, perhaps resumed), seeds read from their config.yaml")
    args = parser.parse_args()
    store = RESULTS / "zoo.json"
    results = json.loads(store.read_text()) if store.exists() else {}
    if args.speed_only:
        if args.task not in results or args.speed_seconds <= 0:
            parser.error("--speed-only: needs --task of a measured row and --speed-seconds > 0")
        entry = results[args.task]
        entry.update(speeds(TASKS[args.task], args.speed_seconds, entry["overrides"]))
        store.write_text(json.dumps(results, indent=1) + "\n")
    elif not args.write:
        if args.task is None:
            parser.error("argument --task: required unless --write")
        task = TASKS[args.task]
        if importlib.util.find_spec(task.needs) is None:
            parser.error(f"--task {task.name}: needs the {EXTRAS[task.needs]} extra: pip install -e "
                         f"'.[{EXTRAS[task.needs]}]'")
        started = load()
        if args.add and not args.score:
            parser.error("--add: only with --score RUN_DIR ...")
        if args.score:
            runs = [scored(task, yaml.safe_load((d / "config.yaml").read_text())["seed"], d.resolve())
                    for d in args.score]
        else:
            seeds = range(args.first_seed, args.first_seed + (args.seeds or task.seeds))
            runs = [run_seed(task, s, args.max_seconds, args.set) for s in seeds]
        entry = {"config": task.config, "overrides": args.set, "measured": time.strftime("%Y-%m-%d"),
                 "machine": machine_line(), "runs": runs}
        entry["load"] = f"{started} at the start, {load()} at the end"
        if args.speed_seconds > 0:
            entry.update(speeds(task, args.speed_seconds, args.set))
        else:  # SB3's side does not change with hogshare's config
            entry.update({k: v for k, v in results.get(task.name, {}).items() if k in ("sb3", "sb3_ppo")})
        if args.add:
            try:
                entry = with_earlier_runs(results.get(task.name), entry)
            except ValueError as exc:
                parser.error(f"--add: {exc}")
        results[task.name] = entry
        store.write_text(json.dumps(results, indent=1) + "\n")
    print(write(results).read_text())


if __name__ == "__main__":
    main()
