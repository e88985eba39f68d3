"""How A3C reads spaces: (H, W, C) images transposed, ALE ids as Atari with the convolutions, MultiDiscrete and
MultiBinary actions as independent categoricals and Bernoullis."""
import gymnasium as gym
import numpy as np

import framework
from framework.rl.envs.batch import EnvBatch
from framework.rl.envs.info import env_info
from framework.rl.model import FrameConv2d
from framework.algorithms.a3c.plugin import A3C
from framework.rl.spaces import ActionHead, ObservationLayout
from framework.train.config import validate
from extras import ATARI, BOX2D


@BOX2D
def test_channels_last_images_are_transposed_and_step(tmp_path):
    batch = EnvBatch(env_info(validate({"env": {"id": "CarRacing-v3", "vectorize": False}})), 1, seed=0)
    try:
        assert batch.obs.shape == (1, 3, 96, 96) and batch.obs.dtype == np.uint8
        batch.step(np.zeros((1, 3), dtype=np.float32))
    finally:
        batch.close()


@ATARI
def test_an_ale_id_trains_as_atari_with_the_convolutions():
    model = A3C().build_model(validate({"env": {"id": "ALE/Breakout-v5"}}))
    assert isinstance(model.body[0], FrameConv2d) and model.body[0].weight.shape[1] == 4


def test_multi_discrete_and_multi_binary_actions_are_independent_components():
    multi = ActionHead(gym.spaces.MultiDiscrete([2, 3], start=[1, 0]))
    head = np.array([[0.0, 5.0, 0.0, 0.0, 9.0]], dtype=np.float32)
    assert multi.greedy(head).tolist() == [[1, 2]] and multi.for_env(multi.greedy(head)).tolist() == [[2, 2]]
    log_prob, entropy = multi.log_prob_entropy(framework.as_tensor(head), framework.as_tensor(np.array([[1, 2]])))
    logits = [head[0, :2], head[0, 2:]]
    expected = sum(l[a] - np.log(np.exp(l).sum()) for l, a in zip(logits, [1, 2]))
    assert np.allclose(log_prob.numpy(), [expected], atol=1e-5) and entropy.shape == (1,)
    binary = ActionHead(gym.spaces.MultiBinary(3))
    assert binary.greedy(np.array([[0.5, -0.5, 2.0]])).tolist() == [[1.0, 0.0, 1.0]]
    log_prob, _ = binary.log_prob_entropy(framework.as_tensor(np.array([[0.0, 0.0, 0.0]], dtype=np.float32)),
                                          framework.as_tensor(np.array([[1.0, 0.0, 1.0]], dtype=np.float32)))
    assert np.allclose(log_prob.numpy(), [3 * np.log(0.5)], atol=1e-6)


def test_dict_observations_pack_an_image_first_then_the_vector():
    space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (24, 24, 3), np.uint8), "n": gym.spaces.Discrete(3)})
    layout = ObservationLayout.of(space)
    assert layout.image_shape == (3, 24, 24) and layout.shape == (3 * 24 * 24 + 3,)
    obs = {"image": np.full((24, 24, 3), 7, np.uint8), "n": 2}
    row = layout.batch([obs])[0]
    assert (row[:-3] == 7).all() and row[-3:].tolist() == [0.0, 0.0, 1.0]


def test_a_policy_output_that_is_not_finite_still_samples_an_action_the_env_takes():
    """A NaN observation or NaN weights give NaN policy outputs: every kind of head still samples a valid action
    (a Normal's is 0, clipped into its Box), so an actor hands its env no NaN."""
    nan = np.full((2, 3), np.nan, dtype=np.float32)
    noise = np.zeros((2, 3), dtype=np.float32)
    normal = ActionHead(gym.spaces.Box(0.5, 2.0, (3,), np.float32))
    actions = normal.sample(nan, noise, np.zeros(3, dtype=np.float32))
    assert actions.dtype == np.float32 and (actions == 0).all()
    assert normal.for_env(actions).tolist() == [[0.5] * 3] * 2
    assert (normal.sample(np.zeros((2, 3), np.float32), noise, np.full(3, np.nan, np.float32)) == 0).all()
    for space in (gym.spaces.Discrete(3), gym.spaces.MultiBinary(3), gym.spaces.MultiDiscrete([2, 1])):
        head = ActionHead(space)
        taken = head.for_env(head.sample(nan, noise))
        assert all(space.contains(np.asarray(a, dtype=space.dtype)) for a in taken), (space, taken)
