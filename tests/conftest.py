"""Fixtures shared by every test folder (the suite's helper modules live in tests/support, on pythonpath)."""
import signal
from pathlib import Path

import pytest

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
