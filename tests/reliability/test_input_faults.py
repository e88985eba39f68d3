"""Bad files and arguments (faults 9 and 10) and untrusted input that must never be unpickled: damaged
checkpoints on `--resume`, broken configs, a checkpoint carrying a pickle, a YAML file with a Python tag."""
import functools
import io
import json
import os
import re
import shutil
import stat
import struct
import zipfile

import numpy as np
import pytest
import yaml

from framework.train.checkpoint import load_checkpoint
from reliability_support import fast_config, run_cli, short_run, write_config
from train_cli import first_run_at_its_target, snapshot

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A short finished run, copied by each test that damages it."""
    return short_run(tmp_path_factory.mktemp("finished"))


@pytest.fixture
def run_dir(finished_run, tmp_path):
    return shutil.copytree(finished_run, tmp_path / finished_run.name)


def _assert_one_line_error(done, command: str = "train") -> str:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"{command}: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr.strip()


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 3]


def _garbage(data: bytes) -> bytes:
    return os.urandom(len(data))


def _flip_a_byte(data: bytes) -> bytes:
    """One byte flipped in the middle of the largest array's data (the zip entry's CRC-32 no longer matches). The
    file's middle byte could fall where a reader never looks (a local header's zip64 field), changing nothing."""
    largest = max(zipfile.ZipFile(io.BytesIO(data)).infolist(), key=lambda info: info.file_size)
    name_length, extra_length = struct.unpack("<HH", data[largest.header_offset + 26:largest.header_offset + 30])
    at = largest.header_offset + 30 + name_length + extra_length + largest.file_size // 2
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def _empty(data: bytes) -> bytes:
    return b""


@pytest.mark.fault("9", "`--resume` with a damaged checkpoint: truncated to a third, random bytes, one byte "
                        "of the parameters flipped, empty",
                   "exit 2, one line naming the checkpoint file and saying it is truncated or corrupt, no "
                   "traceback; every file of the run directory byte-identical afterwards; `evaluate` refuses it too")
@pytest.mark.parametrize("damage", [_truncate, _garbage, _flip_a_byte, _empty], ids=lambda f: f.__name__[1:])
def test_damaged_checkpoint_is_refused_and_nothing_is_overwritten(watch, run_dir, damage):
    checkpoint = run_dir / "checkpoints" / "checkpoint.npz"
    checkpoint.write_bytes(damage(checkpoint.read_bytes()))
    before = snapshot(run_dir)
    for command, args in (("train", ["--resume", run_dir]), ("evaluate", ["--run", run_dir])):
        message = _assert_one_line_error(run_cli(watch, *args, command=command), command)
        assert message.startswith(f"{command}: error: checkpoint '{checkpoint}' is truncated or corrupt and cannot "
                                  f"be loaded ("), message
    assert snapshot(run_dir) == before


@pytest.mark.fault("9", "`--resume` with the checkpoint missing, or with the run's config.yaml edited by hand "
                        "(`model.hidden: [64]`) so that the checkpoint no longer fits the model",
                   "exit 2, one line naming the checkpoint file and the problem (not found; size mismatch of a "
                   "named parameter); every file of the run directory byte-identical afterwards")
@pytest.mark.parametrize("case", ["missing", "other model"])
def test_missing_or_misfitting_checkpoint_is_refused(watch, run_dir, case):
    checkpoint = run_dir / "checkpoints" / "checkpoint.npz"
    if case == "missing":
        checkpoint.unlink()
        expected = f"train: error: checkpoint '{checkpoint}' not found"
    else:
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        config["model"]["hidden"] = [64]
        write_config(run_dir / "config.yaml", config)
        expected = (f"train: error: checkpoint '{checkpoint}' does not fit the model of this config: Error(s) in "
                    f"loading state_dict for ActorCritic: size mismatch for body.0.weight")
    before = snapshot(run_dir)
    message = _assert_one_line_error(run_cli(watch, "--resume", run_dir))
    assert message.startswith(expected), message
    assert snapshot(run_dir) == before


CONFIG_FAULTS = {
    "malformed YAML": ("trainer: {workers: 2\nseed: 1\n", [],
                       r"train: error: config file '{path}' at line \d+, column \d+: malformed YAML"),
    "unknown key": ("trainer: {wrokers: 2}\n", [],
                    r"train: error: config key 'trainer\.wrokers': unknown key; allowed here: workers, "),
    "wrong type": ("trainer: {workers: two}\n", [],
                   r"train: error: config key 'trainer\.workers': got 'two'; allowed: an integer >= 1"),
    "out of range": ("algorithm: {gamma: 1.5}\n", [],
                     r"train: error: config key 'algorithm\.gamma': got 1\.5; allowed: a number >= 0 and <= 1$"),
    "override out of range": ("seed: 1\n", ["--set", "trainer.workers=0"],
                              r"train: error: config key 'trainer\.workers': got 0; allowed: an integer >= 1"),
    "override without value": ("seed: 1\n", ["--set", "trainer.workers"],
                               r"train: error: --set 'trainer\.workers': not of the form key\.path=value"),
    "not a mapping": ("- CartPole-v1\n", [], r"train: error: config: got \['CartPole-v1'\]; allowed: a mapping"),
    "missing file": (None, [], r"train: error: config file '{path}': not found; allowed: a path to a YAML file"),
}

_LAUGHS = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]\n" for n in range(1, 10))
YAML_FAULTS = {
    "duplicate key": ("seed: 1\ntrainer: {workers: 2}\nseed: 2\n",
                      r"train: error: config file '{path}' at line 3: key 'seed' is given twice \(first at line 1\); "
                      r"allowed: each key once per mapping"),
    "billion laughs": (_LAUGHS, r"train: error: config file '{path}' at line \d+: more than 20000 values once aliases "
                                r"are expanded; allowed: at most 20000 values"),
    "nested 100000 deep": ("seed: " + "[" * 100_000 + "]" * 100_000 + "\n",
                           r"train: error: config file '{path}' at line 1: values nested more than 64 levels deep"),
    "integer of 5000 digits": ("seed: " + "7" * 5000 + "\n",
                               r"train: error: config file '{path}' at line 1: an integer of 5000 characters"),
    "2 MiB file": ("# " + "x" * (2 << 20) + "\n", r"train: error: config file '{path}': 2097155 bytes; allowed: at "
                                                  r"most 1048576 bytes"),
    "FIFO": ("fifo", r"train: error: config file '{path}': not a regular file; allowed: a regular YAML file"),
    "/dev/zero": ("/dev/zero", r"train: error: config file '/dev/zero': not a regular file"),
    "directory": ("directory", r"train: error: config file '{path}': a directory; allowed: a regular YAML file"),
}


@pytest.mark.fault("17", "YAML that costs time or memory to load, through `train --config`: a key given twice, "
                         "'billion laughs' (9**10 values in 10 lines), lists nested 100,000 deep, an integer of 5000 "
                         "digits, a 2 MiB file, a FIFO with no writer, /dev/zero, a directory",
                   "exit 2 (a read that never ends meets the command's 60 s limit), one line naming the file (and "
                   "line) and what is allowed; no traceback, no "
                   "run directory (today: the last duplicate wins silently, a RecursionError or ValueError "
                   "traceback, a FIFO blocks forever, /dev/zero never ends)")
@pytest.mark.parametrize("case", list(YAML_FAULTS))
def test_yaml_that_costs_time_or_memory_is_refused_in_one_line(watch, tmp_path, logdir, case):
    text, pattern = YAML_FAULTS[case]
    path = tmp_path / "bad.yaml"
    if text == "fifo":
        os.mkfifo(path)
    elif text == "directory":
        path.mkdir()
    elif text == "/dev/zero":
        path = "/dev/zero"
    else:
        path.write_text(text)
    message = _assert_one_line_error(run_cli(watch, "--config", path, "--logdir", logdir, timeout=60))
    assert re.match(pattern.replace("{path}", re.escape(str(path))), message), message
    assert os.listdir(logdir) == []


@pytest.mark.fault("19", "bad arguments to the real commands: `evaluate --episodes 10**12`, `--seed -1`, "
                         "`--episodes` of 5000 digits; `train` with 1001 `--set`s, a `--set` value of 100,000 "
                         "characters, `--resume ''`",
                   "exit 2 and one line naming the argument and what is allowed (today: 10**12 episodes are "
                   "accepted and allocate that many environments; `--resume ''` raises a TypeError)")
@pytest.mark.parametrize("command, args, message", [
    ("evaluate", ["--episodes", str(10**12)], "argument --episodes: got 1000000000000; allowed: an integer from 1 to "
                                              "10000"),
    ("evaluate", ["--seed", "-1"], "argument --seed: got -1; allowed: an integer from 0 to 2147483647"),
    ("evaluate", ["--episodes", "9" * 5000], "argument --episodes: invalid int value: '999"),
    ("train", ["--set", "seed=1"] * 1001, "argument --set: given 1001 times; allowed: at most 1000"),
    ("train", ["--set", "env.kwargs=" + "a" * 100_000], "config key 'env.kwargs': got 'aaaaaaaa"),
    ("train", ["--resume", ""], "argument --resume: got ''; allowed: a path"),
], ids=["episodes 10**12", "seed -1", "episodes of 5000 digits", "1001 --set", "--set of 100000 characters",
        "--resume ''"])
def test_bad_arguments_exit_2_with_one_line(watch, tmp_path, command, args, message):
    if command == "evaluate":
        args = ["--run", tmp_path, *args]
    elif args[0] == "--set":
        args = ["--config", write_config(tmp_path / "c.yaml", fast_config()), "--logdir", tmp_path / "runs", *args]
    text = _assert_one_line_error(run_cli(watch, *args, command=command), command)
    assert text.startswith(f"{command}: error: {message}"), text
    assert not (tmp_path / "runs").exists()


@pytest.mark.fault("20", "`--resume` with optimizer overrides (eps 0.5, betas [0.5, 0.6], weight_decay 0.1, lr "
                         "0.0005), and with changes a resume cannot make (model.hidden, optimizer.name, env.id)",
                   "the overrides apply: the final checkpoint's optimizer options are the new ones and its step "
                   "counts went on from the saved ones (today: silently replaced by the checkpoint's); the others "
                   "are refused with exit 2, one line naming the key, the run directory byte-identical")
def test_resume_applies_optimizer_overrides_and_refuses_structural_changes(watch, run_dir):
    saved = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    for override, key in (("model.hidden=[64]", "model.hidden"), ("optimizer.name=sgd", "optimizer.name"),
                          ("env.id=Acrobot-v1", "env.id")):
        before = snapshot(run_dir)
        message = _assert_one_line_error(run_cli(watch, "--resume", run_dir, "--set", override))
        assert message.startswith(f"train: error: config key '{key}': got "), message
        assert "what the run was trained with" in message and snapshot(run_dir) == before
    done = run_cli(watch, "--resume", run_dir, "--set", "optimizer.eps=0.5", "--set", "optimizer.betas=[0.5, 0.6]",
                   "--set", "optimizer.weight_decay=0.1", "--set", "optimizer.lr=0.0005",
                   "--set", f"trainer.total_steps={saved['run']['env_steps'] + 2000}")
    assert done.returncode == 0, done.stderr
    resumed = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["optimizer"]
    [group] = resumed["param_groups"]
    assert (group["eps"], group["betas"], group["weight_decay"], group["lr"]) == (0.5, [0.5, 0.6], 0.1, 0.0005)
    assert float(resumed["state"][0]["step"]) > float(saved["optimizer"]["state"][0]["step"])


@pytest.mark.fault("20", "`train --resume` of a run that stopped at its target (30, window 20) with "
                         "`--set trainer.target_return=1000000`, and again with the target at 30",
                   "the higher target does not stop the resumed run: it trains to its step budget, solved_at null "
                   "(today: it ends at once, exit 0, `target_return reached`, 0 env steps/s); the same target stops "
                   "it only once episodes of its own keep the window's mean at it (more env steps than saved)")
def _run_that_reached_its_target(watch, tmp_path, target: int) -> tuple:
    """A CartPole run stopped at `target` (window 20), and its summary (a second seed where the first does not
    learn: this file tests what a resume does with a target, not how often A3C learns)."""
    _, run_dir, summary = first_run_at_its_target(functools.partial(run_cli, watch), tmp_path, {seed: fast_config(
        seed=seed, trainer={"target_return": target, "target_window": 20, "total_steps": 60_000}) for seed in (3, 4)})
    return run_dir, summary


def test_a_resumed_run_stops_at_a_target_only_when_its_own_episodes_reach_it(watch, tmp_path):
    run_dir, solved = _run_that_reached_its_target(watch, tmp_path, 30)
    budget = solved["env_steps"] + 3000
    done = run_cli(watch, "--resume", run_dir, "--set", "trainer.target_return=1000000",
                   "--set", f"trainer.total_steps={budget}")
    assert done.returncode == 0, done.stderr
    higher = json.loads((run_dir / "summary.json").read_text())
    assert higher["stop_reason"] == "total_steps reached" and higher["env_steps"] >= budget, higher
    assert higher["solved_at_seconds"] is None and "target not reached" in done.stdout
    done = run_cli(watch, "--resume", run_dir, "--set", "trainer.target_return=30",
                   "--set", f"trainer.total_steps={budget * 10}")
    assert done.returncode == 0, done.stderr
    again = json.loads((run_dir / "summary.json").read_text())
    assert again["stop_reason"] == "target_return reached" and again["env_steps"] > higher["env_steps"], again
    assert again["solved_at_seconds"] > higher["wall_seconds"]


@pytest.mark.fault("10", "config faults through `train --config`: malformed YAML, unknown key, wrong type, "
                         "out-of-range value (in the file and via `--set`), `--set` without a value, a list instead "
                         "of a mapping, a missing file",
                   "exit 2, exactly one line naming the key path (or the file) with the value given and what is "
                   "allowed; no traceback; no run directory made")
@pytest.mark.parametrize("case", list(CONFIG_FAULTS))
def test_config_fault_exits_2_with_one_line(watch, tmp_path, logdir, case):
    text, extra, pattern = CONFIG_FAULTS[case]
    path = tmp_path / "bad.yaml"
    if text is not None:
        path.write_text(text)
    message = _assert_one_line_error(run_cli(watch, "--config", path, "--logdir", logdir, *extra))
    assert re.match(pattern.replace("{path}", re.escape(str(path))), message), message
    assert os.listdir(logdir) == []


class _Payload:
    """Unpickling this creates a directory: the proof that a pickle was loaded."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


@pytest.mark.fault("S", "a checkpoint `.npz` carrying a pickled object array whose unpickling would run code "
                        "(`os.mkdir`), on `train --resume` and `evaluate`",
                   "exit 2, one line naming the file and the pickled entry; the payload never runs (it does with "
                   "`allow_pickle=True`, the control); the run directory is unchanged")
def test_checkpoint_carrying_a_pickle_is_refused_unopened(watch, run_dir, tmp_path):
    checkpoint = run_dir / "checkpoints" / "checkpoint.npz"
    marker = tmp_path / "payload-ran"
    with np.load(checkpoint, allow_pickle=False) as npz:
        entries = {k: npz[k] for k in npz.files}
    payload = np.empty(1, dtype=object)
    payload[0] = _Payload(marker)
    with open(checkpoint, "wb") as f:
        np.savez(f, **entries, evil=payload)
    before = snapshot(run_dir)
    for command, args in (("train", ["--resume", run_dir]), ("evaluate", ["--run", run_dir])):
        message = _assert_one_line_error(run_cli(watch, *args, command=command), command)
        assert message.startswith(f"{command}: error: checkpoint '{checkpoint}' holds a pickled Python object "
                                  f"(entry 'evil')"), message
    with pytest.raises(Exception, match="pickled Python object"):
        load_checkpoint(checkpoint)
    assert not marker.exists() and snapshot(run_dir) == before
    with np.load(checkpoint, allow_pickle=True) as npz:  # the control: this file does run code when unpickled
        npz["evil"]
    assert marker.is_dir()


@pytest.mark.fault("S", "YAML with a `!!python/object/apply:os.mkdir` tag: as `--config`, as a `--set` value, and "
                        "in a run directory's config.yaml on `--resume`",
                   "exit 2, one line naming the file (or the --set argument) and saying Python tags are refused; "
                   "the tag never runs (it does with `yaml.unsafe_load`, the control)")
def test_yaml_with_a_python_tag_is_refused_unconstructed(watch, tmp_path, logdir, run_dir):
    marker = tmp_path / "tag-ran"
    tagged = f"seed: !!python/object/apply:os.mkdir ['{marker}']\n"
    config = tmp_path / "tagged.yaml"
    config.write_text(tagged)
    message = _assert_one_line_error(run_cli(watch, "--config", config, "--logdir", logdir))
    assert re.match(rf"train: error: config file '{re.escape(str(config))}' at line 1: could not determine a "
                    rf"constructor for the tag 'tag:yaml\.org,2002:python/object/apply:os\.mkdir'; allowed: plain "
                    rf"YAML values \(Python tags are refused\)$", message), message
    plain = write_config(tmp_path / "plain.yaml", fast_config())
    override = f"seed=!!python/object/apply:os.mkdir ['{marker}']"
    message = _assert_one_line_error(run_cli(watch, "--config", plain, "--logdir", logdir, "--set", override))
    assert message.startswith(f"train: error: --set {override!r}: value "), message
    resumed_config = run_dir / "config.yaml"
    resumed_config.write_text(resumed_config.read_text() + tagged.replace("seed", "notes"))
    message = _assert_one_line_error(run_cli(watch, "--resume", run_dir))
    assert message.startswith(f"train: error: config file '{resumed_config}' at line "), message
    assert "(Python tags are refused)" in message
    assert not marker.exists() and os.listdir(logdir) == []
    yaml.unsafe_load(tagged)  # the control: this text does run code when constructed unsafely
    assert marker.is_dir()


def _special_file(kind: str, path, target) -> None:
    """Make a symbolic link to target, a FIFO or a character device (/dev/null's numbers) at path."""
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "FIFO":
        os.mkfifo(path)
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a character device needs CAP_MKNOD")


@pytest.mark.fault("25", "`evaluate --export PATH`, `evaluate --record PATH` and `Policy.export(PATH)` where PATH "
                         "is a symbolic link to a file, a FIFO or a character device (/dev/null's numbers)",
                   "exit 2 (a ConfigError from Python), one line naming the argument, the path and what it is; the "
                   "link, its target, the FIFO and the device are left as they were (today: each is replaced by a "
                   "regular file: as root, `--export /dev/null` would replace the system's /dev/null)")
@pytest.mark.parametrize("kind", ["symlink", "FIFO", "character device"])
def test_export_and_record_never_replace_what_is_not_a_regular_file(watch, run_dir, tmp_path, kind):
    from framework.train import ConfigError, load_policy

    target = tmp_path / "target.safetensors"
    target.write_bytes(b"kept")
    for argument, name in (("--export", "p.safetensors"), ("--record", "p.gif")):
        path = tmp_path / name
        _special_file(kind, path, target)
        before = os.lstat(path)
        message = _assert_one_line_error(run_cli(watch, "--run", run_dir, argument, path, command="evaluate"),
                                         "evaluate")
        shown = "a symbolic link" if kind == "symlink" else f"a {kind}"
        assert message.startswith(f"evaluate: error: {argument}: '{path}' is {shown}; allowed: a regular file"), \
            message
        assert os.lstat(path) == before and target.read_bytes() == b"kept"
    with pytest.raises(ConfigError, match=rf"^export: '{re.escape(str(tmp_path / 'p.safetensors'))}' is a "):
        load_policy(run_dir).export(tmp_path / "p.safetensors")
    assert not stat.S_ISREG(os.lstat(tmp_path / "p.safetensors").st_mode) and target.read_bytes() == b"kept"
