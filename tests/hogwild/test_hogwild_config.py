"""The hogwild config schema: defaults, and the combinations refused with a message naming the key."""
import pytest

from framework.config import ConfigError, default_config, validate
from hogwild_helpers import config


def test_defaults_are_the_reference_settings():
    cfg = default_config("hogwild")
    assert cfg["algorithm"] == {"name": "hogwild", "max_nonfinite_updates": 100, "batch_size": 64,
                                "optimizer_state": "per_worker", "locked": False, "l2": 0.0001,
                                "target_accuracy": None}
    assert cfg["dataset"]["kind"] == "mnist_teacher" and cfg["dataset"]["train_size"] == 20_000
    assert "algorithm.batch_size" in cfg["logging"]["hparams"]  # the default hparams name hogwild's keys


@pytest.mark.parametrize("sections, key, allowed", [
    ({"algorithm": {"batch_size": 9000}}, "algorithm.batch_size", "at most 8000"),
    ({"model": {"lstm": True}}, "model.lstm", "false (hogwild trains an MLP)"),
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
