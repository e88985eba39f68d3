"""The actor-learner plugins in one process: an actor's trajectory in its slot, IMPALA's learner on on-policy data
making A3C's update, the policy lag it counts, V-trace's ratios off-policy, APPO's clipped surrogate against its
definition."""
import gymnasium as gym
import numpy as np
import pytest

import framework
from framework.runtime.run_stats import LAG_SUM, UPDATES
from framework.rl.actor_learner import bridge_values, cut_nonfinite_steps
from framework.rl.losses import actor_critic_loss, clipped_surrogate_loss
from framework.rl.returns import gae
from framework.rl.trajectories import FREE, READING
from framework.rl.spaces import ActionHead
from framework.train.config import validate
from in_process import InProcessRun


def _actor_and_learner(name: str, lstm: bool = False, **algorithm):
    config = validate({
        "env": {"envs_per_worker": 3}, "model": {"hidden": [16], "lstm": lstm},
        "algorithm": {"name": name, "n_steps": 5, "batch_trajectories": 1, "max_grad_norm": 1e6, **algorithm},
        "optimizer": {"name": "sgd", "lr": 1e-12}, "trainer": {"workers": 1, "compile": False}})
    run = InProcessRun(config, first_seed=7)
    actor, learner = run.actor_and_learner()
    return actor, learner, run.model, run.stats


@pytest.mark.parametrize("lstm", [False, True], ids=["feed-forward", "lstm"])
def test_an_actors_slot_holds_its_rollout_and_the_policy_that_acted(lstm):
    actor, learner, _, stats = _actor_and_learner("impala", lstm)
    actor.update()
    batch = learner.take_batch()
    np.testing.assert_array_equal(batch["obs"][-1], actor.current_obs)  # the rollout was written into the slot
    assert set(np.unique(batch["actions"])) <= {0, 1}
    assert batch["version"].tolist() == [0] and stats.snapshot().counters[0].sum() > 0
    learner.sync()
    head, _ = learner.forward_trajectories(batch["obs"], learner.state0(batch), batch["dones"])
    actions = learner.tensor(batch["actions"].reshape(-1))
    np.testing.assert_allclose(learner.target_log_probs(head, actions).reshape(5, 3), batch["log_probs"],
                               rtol=1e-4, atol=1e-5)  # pi = mu: the same parameters
    assert len(batch["state0"]) == (2 if lstm else 0)


def test_on_policy_the_impala_update_is_the_a3c_update():
    actor, learner, _, _ = _actor_and_learner("impala")
    actor.update()
    batch = learner.take_batch()
    learner.learn(batch)
    impala_grad = learner.local_arena.grad.copy()

    learner.sync()
    learner.local_arena.grad[...] = 0.0
    head, values = learner.forward_trajectories(batch["obs"], None, batch["dones"])
    v = values.detach().numpy().reshape(6, 3)
    advantages, targets = gae(batch["rewards"], batch["dones"], v, 0.99, 1.0)
    a = learner.algo_cfg
    loss, *_ = actor_critic_loss(learner.action_head, learner.local, head, values,
                                 learner.tensor(batch["actions"].reshape(15)),
                                 learner.tensor(advantages.reshape(15).astype(np.float32)),
                                 learner.tensor(targets.reshape(15).astype(np.float32)), 15, a["value_coef"],
                                 a["entropy_coef"])
    loss.backward()
    np.testing.assert_allclose(impala_grad, learner.local_arena.grad, rtol=1e-4, atol=1e-6)


def test_the_policy_lag_of_an_update_counts_the_updates_since_its_data_was_acted():
    actor, learner, model, stats = _actor_and_learner("impala")
    actor.update()  # acted with the parameters of update 0
    other = stats.writer(0)
    for _ in range(3):  # three updates by others meanwhile, one of which changed the policy
        other.add_update({}, 0)
    model.arena.data[...] += 0.05 * np.random.default_rng(0).standard_normal(model.arena.data.shape)
    learner.learn(learner.take_batch())
    snap = stats.snapshot()
    assert snap.total(UPDATES) == 4 and snap.counters[1, LAG_SUM] == 3
    ratio = snap.metric_sums[1, stats.metrics.index("importance_ratio")]  # of the one update
    assert abs(ratio - 1.0) > 1e-3  # pi != mu now: the ratios V-trace truncates are not 1


@pytest.mark.parametrize("synchronous", [False, True], ids=["asynchronous", "synchronous"])
def test_a_synchronous_learner_gives_its_slots_back_once_its_update_is_applied(synchronous):
    """Asynchronous, the actor gets its slot back as soon as the learner has copied the batch out and acts while
    it learns; synchronous, only once the update is applied, so the next rollout acts with the new parameters."""
    actor, learner, model, stats = _actor_and_learner("appo", synchronous=synchronous, slots_per_actor=1,
                                                      epochs=2, minibatches=2)
    actor.update()
    batch = learner.take_batch()
    assert learner.buffer.status.tolist() == [READING + learner.ctx.index if synchronous else FREE]
    learner.learn(batch)
    learner.give_back()
    assert learner.buffer.status.tolist() == [FREE] and stats.snapshot().total(UPDATES) == 4
    actor.update()
    learner.step()
    snap = stats.snapshot()
    assert snap.total(UPDATES) == 8 and snap.counters[1, LAG_SUM] == 2 * (0 + 1 + 2 + 3)  # lag 0 at each start
    assert learner.buffer.status.tolist() == [FREE]


def test_the_clipped_surrogate_is_ppos_objective():
    rng = np.random.default_rng(3)
    n, clip = 64, 0.2
    head = framework.tensor(rng.normal(size=(n, 3)), dtype=framework.float64, requires_grad=True)
    values = framework.tensor(rng.normal(size=(n + 1,)), dtype=framework.float64)
    actions = rng.integers(0, 3, n)
    logits = head.detach().numpy()
    log_pi = logits[np.arange(n), actions] - np.log(np.exp(logits).sum(axis=1))
    behaviour = log_pi + rng.normal(scale=0.3, size=n)  # ratios both sides of the clip
    advantages, targets = rng.normal(size=n), rng.normal(size=n)
    action_head = ActionHead(gym.spaces.Discrete(3))

    class Model:
        log_std = None

    loss, policy_loss, value_loss, entropy, log_ratio = clipped_surrogate_loss(
        action_head, Model(), head, values, framework.tensor(actions), framework.tensor(behaviour),
        framework.tensor(advantages), framework.tensor(targets), n, clip, 0.5, 0.01)
    np.testing.assert_allclose(log_ratio.detach().numpy(), log_pi - behaviour, rtol=1e-12)
    ratio = np.exp(log_pi - behaviour)
    expected = -np.minimum(ratio * advantages, np.clip(ratio, 1 - clip, 1 + clip) * advantages).mean()
    assert policy_loss.item() == pytest.approx(expected, rel=1e-12)
    assert value_loss.item() == pytest.approx(((values.numpy()[:n] - targets) ** 2).mean(), rel=1e-12)
    policy_loss.backward()
    unclipped = ratio * advantages <= np.clip(ratio, 1 - clip, 1 + clip) * advantages  # where min takes r A
    d_log_pi = -(ratio * advantages * unclipped) / n
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    expected_grad = d_log_pi[:, None] * (np.eye(3)[actions] - softmax)
    np.testing.assert_allclose(head.grad.numpy(), expected_grad, rtol=1e-9, atol=1e-12)


def test_the_clipped_value_loss_is_ppo2s():
    rng = np.random.default_rng(4)
    n, clip = 50, 0.2
    values = framework.tensor(rng.normal(size=(n,)), dtype=framework.float64, requires_grad=True)
    old = values.detach().numpy() + rng.normal(scale=0.3, size=n)  # some moved past the clip, some not
    targets = rng.normal(size=n)
    head = framework.tensor(np.zeros((n, 2)), dtype=framework.float64)

    class Model:
        log_std = None

    _, _, value_loss, _, _ = clipped_surrogate_loss(
        ActionHead(gym.spaces.Discrete(2)), Model(), head, values, framework.tensor(np.zeros(n, dtype=np.int64)),
        framework.tensor(np.zeros(n)), framework.tensor(np.zeros(n)), framework.tensor(targets), n, 0.1, 0.5, 0.0,
        framework.tensor(old), clip)
    v = values.detach().numpy()
    clipped = old + np.clip(v - old, -clip, clip)
    assert value_loss.item() == pytest.approx(np.maximum((v - targets) ** 2, (clipped - targets) ** 2).mean(),
                                              rel=1e-12)
    value_loss.backward()
    unclipped_wins = (v - targets) ** 2 >= (clipped - targets) ** 2
    inside = np.abs(v - old) < clip  # where the clipped value still moves with V
    expected = 2 * (v - targets) * unclipped_wins + 2 * (clipped - targets) * (~unclipped_wins & inside)
    np.testing.assert_allclose(values.grad.numpy(), expected / n, rtol=1e-9, atol=1e-12)


def test_appos_minibatches_of_shuffled_samples_see_the_batch_as_whole_trajectories_do():
    """One epoch of one minibatch: the same samples either way, so the same gradient (the samples' indexing lines
    up with the trajectories')."""
    grads = []
    for split in ("samples", "trajectories"):
        actor, learner, _, _ = _actor_and_learner("appo", epochs=1, minibatches=1, minibatch_split=split)
        actor.update()
        learner.learn(learner.take_batch())
        grads.append(learner.local_arena.grad.copy())
    assert np.abs(grads[0]).max() > 0
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("target_kl, updates, early_stops", [(None, 6, 0), (1e-12, 1, 1)],
                         ids=["no target", "tiny target"])
def test_appo_stops_a_batchs_epochs_once_its_kl_passes_the_target(target_kl, updates, early_stops):
    """The first minibatch starts where the batch did (KL 0) and is always applied; with a target no update can
    stay under, the epochs stop at the second."""
    actor, learner, _, stats = _actor_and_learner("appo", epochs=3, minibatches=2, target_kl=target_kl)
    learner.opt_cfg = {**learner.opt_cfg, "lr": 0.1}  # updates that move the policy
    actor.update()
    before = stats.snapshot()
    learner.learn(learner.take_batch())
    after = stats.snapshot()
    assert after.total(UPDATES) == updates
    assert after.count_totals(stats.metrics, stats.counts)["kl_early_stops"] == early_stops
    means = after.metric_means(before, stats.metrics)
    assert means["approx_kl"] >= 0 and 0 <= means["clip_fraction"] <= 1 and means["explained_variance"] <= 1


@pytest.mark.parametrize("decoupled", [False, True], ids=["against the behaviour policy", "decoupled"])
def test_decoupled_appo_clips_against_the_batchs_start_and_weights_the_lag(decoupled):
    """Data acted long ago (the shared parameters moved since): against the behaviour policy some ratios start
    past the clip; decoupled, the first update's ratios are all 1 (nothing clipped, KL 0) and the advantages carry
    pi_prox / mu truncated at rho_bar instead."""
    actor, learner, model, stats = _actor_and_learner("appo", epochs=1, minibatches=1, clip_range=0.05,
                                                      decoupled=decoupled)
    actor.update()
    model.arena.data[...] += 0.3 * np.random.default_rng(0).standard_normal(model.arena.data.shape)
    before = stats.snapshot()
    learner.learn(learner.take_batch())
    means = stats.snapshot().metric_means(before, stats.metrics)
    if decoupled:
        assert means["clip_fraction"] == 0 and means["approx_kl"] == pytest.approx(0, abs=1e-7)
    else:
        assert means["clip_fraction"] > 0.2 and means["approx_kl"] > 0


def test_a_step_that_is_not_finite_is_cut_and_its_trajectory_bootstraps_through_it():
    """A NaN observation in the middle of a trajectory: that step gets no advantage and no value error, the steps
    before it bootstrap through it (its value is its own one-step target: no TD error), nothing NaN remains."""
    actor, learner, _, stats = _actor_and_learner("impala")
    actor.update()
    batch = learner.take_batch()
    batch["obs"][2, 1] = np.nan
    clean = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in batch.items()}
    assert cut_nonfinite_steps(batch) == 1 and not batch["valid"][2, 1] and batch["valid"].sum() == 14
    assert np.isfinite(batch["obs"]).all() and batch["dones"].sum() == clean["dones"].sum()
    learner.sync()
    head, values = learner.forward_trajectories(batch["obs"], None, batch["dones"])
    found = learner.targets(batch, head, values, True)
    assert found.advantages[2, 1] == 0 and found.targets[2, 1] == pytest.approx(found.values[2, 1])
    v = values.detach().numpy().reshape(6, 3)
    bridged = bridge_values(v, batch, 0.99)
    keep = 1 - batch["dones"][2, 1]
    assert bridged[2, 1] == pytest.approx(batch["rewards"][2, 1] + 0.99 * keep * v[3, 1])
    assert np.isfinite(found.advantages).all() and np.isfinite(found.targets).all()
