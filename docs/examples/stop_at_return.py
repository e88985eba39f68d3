"""A callback for the docs: `train --callback docs.examples.stop_at_return:StopAtReturn`."""
from __future__ import annotations

from framework.train import Callback


class StopAtReturn(Callback):
    """Stops the run once the mean return of the last episodes reaches `threshold`, and says what it saw."""

    def __init__(self, threshold: float = 150.0):
        self.threshold = threshold

    def on_log(self, metrics: dict[str, float]) -> bool:
        return metrics.get("episode/return_window_mean", float("-inf")) >= self.threshold

    def on_eval(self, result) -> None:
        print(f"evaluation at {self.env_steps} env steps: {result.text}")

    def on_end(self, summary: dict) -> None:
        print(f"{summary['stop_reason']} after {summary['env_steps']} env steps")
