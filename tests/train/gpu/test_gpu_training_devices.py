"""Choosing the device and moving arrays between host and device: identity on the CPU, so CPU runs take the
same code path as GPU runs; and the clear errors when a CUDA device is asked for where there is none."""
import importlib.util

import numpy as np
import pytest

import cuda_ipc
from framework.runtime.algorithm import WorkerContext
from framework.train.config import ConfigError, default_config, validate
from framework.device import cuda_device_count, to_device, to_host, use_device

from gpu_training_helpers import a3c_config, hogwild_config
from train_cli import train

def test_host_and_device_moves_are_identity_on_the_cpu():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert to_device(a, "cpu") is a and to_host(a) is a
    copy = to_host(a, copy=True)
    assert copy is not a and np.array_equal(copy, a) and not np.shares_memory(copy, a)
    use_device("cpu")  # nothing to select


def test_use_device_names_the_accepted_forms():
    with pytest.raises(ValueError, match="expected 'cpu', 'cuda' or 'cuda:N'"):
        use_device("gpu0")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is importable here")
def test_cuda_without_cupy_says_how_to_get_it():
    assert cuda_device_count() == 0
    with pytest.raises(RuntimeError, match="CUDA tensors need CuPy"):
        use_device("cuda:0")


def test_worker_context_device_is_the_trainers():
    config = default_config()
    config["trainer"]["device"] = "cuda:1"
    assert WorkerContext(0, 1, config, None, None, None).device == "cuda:1"


def test_sparse_svm_on_cuda_is_refused_naming_the_key():
    raw = hogwild_config("cuda:0", 1000)
    raw["dataset"] = {"kind": "sparse_svm", "n_features": 500, "train_size": 1000, "test_size": 200}
    raw["optimizer"] = {"name": "sgd", "lr": 1.0}
    with pytest.raises(ConfigError, match=r"^config key 'trainer.device': got 'cuda:0' with dataset.kind "
                                          r"sparse_svm; allowed: cpu \("):
        validate(raw)
    raw["trainer"]["device"] = "cpu"
    assert validate(raw)["trainer"]["device"] == "cpu"


@pytest.mark.timeout(120)
def test_train_on_cuda_without_a_device_exits_2_with_one_line(tmp_path):
    if cuda_ipc.is_available():
        pytest.skip("a CUDA device with CuPy is available here")
    done, run_dir = train(tmp_path, a3c_config("cuda:0", 1000))
    assert done.returncode == 2
    assert done.stderr == ("train: error: config key 'trainer.device': got 'cuda:0'; allowed: cpu (no CUDA device "
                           "with CuPy is available here)\n")
    assert run_dir is None  # a refused run leaves no run directory behind


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_train_on_a_missing_cuda_index_exits_2_naming_the_devices(tmp_path):
    if not cuda_ipc.is_available():
        pytest.skip("needs CuPy and a CUDA device: cuda_ipc.is_available() is False here")
    count = cuda_device_count()
    done, _ = train(tmp_path, a3c_config(f"cuda:{count}", 1000))
    assert done.returncode == 2
    assert f"config key 'trainer.device': got 'cuda:{count}'; allowed: cpu or cuda:0 to cuda:{count - 1}" \
        in done.stderr and "Traceback" not in done.stderr
