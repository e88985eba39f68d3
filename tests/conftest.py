"""Fixtures shared by every test folder (the suite's helper modules live in tests/support, on pythonpath)."""
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

# `train` signs each run's config.yaml with a key of this user's under $XDG_CONFIG_HOME/hogshare (framework.train.trust):
# the suite, and every command it starts, keeps its own there, so that no test reads or writes the real one.
CONFIG_HOME = tempfile.mkdtemp(prefix="suite-config-home-")
os.environ["XDG_CONFIG_HOME"] = CONFIG_HOME


def pytest_unconfigure(config):
    shutil.rmtree(CONFIG_HOME, ignore_errors=True)

# A suite started under nohup, or as a script's background job, inherits SIGHUP or SIGINT ignored, and so would
# every command a test starts (an ignored signal stays ignored across exec, and `train` keeps it so): the tests
# start theirs with the default dispositions, whatever started the suite.
for _signum in (signal.SIGHUP, signal.SIGINT):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, signal.SIG_DFL if _signum == signal.SIGHUP else signal.default_int_handler)


@pytest.fixture
def logdir(tmp_path) -> Path:
    """An empty directory for run directories."""
    path = tmp_path / "runs"
    path.mkdir()
    return path
