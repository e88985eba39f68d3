"""What killed runs leave behind (fault 15): the fork server's socket directory in /tmp."""
import os
import signal

import pytest

from reliability_support import Train, fast_config, still_alive, wait_until, worker_pids, write_config

pytestmark = pytest.mark.timeout(180)


@pytest.mark.fault("15", "SIGKILL of the main process of a forkserver run (TMPDIR private to the test)",
                   "the workers and the fork server exit, and the fork server removes its socket and the "
                   "/tmp/pymp-* directory around it: nothing is left in TMPDIR (today one directory per killed run)")
def test_killed_forkserver_run_leaves_no_socket_directory(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={"start_method": "forkserver"}))
    run = Train(watch, "--config", config, "--logdir", logdir)
    workers = worker_pids(run.pid, 2)
    assert list(watch.tmpdir.glob("pymp-*/listener-*")), os.listdir(watch.tmpdir)
    run.proc.kill()
    assert run.finish() == -signal.SIGKILL
    assert still_alive(workers, 5) == []
    assert wait_until(lambda: not list(watch.tmpdir.glob("pymp-*")), 10), os.listdir(watch.tmpdir)
