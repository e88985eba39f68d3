"""Callbacks (`framework.train.Callback`) from Python and `train --callback`, and `run(resume=)`: real runs of a few
seconds, TensorBoard's events read back with its own EventAccumulator."""
from __future__ import annotations

import json

import numpy as np
import pytest

from framework.train import Callback, ConfigError, RunFailed, run
from framework.train.cli import train_main
from run_callbacks import EVENTS, Raising, Recorder, StopAfter2000Steps
from run_configs import cartpole_config
from train_cli import call_main, cli_env, events, only_run_dir, run_cli, summary, train, write_config


def _tensorboard_series(run_dir) -> dict[str, list[tuple[int, float]]]:
    """Every TensorBoard scalar series of a run as (step, value) pairs, the eval/ and final/ ones left out."""
    acc = events(run_dir)
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]
            if not tag.startswith(("eval/", "final/"))}


def test_callbacks_get_what_tensorboard_gets_in_the_order_the_run_goes(tmp_path):
    recorder = Recorder()
    result = run(cartpole_config(total_steps=3000, trainer={"eval_every_s": 0.5}), logdir=tmp_path / "runs",
                 callbacks=[recorder])
    methods = [method for method, _, _ in recorder.events]
    assert methods[0] == "on_start" and recorder.events[0][2] == str(result.run_dir)
    assert methods[-1] == "on_end" and recorder.events[-1][2] == summary(result.run_dir) == result.summary
    assert recorder.run_dir == result.run_dir
    logged = [(steps, metrics) for method, steps, metrics in recorder.events if method == "on_log"]
    expected: dict[str, list[tuple[int, float]]] = {}
    for steps, metrics in logged:
        for tag, value in metrics.items():
            expected.setdefault(tag, []).append((steps, value))
    series = _tensorboard_series(result.run_dir)
    assert sorted(series) == sorted(expected) and "episode/return_window_mean" in series
    for tag, points in series.items():
        assert [s for s, _ in points] == [s for s, _ in expected[tag]], tag
        assert np.allclose([v for _, v in points], [v for _, v in expected[tag]], rtol=1e-6), tag
    evaluations = [metrics for method, _, metrics in recorder.events if method == "on_eval"]
    acc = events(result.run_dir)
    assert [m["return_mean"] for m in evaluations] == pytest.approx([e.value for e in acc.Scalars("eval/return_mean")])
    assert evaluations[-1] == result.summary["evaluation"]
    checkpoints = [path for method, _, path in recorder.events if method == "on_checkpoint"]
    assert checkpoints and set(checkpoints) == {str(result.run_dir / "checkpoints" / "checkpoint.npz")}


def test_callbacks_get_the_scalars_when_tensorboard_is_off(tmp_path):
    recorder = Recorder()
    result = run(cartpole_config(total_steps=3000, logging={"tensorboard": False}), logdir=tmp_path / "runs",
                 callbacks=recorder)
    logged = [metrics for method, _, metrics in recorder.events if method == "on_log"]
    assert logged and "perf/env_steps_per_s" in logged[-1] and "episode/return_window_mean" in logged[-1]
    assert not list(result.run_dir.glob("events.out.tfevents.*"))


def test_a_callback_that_returns_true_stops_the_run_as_a_stop_condition_does(tmp_path):
    result = run(cartpole_config(total_steps=10**7), logdir=tmp_path / "runs", callbacks=StopAfter2000Steps())
    assert result.summary["stop_reason"] == "stopped by callback StopAfter2000Steps"
    assert result.summary["exit_code"] == 0 and result.summary["failure"] is None
    assert 2000 <= result.summary["env_steps"] < 10**7
    assert (result.run_dir / "checkpoints" / "checkpoint.npz").is_file()


@pytest.mark.parametrize("method", ["on_start", "on_log", "on_eval", "on_checkpoint", "on_end"])
def test_a_callback_that_raises_fails_the_run_with_its_message(tmp_path, method):
    recorder = Recorder()
    with pytest.raises(RunFailed) as failed:
        run(cartpole_config(total_steps=3000, trainer={"eval_every_s": 0.3}), logdir=tmp_path / "runs",
            callbacks=[Raising(method), recorder])
    run_dir = only_run_dir(tmp_path / "runs")
    saved = summary(run_dir)
    message = f"callback Raising.{method} raised ValueError: boom in {method}"
    assert failed.value.summary == saved and saved["failure"] == message and saved["exit_code"] == 1
    assert str(failed.value) == f"run '{run_dir}' failed: {message}"
    assert (run_dir / "checkpoints" / "checkpoint.npz").is_file()
    if method == "on_start":
        assert saved["env_steps"] == 0 and saved["stop_reason"] == "callback failure"
    if method != "on_end":  # the other callbacks see the failed run end
        assert recorder.events[-1][2]["failure"] == message


def test_train_takes_callbacks_by_name_and_reports_their_stop_and_failure(tmp_path):
    log = tmp_path / "events.jsonl"
    env = cli_env()
    env[EVENTS] = str(log)
    done, run_dir = train(tmp_path, cartpole_config(total_steps=10**7), "--callback", "run_callbacks:Recorder",
                          "--callback", "run_callbacks:SecondRecorder", "--callback",
                          "run_callbacks:StopAfter2000Steps", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{run_dir}: stopped by callback StopAfter2000Steps; ")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    for name in ("Recorder", "SecondRecorder"):
        mine = [method for who, method, _, _ in calls if who == name]
        assert mine[0] == "on_start" and mine[-1] == "on_end" and "on_log" in mine
    assert calls[-1][3]["stop_reason"] == "stopped by callback StopAfter2000Steps"

    config = write_config(tmp_path / "c.yaml", cartpole_config(total_steps=10**7))  # ended by the callback
    failed = run_cli("train", "--config", config, "--logdir", tmp_path / "failed", "--callback",
                     "run_callbacks:RaisingOnLog")
    assert failed.returncode == 1, failed.stderr
    assert ("stopping the run: callback RaisingOnLog.on_log raised ValueError: boom in on_log\n"
            in failed.stderr)
    assert summary(only_run_dir(tmp_path / "failed"))["stop_reason"] == "callback failure"


@pytest.mark.parametrize("spec, message", [
    ("nosuchmodule_x:Name", "--callback: got 'nosuchmodule_x:Name'; allowed: a module that can be imported (no "
                            "module 'nosuchmodule_x'"),
    ("run_callbacks", "--callback: got 'run_callbacks'; allowed: module:Name (a dotted module name, ':', then a "
                      "name in that module)"),
    ("run_callbacks:Missing", "--callback: got 'run_callbacks:Missing' (module 'run_callbacks' has no 'Missing'); "
                              "allowed: a framework.train.Callback subclass taking no arguments, or a Callback "
                              "instance"),
    ("run_callbacks:NOT_A_CALLBACK", "--callback: got 'run_callbacks:NOT_A_CALLBACK' (NOT_A_CALLBACK is 3); "
                                     "allowed: a framework.train.Callback subclass"),
    ("run_callbacks:NeedsArgument", "--callback: got 'run_callbacks:NeedsArgument'; NeedsArgument() raised "
                                    "TypeError: "),
])
def test_a_callback_train_cannot_use_is_refused_in_one_line(tmp_path, spec, message):
    config = write_config(tmp_path / "c.yaml", cartpole_config())
    code, out, err = call_main(train_main, ["--config", str(config), "--logdir", str(tmp_path / "runs"),
                                            "--callback", spec])
    assert code == 2 and err.startswith(f"train: error: {message}"), err
    assert err.count("\n") == 1 and out == ""
    assert not (tmp_path / "runs").exists()


def test_a_callback_instance_is_taken_as_it_is():
    from framework.train.callbacks import load_callback
    import run_callbacks

    assert load_callback("run_callbacks:RECORDER") is run_callbacks.RECORDER
    assert type(load_callback("run_callbacks:Recorder")) is Recorder


@pytest.mark.parametrize("callbacks, message", [
    (Recorder, "callbacks=: got <class 'run_callbacks.Recorder'> (a class: pass an instance, Name()); allowed: "
               "instances of framework.train.Callback"),
    ([3], "callbacks=: got 3; allowed: instances of framework.train.Callback"),
    ("run_callbacks:Recorder", "callbacks=: got 'run_callbacks:Recorder'; allowed: a list of Callback instances"),
])
def test_run_refuses_what_is_not_a_callback(tmp_path, callbacks, message):
    with pytest.raises(ConfigError) as refused:
        run(cartpole_config(), logdir=tmp_path / "runs", callbacks=callbacks)
    assert str(refused.value) == message
    assert not (tmp_path / "runs").exists()


# -- run(resume=): train --resume from Python ----------------------------------------------------------
def test_run_resume_continues_the_run_as_train_resume_does(run_copy):
    before = summary(run_copy)
    recorder = Recorder()
    result = run(resume=run_copy, overrides=["trainer.total_steps=4000"], callbacks=[recorder])
    assert result.run_dir == run_copy and result.summary == summary(run_copy)
    assert result.summary["env_steps"] >= 4000 > before["env_steps"]
    assert result.summary["episodes"] > before["episodes"]
    assert recorder.events[0] == ("on_start", before["env_steps"], str(run_copy))


def test_run_resume_refuses_what_train_resume_refuses_with_the_same_line(run_copy):
    done = run_cli("train", "--resume", run_copy, "--set", "env.id=Acrobot-v1")
    with pytest.raises(ConfigError) as refused:
        run(resume=run_copy, overrides=["env.id=Acrobot-v1"])
    assert done.returncode == 2 and done.stderr == f"train: error: {refused.value}\n"
    with pytest.raises(ConfigError, match=r"^resume=: got it with config=, logdir=; allowed: resume= alone"):
        run(cartpole_config(), resume=run_copy, logdir="elsewhere")
    with pytest.raises(ConfigError, match=r"^config: got None; allowed: a YAML file's path or a mapping"):
        run()


def test_callback_defaults_do_nothing():
    callback = Callback()
    assert callback.on_log({"a": 1.0}) is None and callback.run_dir is None and callback.env_steps == 0
