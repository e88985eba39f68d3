"""Values a run must survive (faults 5 and 24): rewards so large that TensorBoard's histograms cannot bin the
statistics built from them, and a NaN reward now and then under reward normalisation. Each runs the real `train`
CLI in a subprocess."""
import numpy as np
import pytest

from framework.train.checkpoint import load_checkpoint
from reliability_support import fast_config, only_run_dir, run_cli, write_config
from train_cli import events, summary

pytestmark = pytest.mark.timeout(180)


def _model(run_dir) -> dict:
    return load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["model"]


@pytest.mark.fault("24", "rewards of 1e8 a step with `env.normalize_reward: true` and a histogram every 5 updates: "
                         "the return statistics (a variance near 1e18) cannot be cut into 30 finite bins",
                   "the run ends at its step target with exit 0, a final checkpoint and summary.json (today: "
                   "`ValueError: Too many bins for data range` from np.histogram ends the main process, exit 1, "
                   "neither is written); the statistic's histogram is in TensorBoard as one bucket")
def test_statistics_numpy_cannot_bin_do_not_end_the_run(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "fault_envs:HugeRewardCartPole-v0", "kwargs": {"reward": 1e8}, "normalize_reward": True},
        trainer={"total_steps": 4000}, logging={"histogram_every": 5}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(logdir)
    assert summary(run_dir)["stop_reason"] == "total_steps reached"
    assert _model(run_dir)["return_norm.var"][0] > 1e16
    histogram = events(run_dir).Histograms("params/return_norm.var")
    assert histogram and sum(histogram[-1].histogram_value.bucket) == 1


@pytest.mark.fault("5", "a NaN reward every 200th step of each env under `env.normalize_reward: true` "
                        "(`max_nonfinite_updates: 20`), then `train --resume` of the run",
                   "the NaN never enters the reward normaliser: the poisoned updates alone are skipped and counted, "
                   "the run reaches its step target with exit 0 and a finite normaliser in its checkpoint, and the "
                   "resume trains on (today: the normaliser turns NaN, every later update is skipped, the run stops "
                   "at the limit with exit 1 and a resume stops at once)")
def test_a_nan_reward_never_enters_the_reward_normaliser(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "fault_envs:NonFiniteCartPole-v0", "kwargs": {"where": "reward", "every": 200},
             "normalize_reward": True},
        algorithm={"max_nonfinite_updates": 20}, trainer={"total_steps": 8000}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(logdir)
    first = summary(run_dir)
    assert first["stop_reason"] == "total_steps reached" and 0 < first["skipped_updates"] < first["updates"]
    statistics = {k: v for k, v in _model(run_dir).items() if k.startswith("return_norm.")}
    assert statistics and all(np.isfinite(v).all() for v in statistics.values())
    resumed = run_cli(watch, "--resume", run_dir, "--set", f"trainer.total_steps={first['env_steps'] + 4000}")
    assert resumed.returncode == 0, resumed.stderr
    second = summary(run_dir)
    assert second["stop_reason"] == "total_steps reached" and second["updates"] > first["updates"] + 50
