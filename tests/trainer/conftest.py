"""Fixtures for the trainer tests."""
from pathlib import Path

import pytest


@pytest.fixture
def logdir(tmp_path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path
