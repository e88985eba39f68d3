"""Running out of a resource (faults 6-8): shared memory too small for the model, a low `ulimit -n`, a disk
that fills up or turns read-only while a run checkpoints."""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import time
import sys

import pytest

from framework import algorithms
from framework.train.checkpoint import load_checkpoint
from framework.train.config import validate
from reliability_support import (HERE, Train, can_mount, fast_config, fill, in_private_tmpfs, only_run_dir,
                                 remount, run_cli, use_up_inodes, wait_for_file, wait_for_run_dir, wait_until,
                                 write_config)

pytestmark = pytest.mark.timeout(180)
BIG_MODEL = {"hidden": [1024, 1024]}  # about 4.2 MiB of float32 parameters
SHM_TOO_SMALL = "1m"


def _low_descriptor_limit(n: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


@pytest.mark.fault("6", "/dev/shm too small for the model: a private 1 MiB tmpfs mounted over /dev/shm "
                        "(file_system strategy), a 4 MiB model",
                   "exit 2 before any worker starts: one line naming the strategy, the bytes asked for and the "
                   "room left in /dev/shm; no traceback; no run directory left behind")
def test_dev_shm_too_small_is_a_clear_error_before_any_worker(watch, tmp_path, logdir):
    if not can_mount():
        pytest.skip("shrinking /dev/shm in a private mount namespace needs root with CAP_SYS_ADMIN")
    config = write_config(tmp_path / "c.yaml",
                          fast_config(model=BIG_MODEL, trainer={"sharing_strategy": "file_system"}))
    run = Train(watch, "--config", config, "--logdir", logdir, prefix=in_private_tmpfs("/dev/shm", SHM_TOO_SMALL))
    assert run.finish() == 2, run.stderr
    _assert_no_room_error(run.stderr, "file_system", r"only .* left in /dev/shm")
    assert os.listdir(logdir) == []  # the empty run directory is removed again


@pytest.mark.fault("6", "memory too small for the model: `HOGSHARE_SHM_LIMIT_BYTES=1048576` (the sharing "
                        "package's documented allocation bound), file_descriptor strategy, a 4 MiB model",
                   "exit 2 before any worker starts: one line naming the strategy, the bytes asked for and the "
                   "bound; no traceback; no run directory left behind")
def test_memory_too_small_is_a_clear_error_before_any_worker(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(model=BIG_MODEL))
    run = Train(watch, "--config", config, "--logdir", logdir,
                env=watch.env(HOGSHARE_SHM_LIMIT_BYTES=str(1 << 20)))
    assert run.finish() == 2, run.stderr
    _assert_no_room_error(run.stderr, "file_descriptor", r"only 1\.0 MiB \(1048576 bytes\) left under "
                                                         r"HOGSHARE_SHM_LIMIT_BYTES=1048576")
    assert os.listdir(logdir) == []  # the empty run directory is removed again


def _assert_no_room_error(stderr: str, strategy: str, room: str) -> None:
    assert re.fullmatch(rf"train: error: cannot place the model, optimizer state and run statistics in shared "
                        rf"memory \({strategy}\): cannot allocate \d+\.\d MiB \(\d+ bytes\) of shared memory with "
                        rf"the {strategy} strategy: {room}\n", stderr), stderr


@pytest.mark.fault("7", "`ulimit -n` 40 (soft and hard, set with setrlimit before exec) for a run whose model has "
                        "64 parameter tensors (and 128 Adam moments), spawn workers",
                   "the run finishes with exit 0: parameters and optimizer state live in one arena each, so the "
                   "descriptor count does not grow with the number of parameters")
def test_low_descriptor_limit_with_many_parameters_still_trains(watch, tmp_path, logdir):
    config = fast_config(model={"hidden": [16] * 30}, trainer={"start_method": "spawn", "total_steps": 2000})
    model = algorithms.get("a3c").build_model(validate(config))
    assert len(list(model.parameters())) == 64
    path = write_config(tmp_path / "c.yaml", config)
    done = run_cli(watch, "--config", path, "--logdir", logdir, preexec_fn=_low_descriptor_limit(40))
    assert done.returncode == 0, done.stderr
    assert json.loads((only_run_dir(logdir) / "summary.json").read_text())["env_steps"] >= 2000


def _program(watch, *args: str, limit: int) -> dict:
    done = subprocess.run([sys.executable, str(HERE / "programs.py"), *args], capture_output=True, text=True,
                          timeout=120, env=watch.env(), preexec_fn=_low_descriptor_limit(limit))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.fault("7", "`ulimit -n` 64 and 2,000 separate shared arrays through the sharing API",
                   "file_descriptor: an OSError (EMFILE) that names the limit and says to raise `ulimit -n` or use "
                   "file_system; file_system: all 2,000 made and summed by a spawned child under the same limit")
def test_low_descriptor_limit_with_many_storages(watch):
    crowded = _program(watch, "many_storages", "file_descriptor", "2000", limit=64)
    assert not crowded["ok"] and crowded["errno"] == 24 and 0 < crowded["made"] < 64
    assert "too many open files (64 allowed)" in crowded["error"]
    assert "raise `ulimit -n` or call sharing.set_sharing_strategy('file_system')" in crowded["error"]
    named = _program(watch, "many_storages", "file_system", "2000", limit=64)
    assert named["ok"] and named["made"] == 2000 and named["total"] == named["expected"]
    assert named["child_exit"] == 0


@pytest.mark.fault("8", "the run directory's disk fills up (a 4 MiB tmpfs, filled while the run trains), "
                        "or is remounted read-only",
                   "a failed checkpoint is reported (once while the same failure repeats) and leaves the previous one "
                   "intact, loadable and alone (no temp file); lost TensorBoard events and summary.json are reported "
                   "in one line each (no raw 'Exception in thread' from a writer thread); the run keeps training; "
                   "exit 1 after SIGTERM (final checkpoint failed); once the disk is writable again `--resume` "
                   "continues from the kept checkpoint")
@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_checkpoint_on_a_full_or_read_only_disk_keeps_the_previous_one(watch, tmp_path, tmpfs, fault):
    disk = tmpfs("disk", "4m")
    logdir = disk / "runs"
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"checkpoint_every_s": 0.3}))
    run = Train(watch, "--config", config, "--logdir", logdir)
    run_dir = wait_for_run_dir(logdir)
    checkpoint = wait_for_file(run_dir / "checkpoints" / "checkpoint.npz")
    assert wait_until(lambda: load_checkpoint(checkpoint)["run"]["env_steps"] > 0, 60)
    if fault == "full":
        filler, reason = fill(disk), "No space left on device"
    else:
        remount(disk, "ro")
        reason = "Read-only file system"
    run.wait_for(rf"^checkpoint failed: could not write checkpoint '{checkpoint}': {reason}; the previous "
                 rf"checkpoint is kept$")
    kept = checkpoint.read_bytes()
    kept_steps = load_checkpoint(checkpoint)["run"]["env_steps"]
    assert os.listdir(checkpoint.parent) == ["checkpoint.npz"]
    run.wait_for(rf"^TensorBoard events could not be written in '{run_dir}' \({reason}\)")
    assert run.proc.poll() is None, run.stderr  # still training
    time.sleep(1.0)  # several more checkpoint intervals: the same failure is not reported again
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 1, run.stderr
    assert len(re.findall(r"^checkpoint failed", run.stderr, re.MULTILINE)) == 1, run.stderr
    assert f"final checkpoint failed: could not write checkpoint '{checkpoint}': {reason}" in run.stderr
    assert f"could not write '{run_dir / 'summary.json'}': {reason}" in run.stderr
    assert "train_main" not in run.stderr  # the main thread did not crash
    assert "Exception in thread" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(re.findall(r"^TensorBoard events could not be written", run.stderr, re.MULTILINE)) == 1
    assert checkpoint.read_bytes() == kept and os.listdir(checkpoint.parent) == ["checkpoint.npz"]
    assert sorted(os.listdir(run_dir)) == ["checkpoints", "config.yaml", next(run_dir.glob("events.*")).name]

    if fault == "full":
        filler.unlink()
    else:
        remount(disk, "rw")
    target = kept_steps + 2000
    done = run_cli(watch, "--resume", run_dir, "--set", f"trainer.total_steps={target}")
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= target and summary["stop_reason"] == "total_steps reached"


@pytest.mark.fault("8", "the run directory's disk fills up, then space is freed while the run trains",
                   "the failure is reported once; the next checkpoint after the space is freed is written and "
                   "reported; SIGTERM then ends the run with exit 0 and a final checkpoint newer than the kept one")
def test_checkpoints_resume_once_the_disk_has_room_again(watch, tmp_path, tmpfs):
    disk = tmpfs("disk", "4m")
    logdir = disk / "runs"
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"checkpoint_every_s": 0.3},
                                                           logging={"tensorboard": False}))
    run = Train(watch, "--config", config, "--logdir", logdir)
    checkpoint = wait_for_file(wait_for_run_dir(logdir) / "checkpoints" / "checkpoint.npz")
    assert wait_until(lambda: load_checkpoint(checkpoint)["run"]["env_steps"] > 0, 60)
    filler = fill(disk)
    run.wait_for(rf"^checkpoint failed: could not write checkpoint '{checkpoint}': No space left on device")
    kept_steps = load_checkpoint(checkpoint)["run"]["env_steps"]
    time.sleep(1.0)
    filler.unlink()
    run.wait_for(rf"^checkpoint written again: '{checkpoint}'$")
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    assert len(re.findall(r"^checkpoint failed", run.stderr, re.MULTILINE)) == 1, run.stderr
    assert load_checkpoint(checkpoint)["run"]["env_steps"] > kept_steps


# -- room checked at start-up: a refusal is one line, exit 2, and leaves nothing behind ------------
def _assert_refused(code: int, stderr: str, logdir, pattern: str) -> str:
    assert code == 2, stderr
    assert re.fullmatch(pattern + r"\n", stderr), stderr
    assert not logdir.exists() or os.listdir(logdir) == [], os.listdir(logdir)
    return stderr


@pytest.mark.fault("14", "/dev/shm full at start: a private tmpfs over /dev/shm filled to 0 bytes free "
                         "(file_descriptor strategy), and one of a few KiB (file_system strategy)",
                   "exit 2 before anything is made: one line naming /dev/shm and the room it has; no traceback, no "
                   "run directory (today: an OSError traceback from a semaphore, exit 1, a directory left)")
@pytest.mark.parametrize("strategy, size, full", [("file_descriptor", "256k", True), ("file_system", "16k", False)])
def test_full_dev_shm_at_start_is_refused_in_one_line(watch, tmp_path, logdir, strategy, size, full):
    if not can_mount():
        pytest.skip("a private /dev/shm needs root with CAP_SYS_ADMIN")
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"sharing_strategy": strategy}))
    run = Train(watch, "--config", config, "--logdir", logdir, prefix=in_private_tmpfs("/dev/shm", size, full=full))
    _assert_refused(run.finish(), run.stderr, logdir,
                    r"train: error: (no room in /dev/shm: .* free; allowed: at least 64\.0 KiB .*|cannot place the "
                    r"model, optimizer state and run statistics in shared memory \(file_system\): .* left in /dev/shm)")


@pytest.mark.fault("14", "too few file descriptors for the workers: `ulimit -n` 48 (soft and hard) for 64 spawn "
                         "workers; and a soft limit of 24 under a hard one of 4096 for 8",
                   "hard limit too low: exit 2 before anything is made, one line naming trainer.workers, the "
                   "workers asked for and the limit,"
                   "limit, no run directory (today: an EMFILE traceback, exit 1); soft limit too low: raised as far "
                   "as needed, and the run trains (exit 0)")
def test_too_few_descriptors_for_the_workers_is_refused_or_the_soft_limit_raised(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"workers": 64, "start_method": "spawn"}))
    done = run_cli(watch, "--config", config, "--logdir", logdir, preexec_fn=_low_descriptor_limit(48))
    _assert_refused(done.returncode, done.stderr, logdir,
                    r"train: error: config key 'trainer\.workers': got 64 workers, which need about \d+ file "
                    r"descriptors in the main process \(3 per process, \d+ open now, 16 spare\); allowed: at most what "
                    r"the limit allows \(ulimit -n is 48, hard limit 48\): raise it or start fewer processes")

    def soft_24():
        resource.setrlimit(resource.RLIMIT_NOFILE, (24, 4096))

    config = write_config(tmp_path / "c8.yaml", fast_config(trainer={"workers": 8, "start_method": "spawn",
                                                                     "total_steps": 4000}))
    done = run_cli(watch, "--config", config, "--logdir", logdir, preexec_fn=soft_24)
    assert done.returncode == 0, done.stderr
    assert json.loads((only_run_dir(logdir) / "summary.json").read_text())["env_steps"] >= 4000


@pytest.mark.fault("14", "`ulimit -n` (soft and hard) set to the count the start-up check asks for, and to one "
                         "less, for A3C (4 spawn workers), IMPALA (4 forked actors + 2 learners, whose trajectory "
                         "buffer adds segments) and APPO (3 forkserver actors + 1 learner)",
                   "at the count asked for the run trains to its step target (exit 0: the estimate covers every "
                   "role's descriptors, the buffer's included); one less is refused with exit 2 before a run "
                   "directory exists, naming the processes asked for ('4 actors + 2 learners') and their config "
                   "keys (today: IMPALA passes the check with too few, then fails with `Too many open files`, and "
                   "the message counts actors and learners as `trainer.workers`)")
@pytest.mark.parametrize("algorithm, start_method, workers, learners", [
    ("a3c", "spawn", 4, None), ("impala", "fork", 4, 2), ("appo", "forkserver", 3, 1)])
def test_the_descriptor_check_counts_what_each_role_needs(watch, tmp_path, logdir, algorithm, start_method, workers,
                                                           learners):
    config = fast_config(trainer={"workers": workers, "start_method": start_method, "total_steps": 3000})
    if learners is not None:
        config["algorithm"] = {"name": algorithm, "n_steps": 10, "learners": learners, "batch_trajectories": 2}
    path = write_config(tmp_path / "c.yaml", config)
    asked = (f" 'trainer.workers': got {workers} workers" if learners is None else
             f"s 'trainer.workers' and 'algorithm.learners': got {workers} actors + {learners} learner"
             f"{'s' if learners > 1 else ''}")
    pattern = rf"train: error: config key{re.escape(asked)}, which need about (\d+) file descriptors in the main"
    refused = run_cli(watch, "--config", path, "--logdir", logdir, preexec_fn=_low_descriptor_limit(30))
    need = int(re.match(pattern, _assert_refused(refused.returncode, refused.stderr, logdir, pattern + ".*"))[1])
    done = run_cli(watch, "--config", path, "--logdir", logdir, preexec_fn=_low_descriptor_limit(need))
    assert done.returncode == 0, done.stderr
    assert json.loads((only_run_dir(logdir) / "summary.json").read_text())["stop_reason"] == "total_steps reached"
    shutil.rmtree(only_run_dir(logdir))
    refused = run_cli(watch, "--config", path, "--logdir", logdir, preexec_fn=_low_descriptor_limit(need - 1))
    again = re.match(pattern, _assert_refused(refused.returncode, refused.stderr, logdir, pattern + ".*"))
    assert int(again[1]) == need


@pytest.mark.fault("14", "no room on the disk of the log directory at start: a 4 MiB tmpfs filled up, and one "
                         "whose inodes are used up; a new run (logdir not yet made) and a resumed one",
                   "exit 2 before anything is made: one line naming the directory and the bytes or inodes free; no "
                   "run directory and no log directory left (today: a directory with a 0-byte config.yaml); a "
                   "refused resume leaves its directory byte-identical")
@pytest.mark.parametrize("shortage", ["bytes", "inodes"])
def test_no_room_on_disk_at_start_is_refused_and_leaves_nothing(watch, tmp_path, tmpfs, shortage):
    disk = tmpfs("disk", "4m", "nr_inodes=400") if shortage == "inodes" else tmpfs("disk", "4m")
    finished = tmp_path / "finished"
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"total_steps": 1000}))
    assert run_cli(watch, "--config", config, "--logdir", disk / "done").returncode == 0
    run_dir = only_run_dir(disk / "done")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    if shortage == "bytes":
        fill(disk)
        free = r"no room for the run in '{}': .* free on its disk; allowed: at least .* \(the config, a checkpoint"
    else:
        use_up_inodes(disk)
        free = r"no room for the run in '{}': 0 free inodes on its disk; allowed: at least 8"
    logdir = disk / "runs" / "deeper"
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    _assert_refused(done.returncode, done.stderr, logdir, "train: error: " + free.format(re.escape(str(logdir))) + ".*")
    assert not (disk / "runs").exists()
    done = run_cli(watch, "--resume", run_dir)
    _assert_refused(done.returncode, done.stderr, finished,
                    "train: error: " + free.format(re.escape(str(run_dir))) + ".*")
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
