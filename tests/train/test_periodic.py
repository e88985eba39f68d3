"""The monitor's periodic tasks: due every so many seconds from when they last ran (started, or ended for a long
one), never with a period of 0."""
import time

from framework.train.periodic import Periodic


def test_a_task_is_due_a_period_after_it_last_ran_and_never_with_a_period_of_0():
    ran = []
    task = Periodic(10.0, ran.append, start=100.0)
    assert task.run_if_due(105.0, "early") is None and ran == []
    task.run_if_due(110.0, "first")
    assert ran == ["first"] and task.last == 110.0 and not task.due(119.9) and task.due(120.0)
    never = Periodic(0.0, ran.append, start=0.0)
    assert not never.due(1e9)


def test_a_long_task_counts_its_period_from_its_end():
    def slow():
        time.sleep(0.05)

    task = Periodic(1.0, slow, start=0.0, from_end=True)
    before = time.monotonic()
    task.run(before)
    assert task.last >= before + 0.05
