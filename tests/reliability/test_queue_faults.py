"""Queue faults through the real sharing API: a consumer that dies while it holds shared arrays (fault 11), a
RingQueue process hit by SIGINT over and over (fault 3)."""
import json
import subprocess
import sys

import pytest

from reliability_support import HERE, group_names, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.mark.fault("11", "a consumer SIGKILLed while holding 8 shared arrays received from a queue (4 more still "
                         "queued for it), both strategies, fork and spawn",
                   "the producer drops its copies and shares 20 new arrays with a second consumer, which changes "
                   "them in place (the producer sees the changes); file_system: the dead consumer's names leave "
                   "/dev/shm at once and, after both exit, no name of the group is left; no process left")
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
@pytest.mark.parametrize("strategy", ["file_descriptor", "file_system"])
def test_consumer_dying_with_shared_arrays_leaks_nothing(watch, strategy, start_method):
    done = subprocess.run([sys.executable, str(HERE / "programs.py"), "consumer_dies", strategy, start_method],
                          capture_output=True, text=True, timeout=100, env=watch.env())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["held"]["held"] == 8 and result["held"]["sum"] == 1000 * sum(range(8))
    assert result["doomed_exit"] == -9
    assert result["processed"] == 20 and result["worker_exit"] == 0 and result["aliased"]
    if strategy == "file_system":
        assert result["doomed_names_before"] == 8 and result["doomed_names_after"] == 0
        for group in {result["group"], result["held"]["group"]}:
            assert wait_until(lambda: not group_names(group), 10), group_names(group)
    else:
        assert result["group"] is None  # nothing named: file_descriptor segments never appear in /dev/shm


@pytest.mark.fault("3", "SIGINT about every 100 us for 3 s to a process putting and getting on a RingQueue in a "
                        "loop (it catches KeyboardInterrupt and goes on), spawn and fork",
                   "hundreds of interrupts land; with that process still alive, another one puts 200 messages and "
                   "gets each back at once, in order, none stuck, and the ring is empty after")
@pytest.mark.parametrize("start_method", ["spawn", pytest.param("fork", marks=pytest.mark.slow)])
def test_interrupts_inside_ring_queue_calls_leave_it_unlocked(watch, start_method):
    done = subprocess.run([sys.executable, str(HERE / "programs.py"), "ring_under_sigint", start_method, "3"],
                          capture_output=True, text=True, timeout=100, env=watch.env())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["interrupts"] > 200 and result["rounds"] > 200 and result["quiet"] and result["alive"], result
    assert result["errors"] == [] and result["got"] == list(range(200)) and result["left"] == 0, result
