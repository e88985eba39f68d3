"""`logging.wandb`: the run as a Weights & Biases run.

`project`, `entity`, `group` and `tags` are wandb.init's; `mode` (online, offline, disabled) too, and null leaves
it to W&B, which honours WANDB_MODE (WANDB_DIR says where its files go, as always). The W&B run is named after
the run directory, and its id is the directory's (`run_key`), so a resumed run continues the same W&B run. The
config goes in as W&B's config, the scalars by tag at env steps, the summary as W&B's summary, and config.yaml
and the checkpoints as one artifact of type "model".

W&B would capture the terminal's output (console="off" keeps the progress bar ours) and, on a terminal without
credentials, ask for a key at a prompt, which would leave the tracker waiting on a read: W&B is set up silent,
which makes it refuse instead (one line: the run goes on without it).
"""
from __future__ import annotations

from typing import Any

from framework.train.trackers.base import Tracker, run_key


class WandbTracker(Tracker):
    name = "wandb"

    def open(self) -> None:
        import wandb

        wandb.setup(settings=wandb.Settings(silent=True))
        section = self.section
        self.run = wandb.init(project=section["project"], entity=section["entity"], mode=section["mode"],
                              group=section["group"], tags=section["tags"] or None, name=self.run_dir.name,
                              id=run_key(self.run_dir), resume="allow", reinit="create_new",
                              settings=wandb.Settings(console="off", silent=True))
        self.run.config.update(self.config, allow_val_change=True)  # a resumed run may change budgets

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self, summary: dict[str, Any]) -> None:
        import wandb

        self.run.summary.update(summary)
        artifact = wandb.Artifact(f"{self.run_dir.name}-checkpoints", type="model")
        for path in self.artifacts():
            artifact.add_file(str(self.run_dir / path), name=path.as_posix())
        self.run.log_artifact(artifact)
        self.run.finish(exit_code=summary["exit_code"])


TRACKER = WandbTracker
