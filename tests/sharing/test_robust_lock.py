"""RobustLock: the Lock interface across processes, and a holder killed while it holds the lock holds up nobody."""
import os
import signal
import time

import pytest

import sharing
from sharing_workers import hold_lock

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def held():
    """A RobustLock that a spawn child holds (until killed), and the child."""
    ctx = sharing.get_context("spawn")
    lock, taken = sharing.RobustLock(), ctx.Event()
    holder = ctx.Process(target=hold_lock, args=(lock, taken), daemon=True)
    holder.start()
    assert taken.wait(TIMEOUT)
    yield lock, holder
    holder.kill()
    holder.join(TIMEOUT)


def test_a_lock_held_elsewhere_is_refused_without_waiting_and_after_a_timeout(held):
    lock, _ = held
    assert not lock.acquire(block=False)
    started = time.monotonic()
    assert not lock.acquire(timeout=0.2)
    assert time.monotonic() - started >= 0.2
    with pytest.raises(ValueError, match="does not hold it"):
        lock.release()


def test_a_holder_killed_while_it_holds_the_lock_passes_it_on(held):
    lock, holder = held
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(TIMEOUT)
    assert lock.acquire(timeout=TIMEOUT)  # EOWNERDEAD: taken, and consistent again
    lock.release()
    with lock:
        assert not lock.acquire(block=False)
    assert lock.acquire(block=False)
    lock.release()
