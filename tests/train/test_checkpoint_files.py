"""Checkpoint files: round trip, atomic replacement, refusal of corrupt, truncated and pickled files, and bounded
reading of untrusted ones."""
import os
import pickle
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest

from framework.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from npz_files import npy, peak_bytes, read_zip, write_zip


def _state(scale: float = 1.0):
    return {
        "model": {"body.weight": np.arange(12, dtype=np.float32).reshape(3, 4) * scale, "body.bias": np.ones(3)},
        "optimizer": {"state": {0: {"step": np.array(3.0), "exp_avg": np.zeros(4)}},
                      "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "params": [0, 1]}]},
        "run": {"env_steps": 1234, "solved_at_seconds": None, "name": "x", "flags": [True, 1, 2.5]},
    }


def test_round_trip_keeps_arrays_dtypes_int_keys_and_json_values(tmp_path):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _state())
    back = load_checkpoint(path)
    np.testing.assert_array_equal(back["model"]["body.weight"], _state()["model"]["body.weight"])
    assert back["model"]["body.weight"].dtype == np.float32
    assert back["model"]["body.bias"].dtype == np.float64
    assert list(back["optimizer"]["state"]) == [0]  # int keys stay ints
    assert back["optimizer"]["param_groups"][0]["betas"] == [0.9, 0.999]
    assert back["run"] == {"env_steps": 1234, "solved_at_seconds": None, "name": "x", "flags": [True, 1, 2.5]}


def test_save_replaces_previous_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _state(1.0))
    save_checkpoint(path, _state(2.0))
    assert load_checkpoint(path)["model"]["body.weight"][0, 1] == 2.0
    assert os.listdir(tmp_path) == ["checkpoint.npz"]


def test_unstorable_values_are_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match="object"):
        save_checkpoint(tmp_path / "c.npz", {"bad": np.array([object()], dtype=object)})
    with pytest.raises(TypeError, match="set"):
        save_checkpoint(tmp_path / "c.npz", {"bad": {1, 2}})
    assert not os.listdir(tmp_path)


def test_write_failure_keeps_previous_checkpoint(tmp_path):
    """A file-size limit makes the write fail like a full disk: the old file stays intact and loadable."""
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _state(1.0))
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import resource, sys, numpy as np
        from framework.train.checkpoint import CheckpointError, save_checkpoint
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        try:
            save_checkpoint({str(path)!r}, {{"big": np.zeros(100_000)}})
        except CheckpointError as exc:
            print(exc)
            sys.exit(3)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert str(path) in done.stdout and "previous checkpoint is kept" in done.stdout
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.npz"]
    np.testing.assert_array_equal(load_checkpoint(path)["model"]["body.bias"], np.ones(3))


def test_unwritable_directory_is_reported(tmp_path):
    missing = tmp_path / "gone" / "checkpoint.npz"
    with pytest.raises(CheckpointError, match="could not write checkpoint .*gone"):
        save_checkpoint(missing, _state())


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_damaged_file_is_refused_naming_it(tmp_path, damage):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _state())
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": os.urandom(len(data)), "empty": b""}[damage])
    with pytest.raises(CheckpointError, match=f"checkpoint '{path}' is truncated or corrupt"):
        load_checkpoint(path)


def test_pickled_object_in_npz_is_refused(tmp_path):
    path = tmp_path / "checkpoint.npz"
    np.savez(path, __meta__=np.frombuffer(b'{"format": "hogshare-checkpoint", "version": 1, "state": {}}',
                                           dtype=np.uint8), evil=np.array([{"x": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="holds a pickled Python object \\(entry 'evil'\\), which is never loaded"):
        load_checkpoint(path)


def test_a_plain_pickle_or_foreign_npz_is_refused(tmp_path):
    pickled = tmp_path / "p.npz"
    pickled.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(CheckpointError, match="p.npz"):
        load_checkpoint(pickled)
    foreign = tmp_path / "f.npz"
    np.savez(foreign, x=np.zeros(3))
    with pytest.raises(CheckpointError, match="f.npz"):
        load_checkpoint(foreign)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="nope.npz' not found"):
        load_checkpoint(tmp_path / "nope.npz")


def test_file_is_a_plain_zip_of_npy_entries(tmp_path):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _state())
    with zipfile.ZipFile(path) as z:
        assert all(name.endswith(".npy") for name in z.namelist())
        assert "__meta__.npy" in z.namelist()


# -- untrusted files: bounded reading (fuzzed in tests/reliability) --------------------------------
@pytest.mark.parametrize("case", ["deflate bomb", "declared shape beyond its bytes", "over the caller's bound"])
def test_an_entry_claiming_gigabytes_is_refused_without_reading_it(tmp_path, case):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _state())
    entries = read_zip(path)
    if case == "deflate bomb":  # 256 MiB of zeros in about 256 KiB
        entries["a0.npy"] = npy({"descr": "<f8", "fortran_order": False, "shape": (2**25,)}, bytes(2**28))
        write_zip(path, entries, compress={"a0.npy"})
        message, bound = "entry 'a0.npy' is compressed", None
    elif case == "declared shape beyond its bytes":  # 16 GiB declared, 16 bytes there
        entries["a0.npy"] = npy({"descr": "<f8", "fortran_order": False, "shape": (2**31,)}, bytes(16))
        write_zip(path, entries)
        message, bound = "entry 'a0' declares shape (2147483648,) of float64, which its", None
    else:
        message, bound = "holds 1", 1000
    started = time.monotonic()
    errors = []

    def load():
        try:
            load_checkpoint(path, max_bytes=bound)
        except CheckpointError as exc:
            errors.append(str(exc))

    assert peak_bytes(load) < 8 << 20 and time.monotonic() - started < 5
    assert errors and message in errors[0], errors


def test_deeply_nested_metadata_is_refused_as_corrupt(tmp_path):
    path = tmp_path / "checkpoint.npz"
    meta = b'{"format": "hogshare-checkpoint", "version": 1, "state": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    write_zip(path, {"__meta__.npy": npy({"descr": "|u1", "fortran_order": False, "shape": (len(meta),)}, meta)})
    with pytest.raises(CheckpointError, match="is truncated or corrupt and cannot be loaded .*RecursionError"):
        load_checkpoint(path)
