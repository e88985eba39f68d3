"""Config schema: defaults, types, ranges, overrides, and the one-line errors naming key, value and what is allowed;
and the upper bounds the code can honour (tests/reliability/test_fuzzing.py property-tests every key)."""
import multiprocessing
import multiprocessing.connection

import pytest
import yaml

from framework.train.config import (CORE_SCHEMA, MAX_JOIN_TIMEOUT_S, MAX_SECONDS, MAX_STEPS, MAX_VIDEO_FRAMES,
                                    ConfigError, apply_overrides, default_config, get_path, load_config,
                                    parse_override, validate)
from framework.runtime.schema import MAX_ITEMS, MAX_TEXT, short_repr


def test_defaults_hold_every_design_key():
    config = default_config()
    assert config["experiment"] == "a3c-cartpole-v1" and config["seed"] == 0  # named after its env
    assert config["env"] == {"id": "CartPole-v1", "kwargs": {}, "envs_per_worker": 4, "vectorize": True,
                             "normalize_obs": False, "clip_obs": 10.0, "normalize_reward": False, "clip_reward": 10.0,
                             "sign_reward": False, "life_loss_done": False}
    assert config["model"] == {"hidden": [128], "activation": "relu", "lstm": False, "shared_body": True,
                               "orthogonal_init": False, "conv": "a3c", "log_std_init": 0.0, "sde": False,
                               "sde_sample_freq": -1, "factory": None, "kwargs": {}}
    algo = config["algorithm"]
    assert algo["name"] == "a3c"
    assert {k: algo[k] for k in ("gamma", "n_steps", "entropy_coef", "value_coef", "max_grad_norm")} == \
        {"gamma": 0.99, "n_steps": 20, "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 40.0}
    assert algo["max_nonfinite_updates"] == 100 and algo["gae_lambda"] == 1.0
    assert config["optimizer"]["name"] == "adam" and config["optimizer"]["lr"] == 0.001
    trainer = config["trainer"]
    for key, value in {"workers": 2, "start_method": "spawn", "sharing_strategy": "file_descriptor",
                       "device": "cpu", "total_steps": 2_000_000, "max_seconds": 300, "target_return": 475,
                       "target_window": 100, "on_worker_failure": "abort", "checkpoint_every_s": 60,
                       "backend": "local"}.items():
        assert trainer[key] == value, key
    assert {k: config["logging"][k] for k in ("logdir", "tensorboard", "progress")} == \
        {"logdir": "runs", "tensorboard": True, "progress": True}


def test_partial_config_is_filled_and_numbers_are_converted():
    config = validate({"optimizer": {"lr": 1}, "trainer": {"max_seconds": "1e2"}, "env": {"kwargs": {"max_episode_steps": 50}}})
    assert config["optimizer"]["lr"] == 1.0 and isinstance(config["optimizer"]["lr"], float)
    assert config["trainer"]["max_seconds"] == 100.0  # YAML 1.1 leaves 1e2 a string; it is a number here
    assert config["env"]["kwargs"] == {"max_episode_steps": 50}
    assert config["trainer"]["workers"] == 2


@pytest.mark.parametrize("raw, message", [
    ({"trainer": {"wrokers": 2}}, "config key 'trainer.wrokers': unknown key; allowed here: workers, start_method"),
    ({"bogus": 1}, "config key 'bogus': unknown key; allowed here: experiment, seed, env"),
    ({"trainer": {"workers": "two"}}, "config key 'trainer.workers': got 'two'; allowed: an integer >= 1"),
    ({"trainer": {"workers": True}}, "config key 'trainer.workers': got True; allowed: an integer"),
    ({"trainer": {"workers": 0}}, "config key 'trainer.workers': got 0; allowed: an integer >= 1 and <= 1024"),
    ({"trainer": {"start_method": "thread"}},
     "config key 'trainer.start_method': got 'thread'; allowed: one of spawn, forkserver, fork"),
    ({"optimizer": {"lr": 0}}, "config key 'optimizer.lr': got 0; allowed: a number > 0"),
    ({"optimizer": {"lr": "fast"}}, "config key 'optimizer.lr': got 'fast'; allowed: a number > 0"),
    ({"optimizer": {"lr": float("nan")}}, "config key 'optimizer.lr': got nan"),
    ({"algorithm": {"gamma": 1.5}}, "config key 'algorithm.gamma': got 1.5; allowed: a number >= 0 and <= 1"),
    ({"algorithm": {"name": "ppo"}}, "config key 'algorithm.name': got 'ppo'; allowed: one of a3c"),
    ({"algorithm": {"n_step": 5}}, "config key 'algorithm.n_step': unknown key"),
    ({"model": {"hidden": [64, "x"]}}, "config key 'model.hidden': got [64, 'x']; allowed: a list of integers"),
    ({"model": {"hidden": 64}}, "config key 'model.hidden': got 64; allowed: a list of integers"),
    ({"trainer": {"device": "gpu"}}, "config key 'trainer.device': got 'gpu'; allowed: cpu or cuda:N"),
    ({"trainer": {"device": "cuda:0", "start_method": "fork"}},
     "config key 'trainer.start_method': got 'fork' with trainer.device 'cuda:0'; allowed: spawn or forkserver"),
    ({"trainer": {"target_return": None}, "env": {"id": "CartPoel-v1"}},
     "config key 'env.id': got 'CartPoel-v1'; allowed: a registered gymnasium environment id"),
    ({"env": {"kwargs": {"bad_arg": 1}}}, "config key 'env.kwargs': got {'bad_arg': 1}; allowed: keyword arguments"),
    ({"env": ["CartPole-v1"]}, "config key 'env': got ['CartPole-v1']; allowed: a mapping with keys id, kwargs"),
    ({"experiment": "a/b"}, "config key 'experiment': got 'a/b'; allowed: a name of letters"),
    ({"logging": {"hparams": ["optimizer.nope"]}}, "config key 'logging.hparams': got 'optimizer.nope'"),
    ([1, 2], "config: got [1, 2]; allowed: a mapping of sections"),
])
def test_bad_values_name_key_value_and_allowed(raw, message):
    with pytest.raises(ConfigError) as info:
        validate(raw)
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_null_only_where_allowed():
    assert validate({"trainer": {"target_return": None}})["trainer"]["target_return"] is None
    with pytest.raises(ConfigError, match="'trainer.max_seconds': got None"):
        validate({"trainer": {"max_seconds": None}})


def test_overrides_parse_yaml_scalars_and_create_sections():
    raw = apply_overrides({"trainer": {"workers": 2}}, ["trainer.workers=3", "optimizer.lr=5e-4",
                                                        "model.hidden=[32, 32]", "trainer.target_return=null",
                                                        "env.id=Acrobot-v1"])
    assert raw == {"trainer": {"workers": 3, "target_return": None}, "optimizer": {"lr": "5e-4"},
                   "model": {"hidden": [32, 32]}, "env": {"id": "Acrobot-v1"}}
    config = validate(raw)
    assert config["optimizer"]["lr"] == 0.0005 and config["model"]["hidden"] == [32, 32]


@pytest.mark.parametrize("text, message", [
    ("trainer.workers", "--set 'trainer.workers': not of the form key.path=value"),
    ("=3", "not of the form key.path=value"),
    ("a..b=1", "not of the form key.path=value"),
    ("trainer.workers=[1,", "value '[1,' is not a YAML value"),
])
def test_bad_override_syntax(text, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        parse_override(text)


def test_override_through_a_value_is_refused():
    with pytest.raises(ConfigError, match="'seed' is a value, not a section"):
        apply_overrides({"seed": 1}, ["seed.x=2"])


def test_files_missing_malformed_python_tag(tmp_path):
    with pytest.raises(ConfigError, match="config file '.*nope.yaml': not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: {workers: 2\n")
    with pytest.raises(ConfigError, match=r"bad.yaml' at line \d+, column \d+: malformed YAML"):
        load_config(bad)
    tagged = tmp_path / "tag.yaml"
    tagged.write_text("seed: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="tag.yaml' at line 1: could not determine a constructor .*Python tags"):
        load_config(tagged)


def test_empty_file_is_all_defaults(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty) == default_config()


def test_shipped_config_is_valid():
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "configs" / "a3c.yaml"
    config = load_config(path)
    assert config["env"]["id"] == "CartPole-v1" and config["trainer"]["target_return"] == 475
    assert set(yaml.safe_load(path.read_text())) <= set(CORE_SCHEMA) | {"algorithm", "env", "model"}


# -- bounds the code can honour, and a property test over every key -------------------------------
@pytest.mark.parametrize("key, highest", [
    ("trainer.total_steps", MAX_STEPS), ("trainer.max_seconds", MAX_SECONDS),
    ("trainer.checkpoint_every_s", MAX_SECONDS), ("trainer.eval_every_s", MAX_SECONDS),
    ("trainer.join_timeout_s", MAX_JOIN_TIMEOUT_S), ("trainer.max_restarts", 1_000_000),
    ("trainer.eval_episodes", 10_000), ("trainer.workers", 1024), ("logging.log_every_s", MAX_SECONDS),
    ("logging.histogram_every", MAX_STEPS), ("algorithm.max_nonfinite_updates", 10**9),
    ("logging.video_every_s", MAX_SECONDS), ("logging.video_max_frames", MAX_VIDEO_FRAMES),
])
def test_every_duration_and_count_has_an_upper_bound(key, highest):
    section, name = key.split(".")
    assert get_path(validate({section: {name: highest}}), key) == highest
    above = highest + 1 if isinstance(highest, int) else highest * 1.5
    with pytest.raises(ConfigError, match=rf"^config key '{key}': got .*; allowed: .* and <= "):
        validate({section: {name: above}})


def test_join_timeout_bound_fits_what_joining_a_process_can_wait():
    """poll() takes a C int of milliseconds: a longer join would raise OverflowError at the end of a run."""
    reader, writer = multiprocessing.Pipe()
    writer.send(1)
    multiprocessing.connection.wait([reader], timeout=MAX_JOIN_TIMEOUT_S)
    with pytest.raises(OverflowError):
        multiprocessing.connection.wait([reader], timeout=(2**31) / 1000)


@pytest.mark.parametrize("raw, message", [
    ({"seed": 10**400}, "config key 'seed': got <an integer of 1329 bits>; allowed: an integer >= 0"),
    ({"optimizer": {"lr": 10**400}}, "config key 'optimizer.lr': got <an integer of 1329 bits>; allowed: a number"),
    ({"dataset": {"train_size": 2**63}, "algorithm": {"name": "hogwild"}},
     "config key 'dataset.train_size': got 9223372036854775808; allowed: an integer >= 1 and <= 10000000"),
    ({"logging": {"logdir": "x" * (MAX_TEXT + 1)}}, "config key 'logging.logdir': got 'xxxxxxxx"),
    ({"model": {"hidden": [8] * (MAX_ITEMS + 1)}}, "config key 'model.hidden': got [8, 8, 8, 8, 8, 8, ...]"),
    ({"experiment": "x" * 201}, "config key 'experiment': got 'xxxx"),
    ({"trainer": {"wor\nkers": 2}}, "config key 'trainer.wor\\nkers': unknown key"),
    ({"env": {"kwargs": {"deep": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}}, "config key 'env.kwargs': got {'deep'"),
    ({"env": {"kwargs": {"obj": object()}}}, "config key 'env.kwargs': got {'obj': <object object at"),
])
def test_values_too_big_or_odd_are_refused_in_one_short_line(raw, message):
    with pytest.raises(ConfigError) as info:
        validate(raw)
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text and len(text) < 400, text


def test_short_repr_never_builds_the_full_repr_of_a_big_value():
    laughs = ["lol"] * 10
    for _ in range(30):  # 10 * 2**30 strings once expanded: repr() would never finish
        laughs = [laughs, laughs]
    assert len(short_repr(laughs)) <= 60
    assert short_repr(10**5000) == "<an integer of 16610 bits>"  # repr() raises ValueError past 4300 digits
    assert short_repr("a\nb") == "'a\\nb'"
