"""`logging.mlflow`: the run as an MLflow run, through MLflow's own `MlflowClient`.

`tracking_uri` is any URI MLflow takes (`sqlite:///mlflow.db`, `http://host:5000`, a directory); null leaves it
to MLflow (MLFLOW_TRACKING_URI, else ./mlruns). `experiment` names the MLflow experiment (made when missing);
null takes the config's `experiment`. The MLflow run is named after the run directory and tagged with its
id (`hogshare.run_key`), so a resumed run logs into the same MLflow run (its parameters, which MLflow keeps
unchanged, stay those of the first session). The client is MLflow's explicit one rather than the fluent
`mlflow.start_run`, whose active run is a global of the process (a user's own MLflow run is left alone).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from framework.train.trackers.base import Tracker, flat_config, run_key

RUN_KEY_TAG = "hogshare.run_key"
MAX_PARAM_TEXT = 6000
"""The longest parameter value MLflow stores."""


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class MLflowTracker(Tracker):
    name = "mlflow"

    def open(self) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.section["tracking_uri"])
        experiment_name = self.section["experiment"] or self.config["experiment"]
        experiment = self.client.get_experiment_by_name(experiment_name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(experiment_name)
        key = run_key(self.run_dir)
        found = self.client.search_runs([experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{key}'",
                                        max_results=1)
        if found:
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            return
        run = self.client.create_run(experiment_id, run_name=self.run_dir.name,
                                     tags={RUN_KEY_TAG: key, "hogshare.run_dir": str(self.run_dir.resolve())})
        self.run_id = run.info.run_id
        params = [Param(k, str(v)[:MAX_PARAM_TEXT]) for k, v in flat_config(self.config).items()]
        for batch in _batches(params, 100):  # MLflow takes at most 100 parameters a call
            self.client.log_batch(self.run_id, params=batch)

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        values = [Metric(tag, float(value), now, step) for tag, value in metrics.items()]
        for batch in _batches(values, 1000):  # and at most 1000 metrics
            self.client.log_batch(self.run_id, metrics=batch)

    def close(self, summary: dict[str, Any]) -> None:
        self.client.log_dict(self.run_id, summary, "summary.json")
        for path in self.artifacts():
            folder = None if path.parent == Path(".") else path.parent.as_posix()
            self.client.log_artifact(self.run_id, str(self.run_dir / path), folder)
        self.client.set_terminated(self.run_id, "FINISHED" if summary["exit_code"] == 0 else "FAILED")


TRACKER = MLflowTracker
