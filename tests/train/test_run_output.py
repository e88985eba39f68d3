"""What `train` and `evaluate` tell the person running them: the outcome line and the commands that come next,
the run directory's name, counts in the algorithm's units, returns to 3 significant figures (1e300 rewards too),
strict JSON in summary.json (null for NaN), and the progress bar counting toward the budget that ends the run."""
import io
import json
import re
import shlex

import pytest

from framework.runtime.formatting import finite_json, significant
from framework.train.progress import Progress
from run_configs import cartpole_config, hogwild_config
from framework.train.config import load_config
from train_cli import CONFIGS, run_cli, train


def _strict_json(text: str) -> dict:
    """json.loads that refuses NaN and infinities, as strict JSON parsers do."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _summary(run_dir) -> dict:
    return _strict_json((run_dir / "summary.json").read_text())


def _next_commands(stdout: str) -> list[list[str]]:
    """The commands train prints after 'next:' (one a line), each as argv."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("next: "))
    return [shlex.split(line.removeprefix("next: ")) for line in lines[start:]]


@pytest.mark.parametrize("value, shown", [(9.333333, "9.33"), (-1234.5, "-1230"), (475.0, "475"), (0.0, "0"),
                                          (1e300, "1.00e+300"), (0.00012345, "1.23e-04"), (None, "n/a"),
                                          (float("nan"), "nan")])
def test_numbers_are_shown_to_three_significant_figures(value, shown):
    assert significant(value) == shown


def test_summary_json_holds_null_where_a_number_is_not_finite():
    assert _strict_json(finite_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": -float("inf")}})) == \
        {"a": None, "b": [None, 1.5], "c": {"d": None}}


def test_a_run_names_its_directory_after_its_env_and_says_what_to_do_next(tmp_path):
    config = cartpole_config(total_steps=2000)
    del config["experiment"]
    done, run = train(tmp_path, config)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"a3c-cartpole-v1-\d{8}-\d{6}", run.name)
    outcome, profiled, *after = done.stdout.splitlines()
    assert outcome.startswith(f"{run}: total_steps reached; ") and " env steps, " in outcome
    assert re.fullmatch(r"profile of the workers' [\d.]+ s: (\w+ (\d+|<1)%, )*\w+ (\d+|<1)%; (\d+|<1)% in no phase "
                        r"\(their processes' start\)", profiled), profiled
    assert after[0] == f"checkpoint: {run / 'checkpoints' / 'checkpoint.npz'}"
    evaluate, tensorboard, resume = _next_commands(done.stdout)
    assert tensorboard == ["tensorboard", "--logdir", str(run.parent)]
    assert evaluate == ["evaluate", "--run", str(run)]
    assert run_cli(*evaluate, "--episodes", 1).returncode == 0
    assert resume == ["train", "--resume", str(run), "--set", "trainer.total_steps=4000"]
    resumed = run_cli(*resume)
    assert resumed.returncode == 0, resumed.stderr
    assert 4000 <= _summary(run)["env_steps"] and resumed.stdout.startswith(f"{run}: total_steps reached; ")


@pytest.mark.parametrize("config, overrides, name", [
    ("a3c.yaml", ["env.id=Acrobot-v1"], "a3c-acrobot-v1"),  # a3c-cartpole names CartPole: named after Acrobot
    ("impala_pong.yaml", ["env.kwargs.game=ALE/Breakout-v5"], "impala-ale-breakout-v5"),
    ("a3c.yaml", ["env.id=Acrobot-v1", "experiment=mine"], "mine"),
    ("a3c.yaml", ["env.envs_per_worker=2"], "a3c-cartpole"),
    ("a3c_ray.yaml", ["env.id=Acrobot-v1"], "a3c-cartpole-ray"),  # a name that is more than its env's is kept
    ("a3c_continuous.yaml", ["env.id=MountainCarContinuous-v0"], "a3c-continuous"),
], ids=["env.id", "atari game", "experiment set too", "same env", "a3c-cartpole-ray", "a3c-continuous"])
def test_a_config_pointed_at_another_env_is_named_after_it(config, overrides, name):
    if "pong" in config:
        pytest.importorskip("ale_py", reason="the atari extra is not installed")
    assert load_config(CONFIGS / config, overrides)["experiment"] == name


def test_an_explicit_experiment_keeps_its_name(tmp_path):
    done, run = train(tmp_path, cartpole_config(experiment="mine", total_steps=500))
    assert done.returncode == 0 and re.fullmatch(r"mine-\d{8}-\d{6}", run.name)


def test_hogwild_counts_samples_and_epochs(tmp_path):
    done, run = train(tmp_path, hogwild_config(trainer={"total_steps": 16_000, "eval_every_s": 0}))
    assert done.returncode == 0, done.stderr
    outcome = done.stdout.splitlines()[0]
    assert re.search(r"; \d+ samples, \d+ updates, 1\.\d\d epochs in [\d.]+ s \([\d,]+ samples/s\)", outcome), outcome
    assert "env steps" not in outcome and "episodes" not in outcome


def test_a_hogwild_run_is_named_after_its_dataset(tmp_path):
    config = hogwild_config(trainer={"total_steps": 640, "eval_every_s": 0})
    del config["experiment"]
    done, run = train(tmp_path, config)
    assert done.returncode == 0 and re.fullmatch(r"hogwild-mnist_teacher-\d{8}-\d{6}", run.name), done.stderr


def test_returns_of_1e300_rewards_print_in_a_few_characters(tmp_path):
    done, run = train(tmp_path, cartpole_config(total_steps=2000, env={"id": "fault_envs:HugeRewardCartPole-v0"}))
    assert done.returncode == 0, done.stderr
    outcome = done.stdout.splitlines()[0]
    assert re.search(r"; mean return \d\.\d\de\+30\d over the last", outcome) and len(outcome) < 400, outcome
    assert _summary(run)["mean_return"] > 1e300
    evaluated = run_cli("evaluate", "--run", run, "--episodes", 2)
    assert evaluated.returncode == 0, evaluated.stderr
    assert re.fullmatch(r"return over 2 greedy episodes: \d\.\d\de\+30\d ± \S+\n", evaluated.stdout), evaluated.stdout


def test_nan_returns_are_null_in_summary_json(tmp_path):
    done, run = train(tmp_path, cartpole_config(total_steps=2000, env={"id": "fault_envs:NonFiniteCartPole-v0"},
                                                algorithm={"max_nonfinite_updates": 10**6}))
    assert done.returncode == 0, done.stderr
    summary = _summary(run)  # strict: json.loads would read NaN
    assert summary["episodes"] > 0 and summary["mean_return"] is None
    assert "; mean return nan over the last" in done.stdout.splitlines()[0]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_counts_seconds_when_max_seconds_ends_the_run_first():
    stream = _Terminal()
    progress = Progress(10**9, enabled=True, stream=stream, max_seconds=10.0, unit="env steps")
    progress.update(4000, 3, 9.333, seconds=2.0)  # 2,000 steps/s: 10^9 steps would take days
    progress.close()
    text = stream.getvalue()
    assert progress.counting == "seconds"
    assert "20%" in text and "2.0/10.0 s" in text and "4,000 env steps (2,000/s), return 9.33, updates 3" in text


def test_the_bar_counts_steps_when_total_steps_ends_the_run_first():
    stream = _Terminal()
    progress = Progress(10_000, enabled=True, stream=stream, max_seconds=300.0, unit="samples", show_return=False)
    progress.update(4000, 3, None, seconds=2.0)  # 2,000 samples/s: 3 s more, against 298
    progress.close()
    text = stream.getvalue()
    assert progress.counting == "steps"
    assert "40%" in text and "4.00k/10.0k samples" in text and "updates 3" in text and "return" not in text
