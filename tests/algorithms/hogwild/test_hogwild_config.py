"""The hogwild config schema: defaults, and the combinations refused with a message naming the key."""
import pytest

from framework.train.config import ConfigError, default_config, validate
from run_configs import hogwild_config as config


def test_defaults_are_the_reference_settings():
    cfg = default_config("hogwild")
    assert cfg["algorithm"] == {"name": "hogwild", "max_nonfinite_updates": 100, "batch_size": 64,
                                "optimizer_state": "per_worker", "locked": False, "l2": 0.0001,
                                "target_accuracy": None}
    assert cfg["dataset"]["kind"] == "mnist_teacher" and cfg["dataset"]["train_size"] == 20_000
    assert "algorithm.batch_size" in cfg["logging"]["hparams"]  # the default hparams name hogwild's keys


def test_hogwild_config_holds_only_its_own_sections():
    """No environment, no LSTM flag, no return target: those belong to A3C."""
    cfg = default_config("hogwild")
    assert list(cfg) == ["experiment", "seed", "dataset", "model", "algorithm", "optimizer", "trainer", "logging"]
    assert cfg["experiment"] == "hogwild-mnist_teacher" and cfg["model"] == {"hidden": [128], "activation": "relu"}
    assert "target_return" not in cfg["trainer"] and "target_window" not in cfg["trainer"]
    a3c = default_config("a3c")
    assert list(a3c) == ["experiment", "seed", "env", "model", "algorithm", "optimizer", "trainer", "logging"]
    assert "dataset" not in a3c and a3c["trainer"]["target_return"] == 475


@pytest.mark.parametrize("legacy", [{"env": {"id": "CartPole-v1"}}, {"model": {"lstm": False}},
                                    {"trainer": {"target_return": None, "target_window": 100}}])
def test_keys_hogwild_configs_held_before_the_plugins_owned_them_still_load(legacy):
    """Every config.yaml written before held env, model.lstm and the return target; they meant nothing here."""
    assert validate(config(**legacy)) == validate(config())


@pytest.mark.parametrize("sections, key, allowed", [
    ({"algorithm": {"batch_size": 9000}}, "algorithm.batch_size", "at most 8000"),
    ({"model": {"lstm": True}}, "model.lstm", "unknown key; allowed here: hidden, activation"),
    ({"dataset": {"kind": "sparse_svm", "n_features": 100, "train_size": 100}, "optimizer": {"name": "adam"}},
     "optimizer.name", "sgd without momentum"),
    ({"algorithm": {"optimizer_state": "global"}}, "algorithm.optimizer_state", "one of per_worker, shared"),
    ({"algorithm": {"target_accuracy": 1.5}}, "algorithm.target_accuracy", "<= 1"),
    ({"dataset": {"kind": "npz"}}, "dataset.path", "the path of an .npz file"),
    ({"dataset": {"kind": "csv"}}, "dataset.kind", "one of npz, mnist_teacher, sparse_svm"),
    ({"dataset": {"density": 0}}, "dataset.density", "> 0"),
])
def test_bad_hogwild_config_names_the_key(sections, key, allowed):
    with pytest.raises(ConfigError) as err:
        validate(config(**sections))
    message = str(err.value)
    assert message.startswith(f"config key '{key}'") and allowed in message, message
