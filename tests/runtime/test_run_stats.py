"""RunStats: per-worker counters, episode rings and metric sums in shared memory, read by the monitor."""
import multiprocessing
import time

import numpy as np
import pytest

from framework.runtime.run_stats import EPISODES, LAG_SUM, SEQ, SKIP_STREAK, SKIPPED, STEPS, UPDATES, RunStats


def test_counters_metrics_and_lag():
    stats = RunStats(2, ("loss", "entropy"))
    before = stats.snapshot()
    w0, w1 = stats.writer(0), stats.writer(1)
    w0.add_steps(100)
    w1.add_steps(50)
    w0.add_update({"loss": 1.0, "entropy": 0.5}, lag=2)
    w1.add_update({"loss": 3.0, "entropy": 0.7}, lag=0)
    after = stats.snapshot()
    assert after.total(STEPS) == 150 and after.total(UPDATES) == 2 and after.total(LAG_SUM) == 2
    assert w0.global_steps() == 150 and w1.global_updates() == 2
    means = after.metric_means(before, stats.metrics)
    assert means["loss"] == 2.0 and abs(means["entropy"] - 0.6) < 1e-12
    assert after.metric_means(after, stats.metrics) == {}


def test_metrics_travel_by_name_in_any_order_and_unknown_names_are_refused():
    stats = RunStats(1, ("loss", "entropy", "lr"))
    before = stats.snapshot()
    w = stats.writer(0)
    w.add_update({"lr": 0.5, "loss": 2.0}, lag=0)  # entropy not reported this time: it adds nothing
    assert stats.snapshot().metric_means(before, stats.metrics) == {"loss": 2.0, "entropy": 0.0, "lr": 0.5}
    with pytest.raises(KeyError):
        w.add_update({"policy_loss": 1.0}, lag=0)
    assert stats.snapshot().total(UPDATES) == 1


def test_workers_stop_at_the_step_budget():
    stats = RunStats(2, (), step_budget=1000)
    w0, w1 = stats.writer(0), stats.writer(1)
    w0.add_steps(600)
    assert not w1.should_stop()
    w1.add_steps(400)
    assert w0.should_stop() and w1.should_stop()
    stats.set_step_budget(5000)  # a resumed run with a larger total_steps
    assert not w0.should_stop()


def test_skip_streak_resets_on_an_applied_update():
    stats = RunStats(1, ("loss",))
    w = stats.writer(0)
    assert [w.add_skipped() for _ in range(3)] == [1, 2, 3]
    w.add_update({"loss": 0.0}, lag=0)
    assert stats.counters[0, SKIP_STREAK] == 0 and stats.counters[0, SKIPPED] == 3
    assert w.add_skipped() == 1


def test_new_episodes_in_order_and_ring_overflow_keeps_newest():
    stats = RunStats(2, (), ring=4)
    seen = np.zeros(2, dtype=np.int64)
    stats.writer(0).add_episodes([1.0, 2.0], [10, 20])
    stats.writer(1).add_episodes([5.0], [50])
    returns, lengths = stats.new_episodes(seen)
    assert returns.tolist() == [1.0, 2.0, 5.0] and lengths.tolist() == [10, 20, 50]
    assert stats.new_episodes(seen)[0].size == 0
    stats.writer(0).add_episodes([float(i) for i in range(3, 10)], list(range(7)))
    returns, _ = stats.new_episodes(seen)
    assert returns.tolist() == [6.0, 7.0, 8.0, 9.0]
    assert seen.tolist() == [9, 1]


def test_stop_flag_and_restore():
    stats = RunStats(3, ())
    assert not stats.writer(2).should_stop()
    stats.request_stop()
    assert stats.writer(2).should_stop()
    saved = np.zeros(stats.counters.shape[1], dtype=np.int64)
    saved[[STEPS, UPDATES, EPISODES, SKIPPED]] = [1000, 10, 5, 1]
    stats.restore(saved)
    snap = stats.snapshot()
    assert [snap.total(c) for c in (STEPS, UPDATES, EPISODES, SKIPPED)] == [1000, 10, 5, 1]


def _child(stats):
    w = stats.writer(1)
    w.add_steps(7)
    w.add_episodes([42.0], [42])
    w.add_update({"loss": 1.5}, lag=3)


def test_a_spawned_worker_writes_into_the_same_memory():
    stats = RunStats(2, ("loss",))
    proc = multiprocessing.get_context("spawn").Process(target=_child, args=(stats,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    snap = stats.snapshot()
    assert snap.total(STEPS) == 7 and snap.total(LAG_SUM) == 3 and snap.metric_sums[1, 0] == 1.5
    assert stats.new_episodes(np.zeros(2, dtype=np.int64))[0].tolist() == [42.0]


def _hammer(stats, seconds):
    w = stats.writer(0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        w.add_update({"lr": 1.0, "loss": 2.0}, lag=1)
        time.sleep(0.00005)  # a real worker spends a rollout between updates; keep the writes dense all the same


def test_snapshots_never_tear_an_update_from_its_count():
    """Means between snapshots taken while a worker updates are exact: metrics and counts are read together."""
    stats = RunStats(1, ("lr", "loss"))
    proc = multiprocessing.get_context("fork").Process(target=_hammer, args=(stats, 1.5))
    proc.start()
    previous, checked = stats.snapshot(), 0
    while proc.is_alive():
        snap = stats.snapshot()
        means = snap.metric_means(previous, stats.metrics)
        if means:
            assert means == {"lr": 1.0, "loss": 2.0}
            assert snap.total(LAG_SUM) == snap.total(UPDATES) and snap.metric_sums[0, 0] == snap.total(UPDATES)
            checked += 1
        previous = snap
    proc.join(10)
    assert proc.exitcode == 0 and checked > 100


def test_a_writer_killed_inside_an_update_does_not_block_snapshots():
    stats = RunStats(2, ("loss",))
    stats.counters[1, SEQ] = 7  # as a worker SIGKILLed between the two halves of add_update leaves it
    start = time.monotonic()
    stats.snapshot()
    assert time.monotonic() - start < 10  # a snapshot waiting for the sequence to even out would never return
    stats.writer(1).add_update({"loss": 1.0}, lag=0)  # its replacement evens the sequence first
    assert stats.counters[1, SEQ] % 2 == 0


def test_counts_are_running_totals_over_workers_beside_the_metrics():
    stats = RunStats(2, ("loss",), counts=("waited_s", "dropped"))
    before = stats.snapshot()
    w0, w1 = stats.writer(0), stats.writer(1)
    w0.add_count("waited_s", 0.25)
    w1.add_count("waited_s", 0.5)
    w1.add_count("dropped")
    w0.add_update({"loss": 4.0}, lag=0)
    after = stats.snapshot()
    assert after.count_totals(stats.metrics, stats.counts) == {"waited_s": 0.75, "dropped": 1.0}
    assert after.metric_means(before, stats.metrics) == {"loss": 4.0}  # counts do not enter the means
    with pytest.raises(KeyError):
        w0.add_count("loss", 1.0)  # a metric is not a count


def test_updates_elsewhere_count_in_the_policy_lag_as_the_workers_own():
    """A Ray node's workers read parameters that hold other nodes' updates too: global_updates counts them."""
    stats = RunStats(1, ("loss",))
    worker = stats.writer(0)
    worker.add_update({"loss": 1.0}, lag=0)
    stats.set_updates_elsewhere(40)
    assert worker.global_updates() == 41 and stats.snapshot().total(UPDATES) == 1
    stats.set_updates_elsewhere(45)
    assert worker.global_updates() == 46
