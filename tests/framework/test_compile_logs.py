"""explain() and HOGSHARE_LOGS: which guards a graph holds, which guard failed on a recompile, why a graph broke."""
from __future__ import annotations

import logging

import pytest

import framework as F
from framework import compiler

from compile_models import ActorCritic, a3c_loss, rollout


pytestmark = pytest.mark.usefixtures("fresh_compiler")


def test_explain_of_a_whole_graph():
    F.manual_seed(0)
    model = ActorCritic(hidden=8)
    explanation = compiler.explain(a3c_loss(model), *rollout(4))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0 and explanation.break_reasons == []
    for guard in ("obs: shape (4, 4)", "obs: dtype float32", "obs: requires_grad False", "actions: dtype int64",
                  "obs: stride (4, 1)", "grad mode: enabled"):
        assert guard in explanation.guards
    assert any(g.startswith("modules unchanged") for g in explanation.guards)
    assert "linear" in explanation.ops_per_graph[0] and "categorical_log_prob" in explanation.ops_per_graph[0]
    assert compiler.counters["captures"] == 0  # explain caches nothing


def test_explain_accepts_compiled_functions_and_modules():
    model = ActorCritic(hidden=8)
    for fn in (F.compile(model), F.compile(lambda x: model(x)[0])):
        explanation = compiler.explain(fn, F.ones(3, 4))
        assert explanation.graph_count == 1 and "x: shape (3, 4)" in explanation.guards


def test_logs_say_which_guard_failed_why_a_graph_broke_and_what_it_guards(monkeypatch, caplog, capsys):
    monkeypatch.setenv("HOGSHARE_LOGS", "recompiles,graph_breaks,guards")
    compiled = F.compile(lambda x: x * 2 if x.sum().item() > 0 else x)
    with caplog.at_level(logging.INFO, logger="framework.compiler"):
        compiled(F.ones(3))
        compiled(F.ones(4))
    messages = [r.getMessage() for r in caplog.records]
    recompiles = [m for m in messages if m.startswith("Recompiling")]
    assert len(recompiles) == 1 and "x: shape (3,), got (4,)" in recompiles[0]
    assert sum(m.startswith("Graph break") and ".item()" in m for m in messages) == 2
    assert sum(m.startswith("GUARDS") and "x: shape (4,)" in m for m in messages) == 1
    assert {r.name for r in caplog.records} == {"framework.compiler.recompiles", "framework.compiler.graph_breaks",
                                               "framework.compiler.guards"}
    assert "Recompiling" in capsys.readouterr().err


def test_logs_are_off_unless_asked_for_and_by_artifact(monkeypatch, caplog):
    monkeypatch.delenv("HOGSHARE_LOGS", raising=False)
    compiled = F.compile(lambda x: x + 1)
    with caplog.at_level(logging.DEBUG, logger="framework.compiler"):
        compiled(F.ones(2))
        compiled(F.ones(3))
    assert caplog.records == []
    monkeypatch.setenv("HOGSHARE_LOGS", "recompiles")
    with caplog.at_level(logging.DEBUG, logger="framework.compiler"):
        compiled(F.ones(4))
    assert [r.name for r in caplog.records] == ["framework.compiler.recompiles"]
