"""Optimizers (SGD, Adam, RMSprop and its TensorFlow form) with state in flat, shareable arrays; gradient
clipping; lr schedules."""
from . import lr_scheduler
from .adam import Adam
from .clip import clip_grad_norm_
from .optimizer import Optimizer
from .rmsprop import RMSprop, RMSpropTFLike
from .sgd import SGD

__all__ = ["Adam", "Optimizer", "RMSprop", "RMSpropTFLike", "SGD", "clip_grad_norm_", "lr_scheduler"]
