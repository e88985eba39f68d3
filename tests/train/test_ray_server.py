"""The parameter server's exchange (a plain class: Ray only carries the calls): deltas add up, staleness counts
the other groups' pushes, reports reach the driver once, the run's updates (for the policy lag across nodes) are the accepted
reports'."""
import numpy as np

from framework.train.backends.ray_server import ParameterServer
from framework.runtime.run_stats import STEPS, UPDATES


def report(steps: int = 0, episodes=(), exits=(), optimizer=None, buffers=None, updates: int = 0) -> dict:
    counters = np.zeros((2, 7), np.int64)
    counters[0, STEPS], counters[1, UPDATES] = steps, updates
    return {"counters": counters, "metric_sums": np.zeros((2, 3)), "episodes": list(episodes),
            "exits": list(exits), "exchange_s": 0.5, "relay": {"sent": 2.0}, "optimizer": optimizer,
            "buffers": buffers}


def test_deltas_add_up_and_staleness_counts_the_other_groups_pushes():
    server = ParameterServer(np.zeros(3, np.float32), steps_before=100)
    _, a, _, _ = server.exchange(0, None, 0, report())  # registrations move nothing and count no exchange
    _, b, _, _ = server.exchange(1, None, 0, report())
    assert a == b == 0
    params, a, steps, _ = server.exchange(0, np.ones(3, np.float32), a, report(steps=10))
    assert a == 1 and steps == 110 and params.tolist() == [1, 1, 1]
    params, a, _, _ = server.exchange(0, np.ones(3, np.float32), a, report(steps=20))  # nobody pushed in between
    params, b, steps, _ = server.exchange(1, np.full(3, 2, np.float32), b, report(steps=5))  # 2 pushes since its pull
    assert params.tolist() == [4, 4, 4] and b == 3 and steps == 125
    state = server.state(params=True)
    assert state["version"] == 3 and state["params"].tolist() == [4, 4, 4]
    assert {g: (s["exchanges"], s["staleness"]) for g, s in state["groups"].items()} == {0: (2, 0), 1: (1, 2)}
    params[:] = -1  # what a group got is its own copy
    assert server.state(params=True)["params"].tolist() == [4, 4, 4]


def test_episodes_exits_optimizer_state_and_buffers_reach_the_driver_once():
    server = ParameterServer(np.zeros(2, np.float32), steps_before=0)
    returns, lengths = np.array([9.0]), np.array([9.0])
    server.exchange(0, None, 0, report(episodes=[(1, returns, lengths)], exits=[(1, False, "worker 1 ...", "tb")],
                                       optimizer={"state": {}, "param_groups": []},
                                       buffers={"obs_norm.count": np.array([7.0])}))
    first = server.state(params=False)
    group = first["groups"][0]
    assert first["params"] is None and group["optimizer"] == {"state": {}, "param_groups": []}
    assert group["buffers"]["obs_norm.count"].tolist() == [7.0]
    assert group["episodes"][0][0] == 1 and group["exits"] == [(1, False, "worker 1 ...", "tb")]
    assert group["exchange_s"] == 0.5 and group["silent_s"] >= 0 and group["relay"] == {"sent": 2.0}
    second = server.state(params=False)
    again = second["groups"][0]
    assert again["optimizer"] is again["buffers"] is None and again["episodes"] == again["exits"] == []


def test_a_fenced_group_changes_nothing_and_its_last_record_is_handed_over_once():
    server = ParameterServer(np.zeros(2, np.float32), steps_before=0)
    server.exchange(0, None, 0, report())
    server.exchange(1, None, 0, report())
    returns, lengths = np.array([9.0]), np.array([9.0])
    server.exchange(0, np.ones(2, np.float32), 0, report(steps=10, episodes=[(0, returns, lengths)]))
    last = server.fence(0)
    assert last["counters"][0, STEPS] == 10 and last["episodes"][0][0] == 0 and last["exchanges"] == 1
    assert server.exchange(0, np.ones(2, np.float32), 1, report(steps=99, episodes=[(0, returns, lengths)])) is None
    params, version, steps, _ = server.exchange(1, np.ones(2, np.float32), 1, report(steps=5))
    assert params.tolist() == [2, 2] and version == 2 and steps == 15  # the fenced group's refused push counts nowhere
    assert list(server.state(params=False)["groups"]) == [1]
    assert server.fence(0)["episodes"] == [] and server.fence(7)["counters"] is None  # never registered: nothing


def test_the_reply_counts_the_updates_the_global_parameters_hold_a_fenced_groups_refused_ones_not():
    server = ParameterServer(np.zeros(2, np.float32), steps_before=0, updates_before=40)
    assert server.exchange(0, None, 0, report())[3] == 40  # a resumed run's updates come first
    assert server.exchange(0, np.ones(2, np.float32), 0, report(updates=7))[3] == 47
    assert server.exchange(1, None, 0, report(steps=320))[3] == 47  # a group of actors: steps, no update
    server.fence(0)
    assert server.exchange(0, np.ones(2, np.float32), 1, report(updates=9)) is None
    assert server.exchange(1, None, 1, report(steps=640))[3] == 47
