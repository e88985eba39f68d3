"""Fixtures shared by every test folder (the suite's helper modules live in tests/support, on pythonpath)."""
from pathlib import Path

import pytest


@pytest.fixture
def logdir(tmp_path) -> Path:
    """An empty directory for run directories."""
    path = tmp_path / "runs"
    path.mkdir()
    return path
