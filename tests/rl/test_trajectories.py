"""The trajectory buffer's protocol: slots handed over by index between real processes, bounded waits that are
counted, nothing lost or duplicated, slots of a killed holder taken back (rl.trajectories)."""
import math
import time

import numpy as np
import pytest

import sharing
from framework.rl.trajectories import FREE, FULL, READING, ROLLOUT_ARRAYS, WRITING, TrajectoryBuffer
from trajectory_workers import die_holding, write_rollouts

STEPS, ENVS = 5, 3


def _buffer(actors: int = 2, slots_per_actor: int = 2, lstm: bool = False) -> TrajectoryBuffer:
    return TrajectoryBuffer(actors, slots_per_actor, STEPS, ENVS, (4, 6, 6), np.uint8, (), np.int64,
                            state_shapes=((8,), (2, 3)) if lstm else ())


def _never() -> bool:
    return False


@pytest.mark.parametrize("start_method", ["spawn", "forkserver", "fork"])
def test_rollouts_written_in_another_process_reach_the_learner_by_index_oldest_first(start_method):
    buffer = _buffer()
    dropped = sharing.empty_shared((2,), np.int64)
    dropped[...] = 0
    actor = sharing.get_context(start_method).Process(target=write_rollouts, args=(buffer, 1, 0, 2, 10.0, dropped))
    actor.start()
    actor.join(60)
    assert actor.exitcode == 0
    slots, waited = buffer.take(0, 2, 10.0, _never)
    assert slots.tolist() == [2, 3] and waited < 5.0  # actor 1's slots, in the order they were filled
    batch = buffer.batch(slots)
    assert batch["obs"].dtype == np.uint8 and batch["obs"].shape == (STEPS + 1, 2 * ENVS, 4, 6, 6)
    assert batch["rewards"].shape == batch["log_probs"].shape == (STEPS, 2 * ENVS)
    np.testing.assert_array_equal(batch["rewards"][:, :ENVS], 0.0)
    np.testing.assert_array_equal(batch["obs"][:, ENVS:], 1)
    assert batch["version"].tolist() == [0, 1] and dropped.tolist() == [0, 0]
    assert buffer.status[slots].tolist() == [READING, READING]
    buffer.release(slots)
    assert buffer.status.tolist() == [FREE] * 4


def test_a_recurrent_state_travels_with_its_rollout():
    """A state of any arrays (an LSTM's two, a model.factory's own), each (envs, ...)."""
    buffer = _buffer(lstm=True)
    states = (np.arange(ENVS * 8).reshape(ENVS, 8), -np.arange(ENVS * 6).reshape(ENVS, 2, 3))
    for slot in (0, 1):
        assert buffer.acquire(0, 1.0, _never)[0] == slot
        for view, state in zip(buffer.slot_views(slot).state0, states):
            view[...] = state + 100 * slot
        buffer.publish(slot, 0)
    joined = buffer.batch(buffer.take(0, 2, 1.0, _never)[0])["state0"]
    for array, state in zip(joined, states):
        np.testing.assert_array_equal(array, np.concatenate([state, state + 100]))


def _fill(buffer: TrajectoryBuffer, actor: int, version: int) -> int:
    """One rollout of actor whose every value is `version`; its slot."""
    slot = buffer.acquire(actor, 1.0, _never)[0]
    views = buffer.slot_views(slot)
    for name in ROLLOUT_ARRAYS:
        getattr(views, name)[...] = version
    for view in views.state0:
        view[...] = version
    buffer.publish(slot, version)
    return slot


def test_a_nodes_rollouts_reach_their_actors_slots_in_the_learners_buffer_whole_and_once():
    """A Ray node's buffer holds its own actors' slots (actors 2 and 3 of 4); its rollouts travel whole, with their
    actors and versions, into those actors' slots of the learners' buffer, where a learner takes them as local
    ones."""
    node = TrajectoryBuffer(2, 2, STEPS, ENVS, (4, 6, 6), np.uint8, (), np.int64, state_shapes=((8,),),
                            first_actor=2)
    learners = TrajectoryBuffer(4, 2, STEPS, ENVS, (4, 6, 6), np.uint8, (), np.int64, state_shapes=((8,),))
    assert node.own_slots(3) == range(2, 4) and node.status.size == 4
    for actor, version in ((3, 7), (2, 8), (3, 9)):
        _fill(node, actor, version)
    slots, _ = node.take(0, 3, 1.0, _never)
    rollouts = node.rollouts(slots)
    node.release(slots)
    assert rollouts["actor"].tolist() == [3, 2, 3] and rollouts["version"].tolist() == [7, 8, 9]
    assert rollouts["obs"].shape == (STEPS + 1, 3, ENVS, 4, 6, 6) and rollouts["state0"][0].shape == (3, ENVS, 8)
    assert node.status.tolist() == [FREE] * 4
    assert learners.store(rollouts, 1.0, _never) == (3, 0)
    assert learners.status.tolist() == [FREE] * 4 + [FULL] + [FREE] + [FULL] * 2  # actor 2's slot 4, actor 3's 6, 7
    batch = learners.batch(learners.take(0, 3, 1.0, _never)[0])
    assert batch["version"].tolist() == [7, 8, 9]  # the order they arrived in
    for i, version in enumerate((7, 8, 9)):
        np.testing.assert_array_equal(batch["obs"][:, i * ENVS:(i + 1) * ENVS], version)
        np.testing.assert_array_equal(batch["state0"][0][i * ENVS:(i + 1) * ENVS], version)


def test_a_delivery_into_full_slots_drops_the_oldest_after_its_bound_and_none_once_stopping():
    learners = _buffer(actors=1, slots_per_actor=1)
    source = _buffer(actors=1, slots_per_actor=2)
    _fill(source, 0, 1), _fill(source, 0, 2)
    rollouts = source.rollouts(np.array([0, 1]))
    started = time.monotonic()
    assert learners.store(rollouts, 0.2, _never) == (2, 1)  # the second overwrote the first, unread
    assert 0.2 <= time.monotonic() - started < 5 and learners.version.tolist() == [2]
    learners.take(0, 1, 1.0, _never)  # a learner holds the one slot
    assert learners.store(rollouts, 0.0, lambda: True) == (0, 0)


def test_an_actor_waits_at_most_its_bound_then_drops_its_oldest_unread_rollout():
    buffer = _buffer(slots_per_actor=2)
    first, _, _ = buffer.acquire(0, 1.0, _never)
    buffer.publish(first, 0)
    second, _, _ = buffer.acquire(0, 1.0, _never)
    buffer.publish(second, 1)
    started = time.monotonic()
    slot, waited, dropped = buffer.acquire(0, 0.2, _never)
    assert 0.2 <= waited <= time.monotonic() - started < 5.0
    assert (slot, dropped) == (first, 1) and buffer.status[slot] == WRITING  # the older of the two unread
    assert buffer.status[second] == FULL


def test_a_learner_takes_what_there_is_once_its_wait_is_over():
    buffer = _buffer()
    slot, _, _ = buffer.acquire(1, 1.0, _never)
    buffer.publish(slot, 7)
    slots, waited = buffer.take(0, 4, 0.2, _never)
    assert slots.tolist() == [slot] and waited >= 0.2


def test_waiting_actors_and_learners_return_when_the_run_stops():
    buffer = _buffer(slots_per_actor=1)
    slot, _, _ = buffer.acquire(0, 1.0, _never)  # half written: neither FREE nor FULL, nothing to drop
    deadline = time.monotonic() + 0.3
    stopping = lambda: time.monotonic() >= deadline  # noqa: E731
    assert buffer.acquire(0, 0.0, stopping)[0] is None
    assert buffer.take(0, 1, 0.0, stopping)[0].size == 0
    assert buffer.status[slot] == WRITING


def test_a_batch_whose_last_slot_is_published_as_the_run_stops_is_still_taken():
    """An actor publishes its slot, then counts the steps that reach the run's budget: whenever the learner looks,
    a stop it sees comes after that slot is FULL (here the last slot is published inside stopping())."""
    buffer = _buffer(actors=2, slots_per_actor=1)
    first = _fill(buffer, 0, 3)
    last, _, _ = buffer.acquire(1, 1.0, _never)

    def publish_then_stop() -> bool:
        if buffer.status[last] == WRITING:
            buffer.publish(last, 3)
        return True

    assert sorted(buffer.take(0, 2, math.inf, publish_then_stop)[0].tolist()) == sorted([first, last])


@pytest.mark.parametrize("role", ["actor", "learner"])
@pytest.mark.parametrize("inside_lock", [False, True], ids=["holding slots", "holding the lock too"])
def test_slots_of_a_process_killed_holding_them_are_taken_back_by_its_successor(role, inside_lock):
    buffer = _buffer(slots_per_actor=1)
    if role == "learner":
        slot, _, _ = buffer.acquire(0, 1.0, _never)
        buffer.publish(slot, 0)
    holder = sharing.get_context("spawn").Process(target=die_holding, args=(buffer, role, inside_lock))
    holder.start()
    holder.join(60)
    assert holder.exitcode == -9
    assert buffer.status[0] == (WRITING if role == "actor" else READING)
    assert buffer.reclaim(role, 0) == 1  # the lock its holder died in is taken anyway
    assert buffer.status.tolist() == [FREE, FREE]
    assert buffer.acquire(0, 0.0, _never)[0] == 0  # and the slot is its actor's again


@pytest.mark.parametrize("max_wait_s", [10.0, 0.0], ids=["actors wait", "actors drop"])
def test_rollouts_between_processes_are_neither_lost_nor_duplicated(max_wait_s):
    """Two actor processes publish 100 rollouts each while this process learns from them: every rollout is taken
    exactly once or counted as dropped by its actor."""
    buffer = _buffer(actors=2, slots_per_actor=2)
    dropped = sharing.empty_shared((2,), np.int64)
    dropped[...] = 0
    context = sharing.get_context("fork")
    actors = [context.Process(target=write_rollouts, args=(buffer, a, 1000 * a, 100, max_wait_s, dropped))
              for a in range(2)]
    for actor in actors:
        actor.start()
    seen: list[int] = []

    def learn(slots: np.ndarray) -> None:
        batch = buffer.batch(slots)
        buffer.release(slots)
        seen.extend(batch["rewards"][0, ::ENVS].astype(int).tolist())
        assert (batch["version"] == batch["rewards"][0, ::ENVS]).all()

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(a.is_alive() for a in actors):
        slots, _ = buffer.take(0, 3, 0.01, lambda: not any(a.is_alive() for a in actors))
        if slots.size:
            learn(slots)
    for actor in actors:
        actor.join(10)
        assert actor.exitcode == 0
    while (buffer.status == FULL).any():  # the rollouts the actors left: taken, not waited for
        learn(buffer.take(0, 3, 0.0, _never)[0])
    assert len(seen) == len(set(seen))
    assert len(seen) + int(dropped.sum()) == 200
    assert set(seen) <= set(range(100)) | set(range(1000, 1100))
    if max_wait_s > 0:
        assert dropped.tolist() == [0, 0]
