"""`tune` where the tune extra is missing (CI's first configuration): refused in one line naming the install."""
from __future__ import annotations

import importlib.util

import pytest

from run_configs import cartpole_config
from train_cli import run_cli, write_config


@pytest.mark.skipif(importlib.util.find_spec("optuna") is not None, reason="optuna is installed (this checks a "
                                                                           "configuration without it, as CI's first)")
def test_tune_without_its_extra_is_refused_in_one_line(tmp_path):
    config = write_config(tmp_path / "c.yaml", cartpole_config())
    space = write_config(tmp_path / "s.yaml", {"optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2}})
    done = run_cli("tune", "--config", config, "--space", space, "--trials", "1", "--logdir", tmp_path / "runs")
    assert done.returncode == 2
    assert done.stderr == ("tune: error: tune needs the tune extra (Optuna, matplotlib), which is not installed; "
                           "allowed: pip install -e '.[tune]'\n")
    assert not (tmp_path / "runs").exists()
