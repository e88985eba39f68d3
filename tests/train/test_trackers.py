"""`logging.mlflow` and `logging.wandb`: what TensorBoard gets, the config, the summary and the checkpoints, read
back with MLflow's own MlflowClient from a real SQLite tracking store and from W&B's offline run files; and a
tracker that fails costs one line, never the run."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import socket
import subprocess
import sys

import numpy as np
import pytest

from extras import MLFLOW, WANDB
from run_configs import cartpole_config
from train_cli import CHECKOUT, cli_env, events, only_run_dir, run_cli, summary, write_config


def _tensorboard(run_dir) -> dict[str, list[tuple[int, float]]]:
    acc = events(run_dir)
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _train(tmp_path, config, env=None, *extra):
    """`train` in tmp_path (MLflow keeps a SQLite store's artifacts under ./mlruns); its run directory."""
    path = write_config(tmp_path / "config.yaml", config)
    done = run_cli("train", "--config", path, "--logdir", tmp_path / "runs", *extra, env=env or cli_env(),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done, only_run_dir(tmp_path / "runs")


def _short(**logging) -> dict:
    return cartpole_config(total_steps=3000, trainer={"eval_every_s": 0.5}, logging=logging)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@MLFLOW
def test_mlflow_gets_what_tensorboard_gets_the_config_the_summary_and_the_checkpoint(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done, run_dir = _train(tmp_path, _short(mlflow={"tracking_uri": uri, "experiment": "flow"}))
    assert "logging.mlflow" not in done.stderr, done.stderr
    client = MlflowClient(tracking_uri=uri)
    (found,) = client.search_runs([client.get_experiment_by_name("flow").experiment_id])
    run_id = found.info.run_id
    assert found.info.run_name == run_dir.name and found.info.status == "FINISHED"
    assert found.data.params["optimizer.lr"] == "0.003" and found.data.params["env.id"] == "CartPole-v1"
    series = _tensorboard(run_dir)
    assert {"episode/return_window_mean", "eval/return_mean", "final/mean_return"} <= set(series)
    assert set(found.data.metrics) == set(series)
    for tag, points in series.items():
        history = sorted(client.get_metric_history(run_id, tag), key=lambda m: (m.step, m.timestamp))
        assert [m.step for m in history] == [s for s, _ in points], tag
        assert np.allclose([m.value for m in history], [v for _, v in points], rtol=1e-6), tag
    artifacts = tmp_path / "artifacts"
    client.download_artifacts(run_id, "", str(artifacts.mkdir() or artifacts))
    assert json.loads((artifacts / "summary.json").read_text()) == summary(run_dir)
    assert (artifacts / "config.yaml").read_bytes() == (run_dir / "config.yaml").read_bytes()
    assert ((artifacts / "checkpoints" / "checkpoint.npz").read_bytes()
            == (run_dir / "checkpoints" / "checkpoint.npz").read_bytes())

    resumed = run_cli("train", "--resume", run_dir, "--set", "trainer.total_steps=5000", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    (again,) = client.search_runs([client.get_experiment_by_name("flow").experiment_id])
    assert again.info.run_id == run_id and again.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run_id, "episode/return_window_mean")]
    assert steps == sorted(steps) and steps[-1] == summary(run_dir)["env_steps"] >= 5000


def _wandb_env(tmp_path) -> dict:
    env = cli_env()
    for name in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        env[name] = str(tmp_path / "wandb-files" / name.lower())
    env.pop("WANDB_API_KEY", None)
    env["NETRC"] = str(tmp_path / "no-netrc")
    return env


@WANDB
def test_wandb_offline_gets_what_tensorboard_gets_the_config_the_summary_and_the_checkpoint(tmp_path):
    from wandb_records import run_data

    env = {**_wandb_env(tmp_path), "WANDB_MODE": "offline"}
    done, run_dir = _train(tmp_path, _short(wandb={"project": "flow", "tags": ["test"]}), env)
    assert "logging.wandb" not in done.stderr, done.stderr
    (offline,) = (tmp_path / "wandb-files" / "wandb_dir" / "wandb").glob("offline-run-*")
    data = run_data(offline)
    assert data["exit_code"] == 0
    assert data["config"]["optimizer"]["lr"] == 0.003 and data["config"]["env"]["id"] == "CartPole-v1"
    rows = {}
    for row in data["history"]:
        rows.setdefault(row["_step"], {}).update(row)
    for tag, points in _tensorboard(run_dir).items():
        last = {}
        for step, value in points:
            last[step] = value  # W&B keeps one row a step
        assert {step: rows[step][tag] for step in last if tag in rows[step]} == pytest.approx(last, rel=1e-6), tag
    saved = summary(run_dir)
    assert data["summary"]["stop_reason"] == saved["stop_reason"]
    assert data["summary"]["evaluation"] == pytest.approx(saved["evaluation"])
    (manifest,) = data["artifacts"].values()
    checkpoint = (run_dir / "checkpoints" / "checkpoint.npz").read_bytes()
    assert manifest["checkpoints/checkpoint.npz"] == base64.b64encode(hashlib.md5(checkpoint).digest()).decode()
    assert set(manifest) == {"config.yaml", "checkpoints/checkpoint.npz"}


@MLFLOW
@WANDB
def test_a_tracker_that_fails_costs_one_line_and_never_the_run(tmp_path):
    env = {**_wandb_env(tmp_path), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    env.pop("WANDB_MODE", None)
    dead = f"http://127.0.0.1:{_closed_port()}"
    done, run_dir = _train(tmp_path, _short(mlflow={"tracking_uri": dead}, wandb={"project": "flow", "mode": "online"}),
                           env)
    lines = done.stderr.splitlines()
    mlflow_lines = [line for line in lines if line.startswith("logging.mlflow")]
    wandb_lines = [line for line in lines if line.startswith("logging.wandb")]
    assert len(mlflow_lines) == 1 and mlflow_lines[0].startswith("logging.mlflow: open failed ("), lines
    assert mlflow_lines[0].endswith("); the run goes on without it")
    assert len(wandb_lines) == 1 and wandb_lines[0].startswith("logging.wandb: open failed (UsageError: "), lines
    saved = summary(run_dir)
    assert saved["exit_code"] == 0 and saved["failure"] is None and saved["env_steps"] >= 3000


@pytest.mark.parametrize("tracker, section", [("mlflow", {"experiment": "flow"}), ("wandb", {"project": "flow"})])
def test_a_tracker_that_is_not_installed_costs_one_line(tmp_path, tracker, section):
    if importlib.util.find_spec(tracker) is not None:
        pytest.skip(f"{tracker} is installed (this checks a configuration without it, as CI's first)")
    done, run_dir = _train(tmp_path, _short(**{tracker: section}))
    assert (f"logging.{tracker}: {tracker} is not installed (pip install -e '.[{tracker}]'); the run goes on "
            f"without it\n") in done.stderr
    assert summary(run_dir)["exit_code"] == 0


def test_a_run_without_trackers_imports_none_of_their_packages(tmp_path):
    config = write_config(tmp_path / "c.yaml", cartpole_config(total_steps=500))
    code = ("import sys\nfrom framework.train.cli import train_main\n"
            f"code = train_main(['--config', {str(config)!r}, '--logdir', {str(tmp_path / 'runs')!r}])\n"
            "print(code, sorted(m for m in ('mlflow', 'wandb', 'optuna') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=cli_env(),
                          cwd=CHECKOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"


@pytest.mark.parametrize("override, message", [
    ("logging.wandb.mode=sometimes", "config key 'logging.wandb.mode': got 'sometimes'; allowed: one of online, "
                                     "offline, disabled or null"),
    ("logging.mlflow.uri=x", "config key 'logging.mlflow.uri': unknown key; allowed here: tracking_uri, experiment"),
])
def test_tracker_sections_are_checked_as_config(override, message):
    from framework.train import ConfigError
    from framework.train.config import load_config

    with pytest.raises(ConfigError) as refused:
        load_config(cartpole_config(), [override])
    assert str(refused.value) == message
    defaults = load_config(cartpole_config())["logging"]
    assert defaults["mlflow"] == {"tracking_uri": None, "experiment": None}
    assert defaults["wandb"] == {"project": None, "entity": None, "mode": None, "group": None, "tags": []}
