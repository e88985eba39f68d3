"""Fixtures of the reliability suite: every test is watched for leftover processes, segments and manager dirs."""
import pytest

from reliability_support import Watch, can_mount, mount_tmpfs, unmount


def pytest_configure(config):
    config.addinivalue_line("markers", "fault(number, injected, checked): the fault of the reliability report "
                                       "a test covers, what it injects and what it checks")


@pytest.fixture(autouse=True)
def watch(request, tmp_path, record_property):
    """Watch the test's processes; afterwards none may be running and none of their segments or sockets left."""
    marker = request.node.get_closest_marker("fault")
    if marker is not None:
        number, injected, checked = marker.args
        record_property("fault", number)
        record_property("injected", injected)
        record_property("checked", checked)
    w = Watch(tmp_path)
    w.start()
    yield w
    w.stop()
    problems = w.leftovers()
    assert not problems, "the test left behind:\n" + "\n".join(problems)


@pytest.fixture
def examples(record_property):
    """A counter a property test bumps once per generated example; the count goes into the report."""
    counter = {"n": 0}
    yield counter
    record_property("measured", f"{counter['n']} generated cases")


@pytest.fixture
def logdir(tmp_path):
    path = tmp_path / "runs"
    path.mkdir()
    return path


@pytest.fixture
def tmpfs(tmp_path):
    """A factory for small tmpfs mounts under tmp_path (root only); each is unmounted after the test."""
    if not can_mount():
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN")
    mounted = []

    def make(name: str, size: str, options: str = ""):
        path = tmp_path / name
        mount_tmpfs(path, size, options)
        mounted.append(path)
        return path

    yield make
    for path in mounted:
        unmount(path)
