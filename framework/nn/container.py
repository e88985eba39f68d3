"""Containers: Sequential (a chain of layers) and ModuleList (a registered list of modules)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Union

from .activation import ReLU
from .conv import Conv2d
from .module import Module


class Sequential(Module):
    """Applies its modules in order; built from modules or an OrderedDict of named modules.

    A Conv2d followed by a ReLU runs as one op (`Conv2d.convolve(x, relu=True)`): the ReLU in place on the
    convolution's fresh output, its backward inside the convolution's own copy of the output gradient, where
    alone each would be a pass over the activation with short inner loops (the Atari networks' layers, 10% of
    their forward). The same values; not for a Conv2d subclass that overrides forward, or a ReLU subclass.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)

    def forward(self, input: Any) -> Any:
        conv = None  # a Conv2d held back until the next module shows whether a ReLU follows it
        for module in self._modules.values():
            if conv is not None:
                if module.__class__ is ReLU:
                    input, conv = conv.convolve(input, relu=True), None
                    continue
                input, conv = conv.forward(input), None
            if isinstance(module, Conv2d) and type(module).forward is Conv2d.forward:
                conv = module
            else:
                input = module.forward(input)
        return input if conv is None else conv.forward(input)

    def __getitem__(self, index: Union[int, slice]) -> Any:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        try:
            return items[index][1]
        except IndexError:
            raise IndexError(f"index {index} is out of range for a Sequential of {len(items)} modules") from None

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (indexable, iterable, appendable)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        self.extend(modules)

    def __getitem__(self, index: int) -> Module:
        items = list(self._modules.values())
        try:
            return items[index]
        except IndexError:
            raise IndexError(f"index {index} is out of range for a ModuleList of {len(items)} modules") from None

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        for module in modules:
            self.append(module)
        return self
