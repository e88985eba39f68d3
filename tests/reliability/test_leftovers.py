"""What killed runs leave behind (fault 15): the temp file of a checkpoint write cut short by SIGKILL, the fork
server's socket directory in /tmp and a Hogwild lock in /dev/shm (SIGKILL of the main process, or of its whole
process group), and a second `train` that would write into a run directory in use."""
import os
import signal

import pytest

from framework.train.checkpoint import load_checkpoint
from reliability_support import (SHM_DIR, Train, fast_config, mapped_semaphores, run_cli, still_alive, wait_for_file,
                                 wait_for_run_dir, wait_until, worker_pids, write_config)
from run_configs import hogwild_config
from train_cli import summary

pytestmark = pytest.mark.timeout(180)


@pytest.mark.fault("15", "SIGKILL of the main process while it writes a checkpoint (12 MiB every 50 ms; killed as "
                         "soon as the temp file exists), then `--resume`",
                   "the kill leaves `.checkpoint.npz.*.tmp` beside the intact previous checkpoint; the resume "
                   "removes it, says so in one line, and continues from the intact checkpoint with exit 0")
def test_temp_file_of_a_killed_checkpoint_write_is_removed_by_the_resume(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(model={"hidden": [1024, 1024]},
                                                           trainer={"checkpoint_every_s": 0.05, "workers": 1}))
    run = Train(watch, "--config", config, "--logdir", logdir)
    checkpoints = wait_for_run_dir(logdir) / "checkpoints"
    wait_for_file(checkpoints / "checkpoint.npz")

    def writing() -> list[str]:
        return [p.name for p in checkpoints.iterdir() if p.name.endswith(".tmp")]

    assert wait_until(writing, 120, interval=0.002)
    run.proc.kill()
    assert run.finish() == -signal.SIGKILL
    [leftover] = writing()
    steps = load_checkpoint(checkpoints / "checkpoint.npz")["run"]["env_steps"]
    done = run_cli(watch, "--resume", checkpoints.parent, "--set", f"trainer.total_steps={steps + 500}",
                   "--set", "trainer.checkpoint_every_s=60")
    assert done.returncode == 0, done.stderr
    assert f"removed 'checkpoints/{leftover}', left by a write that never finished" in done.stderr
    assert os.listdir(checkpoints) == ["checkpoint.npz"]
    assert summary(checkpoints.parent)["env_steps"] >= steps + 500


@pytest.mark.fault("15", "SIGKILL of the main process of a forkserver run, or of its whole process group (`kill -9 "
                         "-PGID`: main process, fork server, workers and resource tracker at once; TMPDIR private "
                         "to the test)",
                   "nothing is left in TMPDIR: the fork server removes its socket and the /tmp/pymp-* directory "
                   "around it when the main process dies alone, and a watcher in a session of its own removes it "
                   "when the fork server dies too (one directory per killed run stayed for good)")
@pytest.mark.parametrize("group", [False, True], ids=["main process", "process group"])
def test_killed_forkserver_run_leaves_no_socket_directory(watch, tmp_path, logdir, group):
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"start_method": "forkserver"}))
    run = Train(watch, "--config", config, "--logdir", logdir, start_new_session=group)
    workers = worker_pids(run.pid, 2)
    assert list(watch.tmpdir.glob("pymp-*/listener-*")), os.listdir(watch.tmpdir)
    if group:
        os.killpg(run.pid, signal.SIGKILL)
    else:
        run.proc.kill()
    assert run.finish() == -signal.SIGKILL
    assert still_alive(workers, 5) == []
    assert wait_until(lambda: not list(watch.tmpdir.glob("pymp-*")), 10), os.listdir(watch.tmpdir)


@pytest.mark.fault("15", "SIGKILL of the whole process group of a Hogwild run with `algorithm.locked: true` (spawn "
                         "workers, resource tracker included) while it trains",
                   "nothing the run named in /dev/shm is left: the lock is a robust mutex in a memfd, not a named "
                   "semaphore (a /dev/shm/sem.mp-* stayed for good: only the killed resource tracker unlinks it)")
def test_group_killed_locked_hogwild_run_leaves_no_semaphore(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", hogwild_config(
        algorithm={"locked": True}, trainer={"start_method": "spawn", "checkpoint_every_s": 0.3, "max_seconds": 120}))
    run = Train(watch, "--config", config, "--logdir", logdir, start_new_session=True)
    workers = worker_pids(run.pid, 2)
    checkpoint = wait_for_file(wait_for_run_dir(logdir) / "checkpoints" / "checkpoint.npz")
    assert wait_until(lambda: load_checkpoint(checkpoint)["run"]["env_steps"] > 0, 60), run.stderr
    semaphores = set().union(*map(mapped_semaphores, [run.pid, *workers]))
    os.killpg(run.pid, signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL
    assert still_alive(workers, 5) == []
    left = {name for name in semaphores if (SHM_DIR / name).exists()}
    for name in left:
        (SHM_DIR / name).unlink()
    assert not left


@pytest.mark.fault("15", "`train --resume` of a run directory while the run is still training in it",
                   "exit 2, one line saying the directory is in use by another train; nothing of it changes; the "
                   "running one goes on and ends with exit 0 on SIGTERM")
def test_resuming_a_run_that_is_still_training_is_refused(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"checkpoint_every_s": 30}))
    run = Train(watch, "--config", config, "--logdir", logdir)
    run_dir = wait_for_run_dir(logdir)
    run.wait_for("^run directory: ")
    done = run_cli(watch, "--resume", run_dir)
    assert done.returncode == 2
    assert done.stderr == (f"train: error: run directory '{run_dir}' is in use by another train process; "
                           f"allowed: a run directory no train is running in\n")
    assert run.proc.poll() is None
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    assert summary(run_dir)["stop_reason"] == "SIGTERM"
