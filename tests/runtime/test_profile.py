"""A run's own profile (runtime.profile): each process's seconds go to the phase it is in, reach its row of the
shared table within PUBLISH_S and at its end, with its wall time since it was started; a restart adds to its row."""
import time

import numpy as np
import pytest

from framework.runtime.profile import ACT, ENV, LEARN, PHASES, PUBLISH_S, SETUP, WALL, Profile, totals
from framework.runtime.run_stats import RunStats


def test_the_time_between_switches_goes_to_the_phase_left():
    row = np.zeros(len(PHASES) + 1)
    profile = Profile(row, started_at=time.time() - 1.0)  # started a second ago: its start is in no phase
    time.sleep(0.02)
    assert profile.switch(ACT) == SETUP
    time.sleep(0.05)
    assert profile.switch(ENV) == ACT
    time.sleep(0.03)
    profile.switch(LEARN)
    profile.publish()
    seconds = dict(zip(PHASES, row[:WALL]))
    assert seconds["act"] == pytest.approx(0.05, abs=0.02) and seconds["env"] == pytest.approx(0.03, abs=0.02)
    assert seconds["setup"] == pytest.approx(0.02, abs=0.02) and seconds["wait"] == 0.0
    assert row[WALL] == pytest.approx(1.1, abs=0.05) and row[:WALL].sum() < row[WALL] - 0.9


def test_a_process_publishes_while_it_runs_and_a_restart_adds_to_its_row():
    stats = RunStats(2, ())
    first = stats.writer(1).profile
    first.switch(ACT)
    time.sleep(PUBLISH_S + 0.01)
    first.switch(ENV)  # past PUBLISH_S: written without an explicit publish
    written = stats.snapshot().profile[1]
    assert written[ACT] >= PUBLISH_S and stats.snapshot().profile[0].sum() == 0.0
    second = stats.writer(1).profile  # the rank started again: its predecessor's seconds stay
    second.switch(ACT)
    time.sleep(0.02)
    second.publish()
    seconds, wall = totals(stats.snapshot().profile)
    assert seconds["act"] >= written[ACT] + 0.02 and wall >= written[WALL]
