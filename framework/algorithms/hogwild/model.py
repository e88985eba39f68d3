"""Hogwild's models: an MLP classifier for dense data, a linear SVM for sparse data."""
from __future__ import annotations

from typing import Any

import numpy as np

import framework
from framework import nn
from framework.algorithms.hogwild import datasets

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


class Classifier(nn.Module):
    """An MLP: Linear layers of model.hidden widths with the activation between them, then class logits."""

    def __init__(self, features: int, hidden: list[int], activation: str, classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        size = features
        for width in hidden:
            layers += [nn.Linear(size, width), _ACTIVATIONS[activation]()]
            size = width
        self.layers = nn.Sequential(*layers, nn.Linear(size, classes))

    def forward(self, x: Any) -> Any:
        """Class logits for a batch of flat inputs."""
        return self.layers(x)


class LinearSVM(nn.Module):
    """A linear classifier sign(x . weight) over sparse inputs; weights start at zero."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(framework.zeros(features))

    def scores(self, data: datasets.Sparse) -> np.ndarray:
        """x . weight for every row of data."""
        return data.scores(self.weight.data_array)
