"""`framework.train.run` from the places users call it: a script file, `python -c`, standard input, a Jupyter
kernel (real processes, spawned workers, runs of a few seconds), and what it refuses before anything starts."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from framework.train import ConfigError, RunFailed, run
from framework.train.api import factory_name
from run_configs import cartpole_config
from train_cli import CHECKOUT, CONFIGS, cli_env, only_run_dir, run_cli, summary, write_config

ENDS = ("max_seconds reached", "target_return reached")
"""How a short run of configs/a3c.yaml ends: CartPole may be solved within seconds."""
SHORT = ["trainer.max_seconds=3", "trainer.workers=1", "logging.tensorboard=false", "logging.progress=false"]
"""Overrides of configs/a3c.yaml for runs of a few seconds (spawned workers, as the shipped config says)."""
BY_STEPS = [*SHORT[1:], "trainer.total_steps=5000", "trainer.max_seconds=60"]
"""Overrides for a short run that takes steps however loaded the machine is: a 3-second budget counts the
worker's start-up, which a busy machine can spend whole; this run ends at 5,000 env steps instead."""


def _program(logdir: Path, *, guarded: bool) -> str:
    """A program that trains with run() and prints what the Run holds as one JSON line."""
    body = textwrap.dedent(f"""\
        import json
        from framework.train import run
        r = run({str(CONFIGS / 'a3c.yaml')!r}, {BY_STEPS!r}, logdir={str(logdir)!r})
        action, state = r.policy.act([0.0, 0.0, 0.0, 0.0])
        print(json.dumps({{"run_dir": str(r.run_dir), "summary": r.summary, "action": action, "state": state}}))
        """)
    if not guarded:
        return body
    return "if __name__ == '__main__':\n" + textwrap.indent(body, "    ")


def _check(done: subprocess.CompletedProcess, logdir: Path) -> None:
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    run_dir = only_run_dir(logdir)
    assert result["run_dir"] == str(run_dir) and result["summary"] == summary(run_dir)
    assert result["summary"]["stop_reason"] in ("total_steps reached", "target_return reached")
    assert result["summary"]["env_steps"] > 0
    assert result["action"] in (0, 1) and result["state"] is None
    assert (run_dir / "checkpoints" / "checkpoint.npz").is_file()


def test_run_from_a_script_file(tmp_path):
    script = tmp_path / "train_it.py"
    script.write_text(_program(tmp_path / "runs", guarded=True))
    _check(subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=cli_env()), tmp_path / "runs")


def test_run_from_python_c(tmp_path):
    _check(subprocess.run([sys.executable, "-c", _program(tmp_path / "runs", guarded=False)], capture_output=True,
                          text=True, timeout=120, env=cli_env()), tmp_path / "runs")


def test_run_from_standard_input(tmp_path):
    """Spawned workers are not sent to re-run a main module named '<stdin>' (they died of FileNotFoundError)."""
    _check(subprocess.run([sys.executable, "-"], input=_program(tmp_path / "runs", guarded=False),
                          capture_output=True, text=True, timeout=120, env=cli_env()), tmp_path / "runs")


def _kernel_run(code: list[str], env: dict, messages: list[dict] | None = None) -> list[str]:
    """What a real IPython kernel prints (stdout, and error lines as 'ERROR name: value') for each cell; every
    message of its output channel goes into `messages` too, when given."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(CHECKOUT), env=env, startup_timeout=90)
    outputs = []
    try:
        for cell in code:
            printed: list[str] = []

            def hook(msg: dict) -> None:
                if messages is not None:
                    messages.append(msg)
                if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                    printed.append(msg["content"]["text"])
                elif msg["msg_type"] == "error":
                    printed.append(f"ERROR {msg['content']['ename']}: {msg['content']['evalue']}")

            kc.execute_interactive(cell, timeout=120, output_hook=hook)
            outputs.append("".join(printed))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return outputs


def test_run_from_a_jupyter_kernel_and_its_refusal_of_a_notebook_class(tmp_path):
    logdir = tmp_path / "runs"
    trained, refused = _kernel_run([
        f"from framework.train import run\n"
        f"r = run('configs/a3c.yaml', {['trainer.max_seconds=10', *SHORT[1:]]!r}, logdir={str(logdir)!r})\n"
        f"print(r.summary['stop_reason'], r.run_dir)",
        "import gymnasium as gym\n"
        "class NotebookEnv(gym.Env):\n    pass\n"
        "try:\n    run('configs/a3c.yaml', env=NotebookEnv)\nexcept Exception as exc:\n"
        "    print(type(exc).__name__, exc)",
    ], cli_env())
    reason, _, run_dir = trained.rstrip("\n").partition(" reached ")
    assert f"{reason} reached" in ENDS and run_dir == str(only_run_dir(logdir)), trained
    assert summary(only_run_dir(logdir))["env_steps"] > 0
    assert refused == ("ConfigError env=: got __main__.NotebookEnv, defined in an interactive session (standard "
                       "input, python -c or a notebook) that worker processes cannot import; allowed: a class or "
                       "function defined in a module file: define it in a module file and import it\n"), refused


WIDGET = "application/vnd.jupyter.widget-view+json"


def test_run_in_a_notebook_shows_the_notebook_bar_and_the_outcome_line(tmp_path):
    """tqdm's notebook widget (ipywidgets) counts toward the budget and ends green; stdout ends with train's line."""
    messages: list[dict] = []
    quiet = [o for o in SHORT if not o.startswith("logging.progress")]
    shown, silent = _kernel_run([
        f"from framework.train import run\n"
        f"r = run('configs/a3c.yaml', {['trainer.max_seconds=4', *quiet[1:]]!r}, logdir={str(tmp_path / 'a')!r})",
        f"r = run('configs/a3c.yaml', {['trainer.max_seconds=2', *SHORT[1:]]!r}, logdir={str(tmp_path / 'b')!r})",
    ], cli_env(), messages)
    run_dir = only_run_dir(tmp_path / "a")
    assert shown.startswith(f"{run_dir}: ") and shown.count("\n") == 1, shown
    assert f"; {summary(run_dir)['env_steps']} env steps, " in shown
    assert silent == ""  # logging.progress: false
    widgets = [m for m in messages if m["msg_type"] == "display_data" and WIDGET in m["content"]["data"]]
    assert len(widgets) == 1, [m["msg_type"] for m in messages]
    states = [m["content"]["data"]["state"] for m in messages if m["msg_type"] == "comm_msg"
              and m["content"]["data"].get("method") == "update"]
    counted = [state["value"] for state in states if isinstance(state.get("value"), (int, float))]
    assert counted and max(counted) > 0, states  # the FloatProgress; its HTML neighbours hold text
    assert {"bar_style": "success"} in [{k: v for k, v in state.items() if k == "bar_style"} for state in states]


def test_run_ends_with_trains_outcome_line_unless_progress_is_off(tmp_path):
    code = ("from framework.train import run\n"
            "if __name__ == '__main__':\n"
            f"    run({str(CONFIGS / 'a3c.yaml')!r}, {SHORT[:-1]!r} + [__import__('sys').argv[1]], "
            f"logdir={str(tmp_path)!r} + '/' + __import__('sys').argv[1][-4:])\n")
    script = tmp_path / "outcome.py"
    script.write_text(code)
    for progress in ("logging.progress=true", "logging.progress=false"):
        done = subprocess.run([sys.executable, str(script), progress], capture_output=True, text=True, timeout=120,
                              env=cli_env())
        assert done.returncode == 0, done.stderr
        run_dir = only_run_dir(tmp_path / progress[-4:])
        if progress.endswith("true"):
            assert done.stdout.startswith(f"{run_dir}: {summary(run_dir)['stop_reason']}; ")
            assert done.stdout.count("\n") == 1
        else:
            assert done.stdout == ""


def test_a_bad_config_is_refused_with_the_commands_line_and_nothing_written(tmp_path):
    raw = {"optimizer": {"lr": -1}}
    done = run_cli("train", "--config", write_config(tmp_path / "bad.yaml", raw), "--logdir", tmp_path / "cli")
    with pytest.raises(ConfigError) as refused:
        run(raw, logdir=tmp_path / "api")
    assert done.stderr == f"train: error: {refused.value}\n"
    with pytest.raises(ConfigError, match=r"^config key 'trainer.workers': got 0; allowed: "):
        run(str(CONFIGS / "a3c.yaml"), ["trainer.workers=0"], logdir=tmp_path / "api")
    with pytest.raises(ConfigError, match=r"^overrides: got 'trainer.workers=1'; allowed: a list of key.path=value"):
        run(str(CONFIGS / "a3c.yaml"), "trainer.workers=1", logdir=tmp_path / "api")
    assert not (tmp_path / "api").exists()


def test_a_config_mapping_and_a_checked_config_run_like_the_file(tmp_path):
    raw = yaml.safe_load((CONFIGS / "a3c.yaml").read_text())
    from framework.train.config import load_config

    for source in (raw, load_config(raw)):
        result = run(source, [*SHORT, "trainer.max_seconds=1.5", "trainer.start_method=fork"],
                     logdir=tmp_path / "runs")
        assert result.summary["stop_reason"] in ENDS and result.run_dir.parent == tmp_path / "runs"
        assert yaml.safe_load((result.run_dir / "config.yaml").read_text())["trainer"]["max_seconds"] == 1.5


def test_a_failed_run_raises_run_failed_with_its_summary(tmp_path):
    config = cartpole_config(env={"id": "fault_envs:RaisingCartPole-v0"}, trainer={"workers": 1})
    with pytest.raises(RunFailed) as failed:
        run(config, logdir=tmp_path / "runs")
    run_dir = only_run_dir(tmp_path / "runs")
    assert failed.value.run_dir == run_dir and failed.value.summary == summary(run_dir)
    assert failed.value.summary["exit_code"] == 1
    assert str(failed.value) == f"run '{run_dir}' failed: {failed.value.summary['failure']}"
    assert "worker 0 raised an exception" in str(failed.value)


def _local_factory():
    def make():
        raise AssertionError("never called")
    return make


@pytest.mark.parametrize("factory, message", [
    (lambda: None, "env=: got test_python_api.<lambda>, which worker processes cannot import by name (a lambda "
                   "or a definition inside a function); allowed: a class or function defined at the top level of "
                   "a module file"),
    (_local_factory(), "env=: got test_python_api._local_factory.<locals>.make, which worker processes cannot "
                       "import by name"),
    ("CartPole-v1", "env=: got 'CartPole-v1'; allowed: a class or function defined at the top level of a module"),
])
def test_factories_workers_cannot_import_are_refused_before_anything_starts(tmp_path, factory, message):
    with pytest.raises(ConfigError) as refused:
        run(str(CONFIGS / "a3c.yaml"), env=factory, logdir=tmp_path / "runs")
    assert str(refused.value).startswith(message), refused.value
    assert not (tmp_path / "runs").exists()


def test_a_factory_is_named_by_module_and_qualified_name():
    from api_factories import ShortCartPole, small_actor_critic

    assert factory_name(ShortCartPole, "env") == "api_factories:ShortCartPole"
    assert factory_name(small_actor_critic, "model") == "api_factories:small_actor_critic"


def test_a_factory_of_the_running_script_is_named_by_the_scripts_module(tmp_path):
    """Spawned workers import the script by its file name from its directory; here that name is the script."""
    script = tmp_path / "my_script.py"
    script.write_text(textwrap.dedent("""\
        import sys
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv
        from framework.train.api import factory_name

        class MyCartPole(CartPoleEnv):
            pass

        if __name__ == "__main__":
            print(factory_name(MyCartPole, "env"), sys.modules["my_script"] is sys.modules["__main__"])
        """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=cli_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "my_script:MyCartPole True\n"


def test_a_factory_defined_under_python_c_is_refused():
    code = ("from gymnasium.envs.classic_control.cartpole import CartPoleEnv\n"
            "from framework.train import run, ConfigError\n"
            "class Mine(CartPoleEnv): pass\n"
            "try:\n    run('configs/a3c.yaml', env=Mine)\nexcept ConfigError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=cli_env(),
                          cwd=CHECKOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("env=: got __main__.Mine, defined in an interactive session"), done.stdout


# -- env= and model= end to end: these need the config keys env.id: module:Factory and model.factory ----------------
def test_run_with_an_env_class_and_a_model_factory(tmp_path):
    from api_factories import ShortCartPole, small_actor_critic

    result = run(cartpole_config(trainer={"max_seconds": 2, "workers": 1}), env=ShortCartPole,
                 model=small_actor_critic, logdir=tmp_path / "runs")
    config = yaml.safe_load((result.run_dir / "config.yaml").read_text())
    assert config["env"]["id"] == "api_factories:ShortCartPole"
    assert config["model"]["factory"] == "api_factories:small_actor_critic"
    assert result.policy.model.body[0].weight.shape == (16, 4)


def test_run_with_an_env_class_of_the_running_script(tmp_path):
    script = tmp_path / "script_env.py"
    script.write_text(textwrap.dedent(f"""\
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv
        from framework.train import run

        class ScriptCartPole(CartPoleEnv):
            pass

        if __name__ == "__main__":
            r = run({str(CONFIGS / 'a3c.yaml')!r}, {SHORT!r}, env=ScriptCartPole, logdir={str(tmp_path / 'runs')!r})
            print(r.summary["stop_reason"])
        """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=cli_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ENDS
