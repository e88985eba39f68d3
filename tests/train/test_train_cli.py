"""Bad configs and arguments through the real `train`/`evaluate` commands: exit 2, one line, no traceback."""
import subprocess
import sys
from pathlib import Path

import pytest

from framework.train.cli import evaluate_main, train_main
from run_configs import cartpole_config
from train_cli import call_main, cli_command, cli_env, start_cli, write_config

CASES = {
    "unknown key": ({"trainer": {"wrokers": 2}}, [], "config key 'trainer.wrokers': unknown key; allowed here: "),
    "wrong type": ({"trainer": {"workers": "two"}}, [], "config key 'trainer.workers': got 'two'; allowed: an integer"),
    "bad choice": ({"trainer": {"start_method": "thread"}}, [],
                   "config key 'trainer.start_method': got 'thread'; allowed: one of spawn, forkserver, fork"),
    "out of range": ({"optimizer": {"lr": -1}}, [], "config key 'optimizer.lr': got -1; allowed: a number > 0"),
    "unknown env": ({"env": {"id": "NoSuchEnv-v9"}}, [], "config key 'env.id': got 'NoSuchEnv-v9'; allowed: a "
                                                        "registered gymnasium environment id"),
    "cuda with fork": ({"trainer": {"device": "cuda:0", "start_method": "fork"}}, [],
                       "config key 'trainer.start_method': got 'fork' with trainer.device 'cuda:0'; allowed: spawn "
                       "or forkserver"),
    "--set bad value": ({}, ["--set", "trainer.on_worker_failure=ignore"],
                        "config key 'trainer.on_worker_failure': got 'ignore'; allowed: one of abort, restart"),
    "--set unknown key": ({}, ["--set", "optimizer.learning_rate=0.1"],
                          "config key 'optimizer.learning_rate': unknown key"),
    "--set no equals": ({}, ["--set", "optimizer.lr"], "--set 'optimizer.lr': not of the form key.path=value"),
}


@pytest.mark.timeout(180)
def test_every_bad_config_exits_2_with_one_line(tmp_path):
    """All cases run at once (one process each) to keep the suite fast; each is checked on its own."""
    logdir = tmp_path / "runs"
    procs = {}
    for i, (name, (sections, extra, _)) in enumerate(CASES.items()):
        raw = cartpole_config()
        for section, values in sections.items():
            raw[section].update(values)
        config = write_config(tmp_path / f"case{i}.yaml", raw)
        procs[name] = start_cli("train", "--config", config, "--logdir", logdir, *extra)
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text("trainer: {workers: 2\nseed: 1\n")
    tagged = tmp_path / "tagged.yaml"
    tagged.write_text("seed: !!python/object/apply:os.system ['echo pwned']\n")
    not_a_mapping = tmp_path / "list.yaml"
    not_a_mapping.write_text("- 1\n- 2\n")
    procs["missing file"] = start_cli("train", "--config", tmp_path / "nope.yaml")
    procs["malformed YAML"] = start_cli("train", "--config", malformed)
    procs["python tag"] = start_cli("train", "--config", tagged)
    procs["not a mapping"] = start_cli("train", "--config", not_a_mapping)
    procs["no config"] = start_cli("train")
    procs["config and resume"] = start_cli("train", "--config", malformed, "--resume", tmp_path)
    procs["resume and logdir"] = start_cli("train", "--resume", tmp_path, "--logdir", logdir)
    procs["resume missing dir"] = start_cli("train", "--resume", tmp_path / "nowhere")
    procs["resume without config.yaml"] = start_cli("train", "--resume", tmp_path)
    procs["evaluate no run"] = start_cli("evaluate", "--run", tmp_path / "nowhere")
    procs["evaluate bad episodes"] = start_cli("evaluate", "--run", tmp_path, "--episodes", "0")
    procs["unknown argument"] = start_cli("train", "--config", malformed, "--wat")
    expected = {name: message for name, (_, _, message) in CASES.items()}
    expected.update({
        "missing file": f"config file '{tmp_path / 'nope.yaml'}': not found; allowed: a path to a YAML file",
        "malformed YAML": f"config file '{malformed}' at line 2, column 5: malformed YAML (expected ',' or '}}'",
        "python tag": f"config file '{tagged}' at line 1: could not determine a constructor for the tag",
        "not a mapping": "config: got [1, 2]; allowed: a mapping of sections",
        "no config": ("give either --config PATH or --env ID (a new run) or --resume RUN_DIR (continue one) "
                      "(usage: train "),
        "config and resume": "give either --config PATH or --env ID (a new run) or --resume RUN_DIR",
        "resume and logdir": "--logdir applies to new runs only; a resumed run continues in its RUN_DIR",
        "resume missing dir": f"run directory '{tmp_path / 'nowhere'}': not found; allowed: a directory made by train",
        "resume without config.yaml": f"run directory '{tmp_path}': holds no config.yaml",
        "evaluate no run": f"run directory '{tmp_path / 'nowhere'}': not found",
        "evaluate bad episodes": "argument --episodes: got 0; allowed: an integer from 1 to 10000",
        "unknown argument": "unrecognized arguments: --wat",
    })
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        command = "evaluate" if name.startswith("evaluate") else "train"
        assert proc.returncode == 2, (name, err)
        assert err.startswith(f"{command}: error: {expected[name]}"), (name, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (name, err)
        assert out == "", (name, out)
    assert not logdir.exists() or not any(logdir.iterdir())  # no run directory for a refused config


@pytest.mark.parametrize("command", ["train", "evaluate", "tune"])
def test_installed_console_scripts_run_the_cli(command):
    """The console scripts of `pip install -e .` (next to this interpreter) are the same commands."""
    script = Path(sys.executable).parent / command
    if command == "tune" and not script.exists():
        pytest.skip("no console script tune: the package was installed before it had one (pip install -e .)")
    argv = [str(script)]
    if command == "tune" and "framework.train.cli" not in script.read_text(errors="replace"):
        # Ray's `tune` script, written after hogshare's: docs/tuning.md's way round it must be hogshare's command
        argv = cli_command("tune")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=cli_env())
    assert done.returncode == 2
    assert done.stderr.startswith(f"{command}: error: ") and len(done.stderr.strip().splitlines()) == 1


# -- numbers out of range, too many overrides: exit 2 and one line (fuzzed in tests/reliability) ----


@pytest.mark.parametrize("argv, message", [
    (["--run", "r", "--episodes", str(10**12)], "argument --episodes: got 1000000000000; allowed: an integer from 1 "
                                                "to 10000"),
    (["--run", "r", "--seed", "-1"], "argument --seed: got -1; allowed: an integer from 0 to 2147483647"),
    (["--run", "r", "--episodes", "1" * 5000], "argument --episodes: invalid int value: '11111"),
])
def test_out_of_range_evaluate_numbers(argv, message):
    code, _, err = call_main(evaluate_main, argv)
    assert code == 2 and err.startswith(f"evaluate: error: {message}"), err


def test_too_many_overrides_are_refused(tmp_path):
    config = write_config(tmp_path / "c.yaml", cartpole_config())
    code, _, err = call_main(train_main, ["--config", str(config), *["--set", "seed=1"] * 1001])
    assert code == 2 and err.startswith("train: error: argument --set: given 1001 times; allowed: at most 1000 (usage:")


@pytest.mark.parametrize("name", ["runs #2", "yes", "[a]", "1e3", "x: y"])
def test_logdir_is_taken_as_a_path_whatever_yaml_would_make_of_it(tmp_path, name):
    config = write_config(tmp_path / "c.yaml", cartpole_config(trainer={"total_steps": 200, "workers": 1}))
    code, _, err = call_main(train_main, ["--config", str(config), "--logdir", str(tmp_path / name)])
    assert code == 0, err
    assert len(list((tmp_path / name).iterdir())) == 1
