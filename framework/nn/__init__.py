"""Neural-network layers, containers, initialisation and functional forms (torch.nn's names and layouts)."""
from . import functional, init
from .activation import ELU, LogSoftmax, ReLU, Sigmoid, Softmax, Softplus, Tanh
from .arena import ParameterArena
from .container import ModuleList, Sequential
from .conv import Conv2d, MaxPool2d
from .flatten import Flatten
from .linear import Identity, Linear
from .module import IncompatibleKeys, Module
from .parameter import Parameter
from .rnn import LSTMCell
from . import utils

__all__ = ["ELU", "LogSoftmax", "ReLU", "Sigmoid", "Softmax", "Softplus", "Tanh", "ParameterArena", "ModuleList",
           "Sequential", "Conv2d", "MaxPool2d", "Flatten", "Identity", "Linear", "IncompatibleKeys", "Module",
           "Parameter", "LSTMCell", "functional", "init", "utils"]
