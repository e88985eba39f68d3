"""Skip markers for tests that need an optional extra: CI's first configuration installs only `test`, its second
cuda, ray, atari, box2d, tune, mlflow and wandb too (.ci/run), where these run."""
from __future__ import annotations

import importlib.util

import pytest


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in modules)


ATARI = pytest.mark.skipif(not _installed("ale_py", "cv2"), reason="the atari extra (ale-py, opencv) is not installed")
BOX2D = pytest.mark.skipif(not _installed("Box2D"), reason="the box2d extra is not installed")
TUNE = pytest.mark.skipif(not _installed("optuna", "matplotlib"), reason="the tune extra (optuna, matplotlib) is not "
                                                                     "installed")
MLFLOW = pytest.mark.skipif(not _installed("mlflow"), reason="the mlflow extra is not installed")
WANDB = pytest.mark.skipif(not _installed("wandb"), reason="the wandb extra is not installed")
