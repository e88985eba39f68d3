"""`tune` and `framework.train.tune`: real Optuna studies in SQLite, each trial a real run of a few seconds; the
search space checked in one line; the reports read back."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from extras import TUNE
from framework.train import ConfigError
from framework.train.cli import tune_main
from framework.train.config import load_config
from framework.train.tune_space import load_space
from run_configs import cartpole_config, hogwild_config
from train_cli import call_main, cli_env, run_cli, start_cli, summary, write_config

pytestmark = TUNE

SPACE = {"optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
         "model.hidden": {"type": "categorical", "choices": [[16], [32, 32]]}}
PNG = b"\x89PNG\r\n\x1a\n"


def _trial_config(max_seconds: float = 1.5) -> dict:
    return cartpole_config(total_steps=10**7, max_seconds=max_seconds, trainer={"workers": 1})


def _files(tmp_path, config=None, space=None):
    return (write_config(tmp_path / "config.yaml", config or _trial_config()),
            write_config(tmp_path / "space.yaml", space or SPACE))


def _tune(tmp_path, *extra, timeout=300, env=None):
    config, space = _files(tmp_path)
    return run_cli("tune", "--config", config, "--space", space, "--logdir", tmp_path / "runs", *extra,
                   timeout=timeout, env=env)


def _study(directory):
    import optuna

    return optuna.load_study(study_name=directory.name, storage=f"sqlite:///{directory / 'study.db'}")


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    """A study of three complete trials (tune --trials 3); read-only."""
    tmp_path = tmp_path_factory.mktemp("tune")
    done = _tune(tmp_path, "--trials", "3")
    assert done.returncode == 0, done.stderr
    return tmp_path / "runs" / "tune-test"


def test_a_study_runs_its_trials_as_runs_and_writes_its_reports(study_dir):
    study = _study(study_dir)
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3
    for trial in trials:
        run_dir = trial.user_attrs["run_dir"]
        saved = summary(Path(run_dir))
        assert trial.value == saved["mean_return"] and saved["stop_reason"] == "max_seconds reached"
        assert os.path.dirname(run_dir) == str(study_dir) and os.path.basename(run_dir).startswith(
            f"test-trial{trial.number}-")
        config = yaml.safe_load(open(os.path.join(run_dir, "config.yaml")))
        assert config["optimizer"]["lr"] == trial.params["optimizer.lr"]
        assert config["model"]["hidden"] == yaml.safe_load(trial.params["model.hidden"])
        hparams = load_config(_trial_config())["logging"]["hparams"]  # TensorBoard's HParams show the space's keys
        assert config["logging"]["hparams"] == list(dict.fromkeys([*hparams, "optimizer.lr", "model.hidden"]))
        assert len(trial.intermediate_values) >= 3  # a report every log interval (0.2 s) of a 1.5 s run
    best = study.best_trial
    best_yaml = study_dir / "best.yaml"
    assert best_yaml.read_text().startswith(f"# tune: trial {best.number} of study tune-test, mean_return ")
    config = load_config(str(best_yaml))
    assert config["optimizer"]["lr"] == best.params["optimizer.lr"] and config["logging"]["logdir"] == str(
        study_dir.parent)
    assert config["experiment"] == "test"
    rows = list(csv.DictReader(open(study_dir / "trials.csv")))
    assert [row["number"] for row in rows] == ["0", "1", "2"] and {row["state"] for row in rows} == {"complete"}
    assert [float(row["value"]) for row in rows] == [t.value for t in trials]
    assert rows[0]["model.hidden"] == trials[0].params["model.hidden"]
    table = (study_dir / "trials.md").read_text().splitlines()
    assert table[0] == ("| number | state | value | model.hidden | optimizer.lr | env_steps | wall_seconds | "
                        "stop_reason | run_dir |") and len(table) == 5  # the space file's order (safe_dump sorts)
    for plot in ("history.png", "importance.png"):
        assert (study_dir / plot).read_bytes().startswith(PNG)


@pytest.mark.slow
def test_the_same_command_with_more_trials_continues_the_study(study_dir, tmp_path):
    import shutil

    copy = shutil.copytree(study_dir.parent.parent, tmp_path / "copy")
    directory = copy / "runs" / "tune-test"
    before = [(t.number, t.value) for t in _study(directory).get_trials()]
    config, space = _files(tmp_path)
    done = run_cli("tune", "--config", config, "--space", space, "--logdir", copy / "runs", "--trials", "4")
    assert done.returncode == 0, done.stderr
    assert "study tune-test (" in done.stderr and "3 of 4 trials done, 1 to run" in done.stderr
    after = _study(directory).get_trials()
    assert [(t.number, t.value) for t in after[:3]] == before and len(after) == 4
    assert done.stdout.startswith(f"{directory}: 4 trials (4 complete); best: trial ")
    again = run_cli("tune", "--config", config, "--space", space, "--logdir", copy / "runs", "--trials", "2")
    assert again.returncode == 0 and "4 of 2 trials done, 0 to run" in again.stderr
    assert len(_study(directory).get_trials()) == 4


def test_tune_from_python_returns_the_best_trial(tmp_path):
    from framework.train import tune

    config, space = _files(tmp_path)
    result = tune(str(config), str(space), 2, logdir=tmp_path / "runs", name="from-python", pruner="none")
    assert result.directory == tmp_path / "runs" / "from-python" and result.stopped_by is None
    best = result.study.best_trial
    assert result.best_value == best.value and result.best_run_dir == Path(
        best.user_attrs["run_dir"])
    assert result.best_params["optimizer.lr"] == best.params["optimizer.lr"]
    assert result.best_config["optimizer"]["lr"] == best.params["optimizer.lr"]
    assert sorted(p.name for p in result.reports) == sorted(["best.yaml", "trials.csv", "trials.md", "history.png",
                                                            "importance.png"])


def test_the_pruner_stops_a_trial_below_the_median_of_earlier_ones(tmp_path):
    """Five earlier trials whose value was 1000 at every interval: the next is pruned once past its warm-up."""
    import optuna

    directory = tmp_path / "runs" / "tune-test"
    directory.mkdir(parents=True)
    study = optuna.create_study(study_name="tune-test", storage=f"sqlite:///{directory / 'study.db'}",
                                direction="maximize")
    distribution = optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    for _ in range(5):
        study.add_trial(optuna.trial.create_trial(params={"optimizer.lr": 1e-3},
                                                  distributions={"optimizer.lr": distribution}, value=1000.0,
                                                  intermediate_values={step: 1000.0 for step in range(1, 200)}))
    config, space = _files(tmp_path, _trial_config(30), {"optimizer.lr": SPACE["optimizer.lr"]})
    done = run_cli("tune", "--config", config, "--space", space, "--logdir", tmp_path / "runs", "--trials", "6")
    assert done.returncode == 0, done.stderr
    trial = _study(directory).get_trials()[-1]
    assert trial.state.name == "PRUNED"
    saved = summary(Path(trial.user_attrs["run_dir"]))
    assert saved["stop_reason"] == "stopped by callback OptunaPruning" and saved["wall_seconds"] < 30
    assert f"trial 5: pruned at log interval " in done.stderr


def test_ctrl_c_stops_the_current_trial_cleanly_and_keeps_the_study(tmp_path):
    config, space = _files(tmp_path, _trial_config(60))
    proc = start_cli("tune", "--config", config, "--space", space, "--logdir", tmp_path / "runs", "--trials", "3")
    directory = tmp_path / "runs" / "tune-test"
    deadline = time.monotonic() + 120
    while not list(directory.glob("test-trial0-*/checkpoints")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    other = _tune(tmp_path, "--trials", "3")  # the same study, from a second tune, while the first runs
    assert other.returncode == 2
    assert other.stderr == (f"tune: error: study directory '{directory}' is in use by another tune; allowed: one "
                            f"tune at a time on a study in SQLite (--jobs runs trials at once; --storage lets "
                            f"several machines share a study)\n")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    (trial,) = _study(directory).get_trials()
    assert trial.state.name == "FAIL"
    run_dir = Path(trial.user_attrs["run_dir"])
    assert summary(run_dir)["stop_reason"] == "SIGINT" and (run_dir / "checkpoints" / "checkpoint.npz").is_file()
    assert "stopped by SIGINT: the same command continues the study" in out
    assert (directory / "trials.csv").is_file() and not (directory / "best.yaml").exists()


def test_a_trial_left_running_by_a_killed_tune_is_marked_failed(tmp_path):
    import optuna

    directory = tmp_path / "runs" / "tune-test"
    directory.mkdir(parents=True)
    study = optuna.create_study(study_name="tune-test", storage=f"sqlite:///{directory / 'study.db'}",
                                direction="maximize")
    study.ask()  # as a tune killed with SIGKILL leaves it
    done = _tune(tmp_path, "--trials", "1")
    assert done.returncode == 0, done.stderr
    assert "trial 0: left running by a tune that did not finish it; marked failed" in done.stderr
    assert [t.state.name for t in _study(directory).get_trials()] == ["FAIL", "COMPLETE"]


@pytest.mark.slow
def test_jobs_run_trials_in_processes_of_their_own(tmp_path):
    done = _tune(tmp_path, "--trials", "2", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "runs" / "tune-test"
    assert "2 to run, 2 at a time" in done.stderr
    trials = _study(directory).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    assert len({t.user_attrs["run_dir"] for t in trials}) == 2


def test_another_storage_holds_the_study_and_the_trials_stay_in_the_study_directory(tmp_path):
    import optuna

    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    done = _tune(tmp_path, "--trials", "1", "--storage", url, "--name", "shared", "--metric", "mean_return",
                 "--pruner", "none")
    assert done.returncode == 0, done.stderr
    (trial,) = optuna.load_study(study_name="shared", storage=url).get_trials()
    assert os.path.dirname(trial.user_attrs["run_dir"]) == str(tmp_path / "runs" / "shared")
    assert not (tmp_path / "runs" / "shared" / "study.db").exists()


def test_metric_eval_is_the_final_evaluation(tmp_path):
    config, space = _files(tmp_path, cartpole_config(total_steps=10**7, max_seconds=2, trainer={
        "workers": 1, "eval_every_s": 0.5, "eval_episodes": 3}), {"optimizer.lr": SPACE["optimizer.lr"]})
    done = run_cli("tune", "--config", config, "--space", space, "--logdir", tmp_path / "runs", "--trials", "1",
                   "--metric", "eval")
    assert done.returncode == 0, done.stderr
    (trial,) = _study(tmp_path / "runs" / "tune-test").get_trials()
    assert trial.value == summary(Path(trial.user_attrs["run_dir"]))["evaluation"]["return_mean"]
    assert trial.intermediate_values


@pytest.mark.parametrize("extra, message", [
    (["--trials", "0"], "argument --trials: got 0; allowed: an integer from 1 to 100000"),
    (["--trials", "2", "--jobs", "0"], "argument --jobs: got 0; allowed: an integer from 1 to 256"),
    (["--trials", "2", "--metric", "loss"], "argument --metric: invalid choice: 'loss'"),
    (["--trials", "2", "--pruner", "hyperband"], "argument --pruner: invalid choice: 'hyperband'"),
    (["--trials", "2", "--metric", "eval"], "error: metric: got 'eval' with trainer.eval_every_s 0 (no evaluation); "
                                            "allowed: mean_return, or set trainer.eval_every_s > 0"),
    (["--trials", "2", "--storage", "nosuchdb://x"], "error: storage 'nosuchdb://x': cannot open the study ("),
    (["--trials", "2", "--name", "Bad Name"], "error: name: got 'Bad Name'; allowed: a name of lower-case letters"),
    (["--trials", "2", "--set", "optimizer.lr=-1"], "error: config key 'optimizer.lr': got -1; allowed: a number > 0"),
])
def test_bad_arguments_are_refused_in_one_line(tmp_path, extra, message):
    config, space = _files(tmp_path)
    code, out, err = call_main(tune_main, ["--config", str(config), "--space", str(space), "--logdir",
                                           str(tmp_path / "runs"), *extra])
    assert code == 2 and err.startswith(f"tune: {message}" if message.startswith("error") else
                                        f"tune: error: {message}"), err
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_config_without_returns_is_refused(tmp_path):
    config = write_config(tmp_path / "hw.yaml", hogwild_config())
    space = write_config(tmp_path / "space.yaml", {"optimizer.lr": SPACE["optimizer.lr"]})
    code, _, err = call_main(tune_main, ["--config", str(config), "--space", str(space), "--trials", "1"])
    assert code == 2 and err == ("tune: error: metric: got 'mean_return' for algorithm hogwild, whose runs have no "
                                 "return; allowed: configs of an algorithm that plays an environment\n")


@pytest.mark.parametrize("space, message", [
    ({}, "space: got {}; allowed: a mapping of config keys to distributions, e.g. optimizer.lr: {type: float, "
         "low: 1e-4, high: 1e-2, log: true}"),
    ([1], "space: got [1]; allowed: a mapping of config keys"),
    ({"optimizer lr": {"type": "float", "low": 1, "high": 2}}, "space key 'optimizer lr': not a config key path"),
    ({"optimizer.lr": 0.1}, "space key 'optimizer.lr': got 0.1; allowed: a distribution, e.g. optimizer.lr: "
                            "{type: float, low: 1e-4, high: 1e-2, log: true}"),
    ({"optimizer.lr": {"type": "normal"}}, "space key 'optimizer.lr.type': got 'normal'; allowed: float, int or "
                                           "categorical"),
    ({"optimizer.lr": {"type": "float", "low": 1e-4}}, "space key 'optimizer.lr': no high; allowed: a distribution "
                                                        "with low and high"),
    ({"optimizer.lr": {"type": "float", "low": "x", "high": 1}}, "space key 'optimizer.lr.low': got 'x'; allowed: a "
                                                                 "number"),
    ({"optimizer.lr": {"type": "float", "low": 0.1, "high": 0.01}}, "space key 'optimizer.lr': low 0.1 is above "
                                                                    "high 0.01; allowed: low <= high"),
    ({"optimizer.lr": {"type": "float", "low": 0, "high": 0.01, "log": True}},
     "space key 'optimizer.lr.low': got 0 with log: true; allowed: a number > 0"),
    ({"optimizer.lr": {"type": "float", "low": 0.001, "high": 0.01, "log": True, "step": 0.001}},
     "space key 'optimizer.lr.step': got 0.001 with log: true; allowed: a number > 0, without log"),
    ({"optimizer.lr": {"type": "float", "low": 0.001, "high": 0.01, "scale": 2}},
     "space key 'optimizer.lr': unknown field 'scale' for type float; allowed: type, low, high, log, step"),
    ({"trainer.workers": {"type": "int", "low": 1.5, "high": 4}}, "space key 'trainer.workers.low': got 1.5; "
                                                                  "allowed: an integer"),
    ({"model.hidden": {"type": "categorical", "choices": []}}, "space key 'model.hidden.choices': got []; allowed: "
                                                               "a list of 1 to 1024 values"),
    ({"optimizer.lr": {"type": "float", "low": 0, "high": 0.01}},
     "space key 'optimizer.lr': the config refuses 0.0: config key 'optimizer.lr': got 0.0; allowed: a number > 0"),
    ({"optimizer.lrr": {"type": "float", "low": 0.1, "high": 0.2}},
     "space key 'optimizer.lrr': the config refuses 0.1: config key 'optimizer.lrr': unknown key; allowed here: "),
    ({"optimizer": {"type": "categorical", "choices": ["adam"]}},
     "space key 'optimizer': the config refuses 'adam': config key 'optimizer': got 'adam'; allowed: a mapping"),
    ({"logging.logdir": {"type": "categorical", "choices": ["a"]}},
     "space key 'logging.logdir': tune sets it for each trial; allowed: other config keys"),
])
def test_a_bad_space_is_refused_in_one_line_naming_the_key(space, message):
    with pytest.raises(ConfigError) as refused:
        load_space(space, _trial_config(), [])
    assert str(refused.value).startswith(message), refused.value
    assert "\n" not in str(refused.value)


def test_a_bad_space_file_exits_2_with_its_line(tmp_path):
    config, space = _files(tmp_path, space={"optimizer.lr": {"type": "float", "low": 0.1, "high": 0.01}})
    done = run_cli("tune", "--config", config, "--space", space, "--trials", "1", "--logdir", tmp_path / "runs")
    assert done.returncode == 2 and done.stderr == ("tune: error: space key 'optimizer.lr': low 0.1 is above high "
                                                    "0.01; allowed: low <= high\n")
    missing = run_cli("tune", "--config", config, "--space", tmp_path / "none.yaml", "--trials", "1")
    assert missing.returncode == 2 and missing.stderr.startswith("tune: error: ") and "none.yaml" in missing.stderr
    assert not (tmp_path / "runs").exists()


def test_1e_4_in_yaml_is_a_number_and_ints_and_categoricals_reach_the_config():
    space = load_space({"optimizer.lr": {"type": "float", "low": "1e-4", "high": "1e-2", "log": True},
                        "trainer.workers": {"type": "int", "low": 1, "high": 3, "step": 2},
                        "model.activation": {"type": "categorical", "choices": ["relu", "tanh"]}}, _trial_config(), [])
    assert space.dimensions[0].low == 1e-4 and space.dimensions[1].step == 2
    overrides = space.overrides({"optimizer.lr": 0.001, "trainer.workers": 3, "model.activation": "tanh"})
    config = load_config(_trial_config(), overrides)
    assert (config["optimizer"]["lr"], config["trainer"]["workers"], config["model"]["activation"]) == (
        0.001, 3, "tanh")
