"""EnvBatch: batched stepping, auto-reset, truncation vs termination, spaces, and env errors; the vector path
(one vector env: CartPole's own, in the version that resets in the same step) against the loop of envs, and
ale-py's AtariVectorEnv against the wrapper chain."""

import numpy as np
import pytest

from gymnasium.vector import AutoresetMode

from framework.rl.envs.cartpole_vector import SameStepCartPoleVectorEnv
from framework.rl.envs.batch import EnvBatch
from framework.rl.envs.faults import EnvError
from framework.rl.envs.ids import env_id_problem, make_env
from framework.rl.envs.info import env_info
from framework.train.config import validate
from extras import ATARI


def _batch(env_id, kwargs, n, seed, rank=0, vectorize=True, life_loss_done=False):
    """An EnvBatch made as a worker makes one: from the description of a config's environment."""
    config = validate({"env": {"id": env_id, "kwargs": kwargs, "vectorize": vectorize}})
    return EnvBatch(env_info(config), n, seed, rank, life_loss_done=life_loss_done)


def test_batch_steps_resets_and_reports_episodes():
    batch = _batch("CartPole-v1", {}, n=3, seed=7)
    assert batch.obs.shape == (3, 4) and batch.obs.dtype == np.float32
    returns, lengths, steps = [], [], 0
    while len(returns) < 6:
        out = batch.step(np.ones(3, dtype=np.int64))  # always push right: episodes end quickly
        steps += 3
        returns += out.episode_returns
        lengths += out.episode_lengths
        assert not out.truncated.any()
    assert returns == [float(n) for n in lengths]  # CartPole pays 1 per step
    assert all(5 <= n < 100 for n in lengths)
    assert np.all(np.abs(batch.obs) < 1.0)  # reset observations are small


def test_same_seed_same_trajectory():
    a, b = _batch("CartPole-v1", {}, 2, seed=3), _batch("CartPole-v1", {}, 2, seed=3)
    np.testing.assert_array_equal(a.obs, b.obs)
    for _ in range(20):
        a.step(np.array([0, 1])), b.step(np.array([0, 1]))
    np.testing.assert_array_equal(a.obs, b.obs)


def test_truncation_is_reported_with_the_last_observation():
    batch = _batch("CartPole-v1", {"max_episode_steps": 4}, n=2, seed=0)
    for _ in range(3):
        out = batch.step(np.array([0, 1]))
        assert not out.truncated.any()
    before = batch.obs.copy()
    out = batch.step(np.array([0, 1]))
    assert out.truncated.all() and not out.terminated.any()
    assert out.truncated_index.tolist() == [0, 1]
    assert out.truncated_obs.shape == (2, 4)
    assert not np.allclose(out.truncated_obs, before)  # one step further than before
    assert out.episode_lengths == [4, 4]


def test_discrete_observations_become_one_hot():
    batch = _batch("FrozenLake-v1", {"is_slippery": False}, n=2, seed=0)
    assert batch.obs.shape == (2, 16)
    np.testing.assert_array_equal(batch.obs.sum(axis=1), [1.0, 1.0])
    batch.step(np.array([2, 1]))  # right, down
    assert batch.obs[0, 1] == 1.0 and batch.obs[1, 4] == 1.0


def test_box_actions_are_clipped():
    batch = _batch("Pendulum-v1", {}, n=1, seed=0)
    out = batch.step(np.array([[100.0]]))
    assert np.isfinite(out.rewards).all()


def test_env_that_raises_in_step_names_env_and_worker():
    batch = _batch("fault_envs:RaisingCartPole-v0", {"fail_after": 2}, n=2, seed=0, rank=3)
    batch.step(np.array([0, 0]))
    batch.step(np.array([0, 0]))
    with pytest.raises(EnvError, match=r"RaisingCartPole-v0 \(worker 3, env 0\) raised in step: "
                                       r"RuntimeError: injected fault") as info:
        batch.step(np.array([0, 0]))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_env_that_cannot_be_built_names_env_and_worker():
    with pytest.raises(EnvError, match=r"CartPole-v1 \(worker 2\) could not be built"):
        make_env("CartPole-v1", {"no_such_argument": 1}, rank=2)


def test_env_id_problem_checks_the_form_only():
    for form in ("CartPole-v1", "ALE/Breakout-v5", "fault_envs:RaisingCartPole-v0", "custom_envs:MoveToGoal",
                 "pkg.mod:make_env", "CartPoel-v1", "no_such_module:X-v0"):
        assert env_id_problem(form) is None, form
    for bad in ("Cart Pole", "1mod:X", "mod:", "a:b:c", ""):
        assert "module:EnvId or module:Factory" in env_id_problem(bad), bad


# ---- the vector path: one vector env that resets in the same step, or a loop of envs -----------------------
def _steps(batch, actions):
    """Everything a batch reports over a sequence of steps, for comparing two batches."""
    record = [batch.obs.copy()]
    for a in actions:
        out = batch.step(a)
        record += [batch.obs.copy(), out.rewards, out.terminated, out.truncated, out.truncated_index,
                   out.truncated_obs, out.episode_index, out.episode_returns, out.episode_lengths]
    return record


@pytest.mark.parametrize("kwargs", [{}, {"max_episode_steps": 7}], ids=["terminations", "truncations"])
def test_vector_and_loop_paths_report_the_same_steps(kwargs):
    actions = np.random.default_rng(0).integers(0, 2, (60, 3))
    _assert_same_steps(_batch("vector_envs:SameStepCartPole-v0", kwargs, 3, seed=5),
                       _batch("CartPole-v1", kwargs, 3, seed=5, vectorize=False), actions, kwargs)


def _assert_same_steps(vector, loop, actions, kwargs):
    assert vector.vectorized and not loop.vectorized
    ours, theirs = _steps(vector, actions), _steps(loop, actions)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    ended = sum(ours[9::9], [])  # the episode lengths of every step
    assert ended and (kwargs == {} or set(ended) == {7})  # episodes did end, by the time limit where set


@pytest.mark.parametrize("kwargs", [{}, {"max_episode_steps": 7}], ids=["terminations", "truncations"])
def test_cartpole_steps_as_gymnasiums_vector_env_what_the_loop_steps(kwargs):
    """CartPole-v1's own vector env (CartPoleVectorEnv), in the version that resets in the same step, steps
    the episodes a loop of CartPoleEnv seeded alike steps, to the bit."""
    actions = np.random.default_rng(1).integers(0, 2, (400, 3))
    vector = _batch("CartPole-v1", kwargs, 3, seed=11)
    assert isinstance(vector._envs.vector_env, SameStepCartPoleVectorEnv)
    _assert_same_steps(vector, _batch("CartPole-v1", kwargs, 3, seed=11, vectorize=False), actions, kwargs)


def test_the_same_step_cartpole_reports_the_last_observation_and_refuses_next_step():
    env = SameStepCartPoleVectorEnv(2, max_episode_steps=3)
    first, _ = env.reset(seed=4)
    for _ in range(2):
        observations, rewards, terminated, truncated, info = env.step(np.array([0, 1]))
        assert "final_obs" not in info
    observations, rewards, terminated, truncated, info = env.step(np.array([0, 1]))
    assert truncated.all() and rewards.tolist() == [1.0, 1.0] and info["_final_obs"].all()
    assert np.abs(observations).max() <= 0.05 < np.abs(info["final_obs"]).max()  # reset states; the last ones
    observations, rewards, terminated, truncated, info = env.step(np.array([0, 1]))  # no throw-away call
    assert rewards.tolist() == [1.0, 1.0] and not (terminated | truncated).any()
    with pytest.raises(ValueError, match="resets in the same step"):
        SameStepCartPoleVectorEnv(2, autoreset_mode=AutoresetMode.NEXT_STEP)


def test_next_step_vector_envs_and_vectorize_false_loop():
    """A vector env that autoresets on the next call only is not used; vectorize=False never uses one."""
    assert not _batch("vector_envs:NextStepCartPole-v0", {}, 2, seed=0).vectorized
    assert not _batch("CartPole-v1", {}, 2, seed=0, vectorize=False).vectorized


def test_vector_env_that_raises_names_env_and_worker():
    batch = _batch("vector_envs:SameStepRaisingCartPole-v0", {"fail_after": 1}, n=2, seed=0, rank=4)
    assert batch.vectorized
    batch.step(np.array([0, 0]))
    with pytest.raises(EnvError, match=r"SameStepRaisingCartPole-v0 \(worker 4, vector env\) raised in step: "
                                       r"RuntimeError: injected fault"):
        batch.step(np.array([0, 0]))


def test_uint8_images_stay_uint8():
    batch = _batch("vector_envs:Frames-v0", {"max_episode_steps": 2}, n=2, seed=0)
    assert batch.obs.dtype == np.uint8 and batch.obs.shape == (2, 2, 24, 24)
    batch.step(np.array([0, 0]))
    out = batch.step(np.array([0, 0]))
    assert out.truncated.all() and out.truncated_obs.dtype == np.uint8 and out.truncated_obs.shape == (2, 2, 24, 24)


def test_life_loss_marks_the_lost_lives_and_changes_not_the_episodes():
    plain = _batch("custom_envs:Lives", {"lives": 3, "life_steps": 2, "reward": 4.0}, n=2, seed=0)
    atari_style = _batch("custom_envs:Lives", {"lives": 3, "life_steps": 2, "reward": 4.0}, n=2, seed=0,
                         life_loss_done=True)
    for step in range(1, 13):  # two whole games of 6 steps
        seen, out = plain.step(np.zeros(2, np.int64)), atari_style.step(np.zeros(2, np.int64))
        assert seen.rewards.tolist() == out.rewards.tolist() == [4.0, 4.0]  # the game's own: signs are the rollout's
        assert not seen.life_lost.any()
        assert out.life_lost.tolist() == [step % 6 in (2, 4)] * 2, step  # the game's end is an episode's end
        assert out.terminated.tolist() == seen.terminated.tolist() == [step % 6 == 0] * 2
        assert out.episode_returns == seen.episode_returns == ([24.0, 24.0] if step % 6 == 0 else [])


def test_life_loss_done_is_refused_for_an_env_without_lives():
    batch = _batch("CartPole-v1", {}, n=2, seed=0, life_loss_done=True)
    with pytest.raises(EnvError, match=r"no 'lives'.*life_loss_done: false"):
        batch.step(np.zeros(2, np.int64))


@ATARI
@pytest.mark.parametrize("vectorize", [True, False])
def test_a_lost_life_in_breakout_is_a_learning_episode_end(vectorize):
    batch = _batch("ALE/Breakout-v5", {"repeat_action_probability": 0.0}, 2, seed=0, vectorize=vectorize,
                   life_loss_done=True)
    rng = np.random.default_rng(0)
    try:
        assert batch.vectorized == vectorize
        lost = 0
        for _ in range(2000):
            out = batch.step(rng.integers(0, 4, 2))
            assert not (out.life_lost & out.terminated).any()
            lost += int(out.life_lost.sum())
            if out.terminated.any():
                break
        assert out.terminated.any() and lost >= 4, "a game of Breakout is 5 lives"
    finally:
        batch.close()


@ATARI
def test_atari_runs_as_one_vector_env_of_uint8_frames():
    batch = _batch("hogshare/Atari-v0", {"game": "ALE/Pong-v5", "repeat_action_probability": 0.0}, 3, seed=0)
    try:
        assert batch.vectorized and batch.obs.dtype == np.uint8 and batch.obs.shape == (3, 4, 84, 84)
        out = batch.step(np.array([0, 2, 3]))
        assert out.rewards.dtype == np.float64 and batch.obs[:, -1].any()
    finally:
        batch.close()
    _batch("hogshare/Atari-v0", {"game": "ALE/Pong-v5"}, 3, seed=2**31 - 2).close()  # seeds past int32 wrap


@ATARI
def test_atari_vector_env_matches_the_wrapper_chain():
    """Same game, seed and actions: AtariVectorEnv's frames equal make_atari's bit for bit (grayscale, 4-frame
    skip with max-pool, 84x84 resize, stacking). Two things differ, so both are fixed or allowed for here: the
    up-to-30 no-ops at reset are drawn by different generators (noop_max=0 here), and after a reset the vector
    env pads the stack with zero frames where FrameStackObservation repeats the first frame (so the stacks
    agree from the 4th step of an episode on, and before that in their newest frames)."""
    from gymnasium.vector import AutoresetMode

    from framework.rl.envs.atari import make_atari, make_atari_vector

    settings = {"game": "ALE/Pong-v5", "noop_max": 0, "repeat_action_probability": 0.0}
    chain = make_atari(**settings)
    vector = make_atari_vector(1, autoreset_mode=AutoresetMode.SAME_STEP, **settings)
    try:
        ours, theirs = np.asarray(chain.reset(seed=1)[0]), vector.reset(seed=1)[0][0]
        assert ours.dtype == theirs.dtype == np.uint8
        np.testing.assert_array_equal(ours[-1], theirs[-1])
        assert (ours[:-1] == ours[-1]).all() and not theirs[:-1].any()
        points = 0
        for step, action in enumerate(np.random.default_rng(0).integers(0, 6, 150)):
            ours, reward, terminated, truncated, _ = chain.step(action)
            points += reward != 0
            theirs, rewards, terminations, truncations, _ = vector.step(np.array([action]))
            newest = slice(None) if step >= 2 else slice(-step - 1, None)
            np.testing.assert_array_equal(np.asarray(ours)[newest], theirs[0][newest], err_msg=f"step {step}")
            assert (reward, terminated, truncated) == (rewards[0], terminations[0], truncations[0])
        assert points > 0  # the frames compared include points scored
    finally:
        chain.close()
        vector.close()
