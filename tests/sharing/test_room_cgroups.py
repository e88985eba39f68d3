"""The memory-cgroup part of the room check: cgroup v2 and v1 layouts, limits and no limits."""
from pathlib import Path

from sharing.room import _cgroup_files, cgroup_room, memory_cgroup_files

V1_NO_LIMIT = "9223372036854771712"


def _write(directory: Path, **files: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name.replace("_", ".", 1)).write_text(text + "\n")


def test_v2_limit_leaves_limit_minus_current(tmp_path):
    _write(tmp_path / "user.slice/job", memory_max="1000000", memory_current="250000")
    files = memory_cgroup_files("0::/user.slice/job\n", str(tmp_path))
    assert files == (str(tmp_path / "user.slice/job/memory.max"), str(tmp_path / "user.slice/job/memory.current"))
    assert cgroup_room(files) == 750_000


def test_v2_max_is_no_limit(tmp_path):
    _write(tmp_path / "job", memory_max="max", memory_current="250000")
    assert cgroup_room(memory_cgroup_files("0::/job", str(tmp_path))) is None


def test_v1_memory_controller_limit(tmp_path):
    _write(tmp_path / "memory/docker/abc", memory_limit_in_bytes="4096000", memory_usage_in_bytes="4000000")
    proc = "12:pids:/docker/abc\n4:cpu,memory:/docker/abc\n0::/\n"
    files = memory_cgroup_files(proc, str(tmp_path))
    assert files == (str(tmp_path / "memory/docker/abc/memory.limit_in_bytes"),
                     str(tmp_path / "memory/docker/abc/memory.usage_in_bytes"))
    assert cgroup_room(files) == 96_000


def test_v1_unlimited_is_no_limit(tmp_path):
    _write(tmp_path / "memory", memory_limit_in_bytes=V1_NO_LIMIT, memory_usage_in_bytes="123")
    assert cgroup_room(memory_cgroup_files("4:memory:/", str(tmp_path))) is None


def test_usage_above_the_limit_leaves_no_room(tmp_path):
    _write(tmp_path / "memory", memory_limit_in_bytes="1000", memory_usage_in_bytes="5000")
    assert cgroup_room(memory_cgroup_files("4:memory:/", str(tmp_path))) == 0


def test_a_path_hidden_by_a_cgroup_namespace_falls_back_to_the_root(tmp_path):
    """A container without a cgroup namespace sees the host's path; its mounted root holds its own files."""
    _write(tmp_path, memory_max="2000", memory_current="500")
    assert cgroup_room(memory_cgroup_files("0::/kubepods/pod1/ctr\n", str(tmp_path))) == 1500


def test_no_memory_controller_and_unreadable_files_mean_no_limit(tmp_path):
    assert memory_cgroup_files("3:cpuset:/\n1:name=systemd:/\n", str(tmp_path)) is None
    assert cgroup_room(None) is None
    assert cgroup_room((str(tmp_path / "gone.max"), str(tmp_path / "gone.current"))) is None
    _write(tmp_path / "bad", memory_max="garbage", memory_current="1")
    assert cgroup_room(memory_cgroup_files("0::/bad", str(tmp_path))) is None


def test_this_machine_has_readable_files_or_none():
    files = _cgroup_files()
    if files is not None:
        assert all(Path(f).is_file() for f in files)
        room = cgroup_room(files)
        assert room is None or room >= 0
