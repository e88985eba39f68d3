"""Who can reach a run's shared memory: segment modes and names, the manager's socket, and a second user."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reliability_support import HERE, SHM_DIR

pytestmark = pytest.mark.timeout(60)
SYSTEM_PYTHON = "/usr/bin/python3"

PROBE = r"""
import errno, json, os, socket, sys
names, pid, fd, sock = json.loads(sys.argv[1])
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def connect():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(sock)
        s.sendall(b"JOIN\n")
        if not s.recv(256).startswith(b"OK "):
            raise OSError(errno.EPROTO, "no membership")
results = {
    "read segment": attempt(lambda: os.close(os.open("/dev/shm/" + names[0], os.O_RDONLY))),
    "write segment": attempt(lambda: os.close(os.open("/dev/shm/" + names[0], os.O_RDWR))),
    "open descriptor": attempt(lambda: os.close(os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR))),
    "list socket dir": attempt(lambda: os.listdir(os.path.dirname(sock))),
    "join manager": attempt(connect),
}
print(json.dumps(results))
"""


@pytest.fixture
def holder(watch):
    """A process holding file_system segments, a file_descriptor segment and a manager connection: what it reports."""
    proc = subprocess.Popen([sys.executable, str(HERE / "programs.py"), "hold_segments"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=watch.env())
    report = json.loads(proc.stdout.readline())
    yield report
    proc.stdin.close()
    proc.wait(30)


def _probe(report: dict, *user_prefix: str) -> dict:
    args = json.dumps([report["names"], report["pid"], report["fd"], report["socket"]])
    done = subprocess.run([*user_prefix, SYSTEM_PYTHON, "-I", "-c", PROBE, args], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.fault("S", "the file_system segments, manager socket and descriptor of a running process",
                   "segments are 0600 regular files named `hogshare_<group>_c<client>_<suffix>` (group and suffix "
                   "64 random bits each), all distinct; the socket is 0600 in a 0700 directory; the "
                   "file_descriptor segment has no name in /dev/shm")
def test_segments_and_manager_socket_are_private(holder):
    names = holder["names"]
    assert len(set(names)) == len(names) == 20
    for name in names:
        assert re.fullmatch(r"hogshare_[0-9a-f]{16}_c\d+_[0-9a-f]{16}", name), name
        info = (SHM_DIR / name).lstat()
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
    assert len({name.rsplit("_", 1)[1] for name in names}) == 20
    socket_path = Path(holder["socket"])
    assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(socket_path.stat().st_mode) and stat.S_IMODE(socket_path.stat().st_mode) == 0o600
    target = os.readlink(f"/proc/{holder['pid']}/fd/{holder['fd']}")
    assert target.startswith("/memfd:hogshare_"), target
    assert not any(n.startswith(target[len("/memfd:"):].split()[0]) for n in os.listdir(SHM_DIR))


@pytest.mark.fault("S", "a second user (`nobody` via `setpriv --reuid=nobody --regid=nogroup --clear-groups`) "
                        "tries to open a file_system segment (for reading, for writing), the file_descriptor segment "
                        "through /proc, and to join the manager",
                   "every attempt fails with EACCES/EPERM; the same probe run as the owner succeeds (the control)")
def test_another_user_can_neither_open_a_segment_nor_talk_to_the_manager(holder):
    if os.getuid() != 0 or shutil.which("setpriv") is None or not Path(SYSTEM_PYTHON).exists():
        pytest.skip("running a probe as a second user needs root, setpriv and /usr/bin/python3")
    owner = _probe(holder)
    assert set(owner.values()) == {"allowed"}, owner
    stranger = _probe(holder, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
    assert all(result in ("EACCES", "EPERM") for result in stranger.values()), stranger
