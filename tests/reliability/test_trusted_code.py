"""What a run directory's config.yaml can make hogshare import: code it names runs only for runs this user's `train`
wrote (config.yaml signed with the user's key) or with `--trust-code` / `trust_code=True`."""
import os
import re
import shlex
import shutil
import stat

import pytest
import yaml

from framework.train import ConfigError, load_policy
from reliability_support import fast_config, only_run_dir, run_cli, short_run, write_config
from train_cli import snapshot

pytestmark = pytest.mark.timeout(180)

MARKER_MODULE = """
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("imported")
from custom_envs import MoveToGoal as X, MyA3C as Plugin, tiny_model as factory
"""
CODE = {  # the config key naming code, the sections that name it, and how the refusal shows it
    "env.id": ({"env": {"id": "os:system", "kwargs": {"command": "mkdir {marker}"}}}, "env.id 'os:system'"),
    "model.factory": ({"env": {"id": "CartPole-v1"}, "model": {"factory": "evilmod:factory"}},
                      "model.factory 'evilmod:factory'"),
    "algorithm.name": ({"env": {"id": "CartPole-v1"}, "algorithm": {"name": "evilmod:Plugin"}},
                       "algorithm.name 'evilmod:Plugin'"),
}


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory):
    """A short run of this user's train (a built-in env), its config.yaml signed under the suite's key."""
    return short_run(tmp_path_factory.mktemp("signed"), total_steps=1000)


def _one_line(done, command: str) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"{command}: error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


def _elsewhere(signed_run, tmp_path, key: str):
    """A copy of signed_run whose config.yaml (written by someone else: no signature) names code under key, and an
    empty working directory holding evilmod.py, which leaves imported.marker beside it when imported."""
    run_dir = shutil.copytree(signed_run, tmp_path / "from-elsewhere")
    work = tmp_path / "work"
    work.mkdir()
    (work / "evilmod.py").write_text(MARKER_MODULE)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    sections, shown = CODE[key]
    for name, values in sections.items():
        config[name].update(yaml.safe_load(yaml.safe_dump(values).replace("{marker}", str(work / "imported.marker"))))
    write_config(run_dir / "config.yaml", config)
    return run_dir, work, shown


@pytest.mark.fault("S", "a run directory from elsewhere whose config.yaml names code: `env.id: os:system` with a "
                        "command, `model.factory` and `algorithm.name` in a module of the working directory that "
                        "leaves a marker when imported; through `evaluate --run`, `evaluate --export`, `train "
                        "--resume` and `load_policy`",
                   "each refused with exit 2 (a ConfigError in Python) before anything is imported: one line naming "
                   "the key and its code, saying the run was not written by this user's train and naming "
                   "--trust-code; no marker, the run directory byte-identical (today: the command runs, then "
                   "`which returned a int`); with --trust-code the code runs (the control)")
@pytest.mark.parametrize("key", list(CODE))
def test_code_named_by_a_run_from_elsewhere_is_imported_only_with_trust_code(watch, signed_run, tmp_path, key):
    run_dir, work, shown = _elsewhere(signed_run, tmp_path, key)
    before = snapshot(run_dir)
    refusal = (f"error: run directory '{run_dir}': its config.yaml names code to import ({shown}) and was not written "
               f"by this user's train (no valid signature); allowed: a run you trust, with --trust-code")
    for command, args in (("evaluate", ["--run", run_dir, "--episodes", 1]),
                          ("evaluate", ["--run", run_dir, "--export", tmp_path / "p.safetensors"]),
                          ("train", ["--resume", run_dir])):
        message = _one_line(run_cli(watch, *args, command=command, cwd=work), command)
        assert message.startswith(f"{command}: {refusal}"), message
    cwd = os.getcwd()
    os.chdir(work)
    try:
        with pytest.raises(ConfigError, match=re.escape(refusal.removeprefix("error: "))):
            load_policy(run_dir)
    finally:
        os.chdir(cwd)
    assert not (work / "imported.marker").exists() and snapshot(run_dir) == before
    run_cli(watch, "--run", run_dir, "--episodes", 1, "--trust-code", command="evaluate", cwd=work)
    assert (work / "imported.marker").exists()  # the control: trusted, the code named does run


@pytest.mark.fault("S", "runs of this user's own train that name code (a custom env), with a fresh config "
                        "directory ($XDG_CONFIG_HOME); then the same run under another user's key, with its "
                        "config.yaml edited, and with the key file made readable by others",
                   "the key is made on first use, mode 0600; `evaluate --run` and `train --resume` load the run "
                   "with no flag and the end line's `next:` commands run as printed; another key, an edited "
                   "config.yaml or a key readable by others refuse it (the latter naming chmod 600); a run of a "
                   "built-in env loads whoever wrote it")
def test_runs_of_this_users_train_load_with_no_flag(watch, tmp_path):
    home = tmp_path / "config-home"
    env = watch.env(XDG_CONFIG_HOME=str(home))
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "custom_envs:MoveToGoal"}, trainer={"total_steps": 1000}))
    done = run_cli(watch, "--config", config, "--logdir", tmp_path / "runs", env=env)
    assert done.returncode == 0, done.stderr
    key = home / "hogshare" / "trust.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    run_dir = only_run_dir(tmp_path / "runs")
    assert (run_dir / "config.yaml").read_text().startswith("# hogshare-signature: hmac-sha256:")
    evaluate = next(line for line in done.stdout.splitlines() if "evaluate --run" in line).split("next: ")[1]
    resume = next(line for line in done.stdout.splitlines() if "train --resume" in line).strip()
    assert "--trust-code" not in done.stdout
    evaluated = run_cli(watch, *shlex.split(evaluate)[1:], command="evaluate", env=env)
    assert evaluated.returncode == 0, evaluated.stderr
    resumed = run_cli(watch, *shlex.split(resume)[1:], env=env)
    assert resumed.returncode == 0, resumed.stderr

    other = watch.env(XDG_CONFIG_HOME=str(tmp_path / "another-users-home"))
    message = _one_line(run_cli(watch, "--run", run_dir, command="evaluate", env=other), "evaluate")
    assert "names code to import (env.id 'custom_envs:MoveToGoal') and was not written by this user's" in message
    key.chmod(0o644)
    message = _one_line(run_cli(watch, "--run", run_dir, command="evaluate", env=env), "evaluate")
    assert message.startswith(f"evaluate: error: key file '{key}' is not this user's alone (mode 0644"), message
    assert "chmod 600 it" in message
    key.chmod(0o600)
    (run_dir / "config.yaml").write_text((run_dir / "config.yaml").read_text() + "# edited\n")
    message = _one_line(run_cli(watch, "--run", run_dir, command="evaluate", env=env), "evaluate")
    assert "was not written by this user's train" in message

    builtin = write_config(tmp_path / "b.yaml", fast_config(trainer={"total_steps": 500}))
    done = run_cli(watch, "--config", builtin, "--logdir", tmp_path / "builtin", env=env)
    assert done.returncode == 0, done.stderr
    evaluated = run_cli(watch, "--run", only_run_dir(tmp_path / "builtin"), "--episodes", 1, command="evaluate",
                        env=other)
    assert evaluated.returncode == 0, evaluated.stderr


@pytest.mark.fault("S", "a run naming code whose config.yaml cannot be signed: the key file is readable by others "
                        "when train starts",
                   "the run trains (exit 0) and says in one line that its config.yaml is not signed; the end "
                   "line's `next:` commands carry --trust-code, and run as printed")
def test_an_unsigned_run_says_so_and_its_next_commands_carry_trust_code(watch, tmp_path):
    home = tmp_path / "config-home"
    (home / "hogshare").mkdir(parents=True)
    key = home / "hogshare" / "trust.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    env = watch.env(XDG_CONFIG_HOME=str(home))
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "custom_envs:MoveToGoal"}, trainer={"total_steps": 1000}))
    done = run_cli(watch, "--config", config, "--logdir", tmp_path / "runs", env=env)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^config\.yaml is not signed as this user's \(key file .* is not this user's alone .*\): "
                     r"evaluate --run and train --resume of this run import its code \(env\.id "
                     r"'custom_envs:MoveToGoal'\) only with --trust-code$", done.stderr, re.MULTILINE), done.stderr
    evaluate = next(line for line in done.stdout.splitlines() if "evaluate --run" in line).split("next: ")[1]
    resume = next(line for line in done.stdout.splitlines() if "train --resume" in line).strip()
    assert evaluate.endswith("--trust-code") and "--trust-code" in resume
    evaluated = run_cli(watch, *shlex.split(evaluate)[1:], command="evaluate", env=env)
    assert evaluated.returncode == 0, evaluated.stderr
    resumed = run_cli(watch, *shlex.split(resume)[1:], env=env)
    assert resumed.returncode == 0, resumed.stderr
