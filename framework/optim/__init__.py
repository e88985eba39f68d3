"""Optimizers (SGD, Adam, RMSprop) with state in flat, shareable arrays; gradient clipping; lr schedules."""
from . import lr_scheduler
from .adam import Adam
from .clip import clip_grad_norm_
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Adam", "Optimizer", "RMSprop", "SGD", "clip_grad_norm_", "lr_scheduler"]
