"""Learning-rate schedules: LinearLR (torch.optim.lr_scheduler.LinearLR), a linear ramp of the lr factor."""
from __future__ import annotations

from typing import Any, Dict, List

from .optimizer import Optimizer


class LinearLR:
    """lr = base_lr * factor, factor going linearly from start_factor to end_factor over total_iters steps.

    As torch: constructing it applies the start factor (step 0); each step()
    advances one iteration; after total_iters the factor stays at end_factor.
    Use it for linear decay with e.g. start_factor=1.0, end_factor=0.0.
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(f"Starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                             f"got {start_factor!r}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"Ending multiplicative factor expected to be between 0 and 1, got {end_factor!r}")
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters <= 0:
            raise ValueError(f"total_iters must be a positive int, got {total_iters!r}")
        self.optimizer = optimizer
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        for group in optimizer.param_groups:
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError("param 'initial_lr' is not specified in param_groups when resuming an optimizer "
                               "(last_epoch != -1)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: List[float] = []
        self.step()

    def factor(self, epoch: int) -> float:
        """The multiplicative factor after `epoch` steps."""
        done = min(max(epoch, 0), self.total_iters)
        return self.start_factor + (self.end_factor - self.start_factor) * done / self.total_iters

    def step(self) -> None:
        """Advance one iteration and set each group's lr."""
        self.last_epoch += 1
        factor = self.factor(self.last_epoch)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> List[float]:
        """The lr of each group as last set."""
        return list(self._last_lr)

    def state_dict(self) -> Dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
