"""The run directory: made only once a run can start, locked while a `train` uses it, written atomically, and
cleared of the temp files a killed run left.

- `NewRunDir` makes <logdir>/<experiment>-<YYYYmmdd-HHMMSS>[-N] after every
  start-up check has passed; when filling it fails (the disk fills up, turns
  read-only), `remove` takes it away again with any parent it made, so a
  refused start leaves nothing behind.
- `lock` holds an exclusive flock on the directory for the life of the
  process: a second `train --resume` of a run that is training is refused
  instead of writing into it. The kernel drops the lock however the process
  ends, and nothing is written to take it.
- `write_atomically` writes beside the final name (a temp file it holds an
  flock on while writing), syncs, renames over it and syncs the directory: a
  reader finds the old file or the new one, never a part of one
  (checkpoints, config.yaml, summary.json, recordings). `check_replaceable`
  refuses a path given by the user (an export, a recording) that is a
  symbolic link, a device, a FIFO, a socket or a directory: a rename would
  replace it with a regular file.
- `run_config_file` finds a run directory's config.yaml, refusing a path
  that is not a directory made by train (`evaluate`, `--resume`, `load_policy`).
- `remove_leftovers` deletes the temp files of writes cut short by SIGKILL.
  A resume calls it once the resume is accepted: a refused one leaves the
  directory byte-identical.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Callable

from framework.runtime.schema import ConfigError, printable
from framework.train.startup import RunError

TEMP_SUFFIX = ".tmp"
CONFIG_FILE = "config.yaml"
CHECKPOINTS = "checkpoints"
VIDEOS = "videos"


class NewRunDir:
    """A run directory made for a new run, which `remove` takes away again (with the parents it made)."""

    def __init__(self, logdir: str | Path, experiment: str):
        logdir = Path(logdir)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        missing = [p for p in (logdir, *logdir.parents) if not p.exists()]
        try:
            logdir.mkdir(parents=True, exist_ok=True)
            self._made_parents = missing
            for n in range(1000):
                path = logdir / (f"{experiment}-{stamp}" + (f"-{n}" if n else ""))
                try:
                    path.mkdir()
                    self.path = path
                    return
                except FileExistsError:
                    continue
        except OSError as exc:
            self._remove_parents(missing)
            raise RunError(f"cannot create a run directory in '{printable(str(logdir))}': "
                           f"{exc.strerror or exc}") from None
        self._remove_parents(missing)
        raise RunError(f"cannot create a run directory in '{printable(str(logdir))}': every name "
                       f"{experiment}-{stamp}[-N] is taken")

    def remove(self) -> None:
        """Delete the run directory and whatever is in it, then the parents made for it while they are empty."""
        shutil.rmtree(self.path, ignore_errors=True)
        self._remove_parents(self._made_parents)

    @staticmethod
    def _remove_parents(made: list[Path]) -> None:
        for parent in made:  # deepest first
            try:
                parent.rmdir()
            except OSError:
                return


def lock(run_dir: Path) -> int:
    """An open descriptor holding an exclusive lock on run_dir (kept until the process ends or closes it).

    RunError when another process holds it: a `train` is running in that directory.
    """
    try:
        fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise RunError(f"cannot open the run directory '{printable(str(run_dir))}': {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunError(f"run directory '{printable(str(run_dir))}' is in use by another train process; allowed: a "
                       f"run directory no train is running in") from None
    return fd


def write_atomically(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write a file through `write(f)` beside path, sync it, rename it over path and sync the directory.

    On failure (OSError: disk full, read-only) the temp file is removed and path is left as it was.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held while it is written: is_locked tells a live write from a killed one
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def check_replaceable(path: Path, what: str) -> None:
    """ConfigError (naming `what`, the argument) unless path is a new name or a regular file, the only things
    write_atomically may replace: its rename would put a regular file in place of a device, a FIFO or a symbolic
    link (whose target it would leave alone), so these are refused, and a link is never followed."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{what}: cannot check '{printable(str(path))}' ({exc.strerror or exc}); allowed: a "
                          f"regular file or a new name") from None
    for test, kind in _KINDS:
        if test(mode):
            raise ConfigError(f"{what}: '{printable(str(path))}' is {kind}; allowed: a regular file (replaced) or a "
                              f"new name")


def is_locked(path: Path) -> bool:
    """Whether a live process holds the lock of a temp file of write_atomically (the kernel drops a killed one's)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def remove_leftovers(run_dir: Path) -> list[str]:
    """Delete the temp files of writes that never finished (their process was killed); their names."""
    removed = []
    for directory in (run_dir, run_dir / CHECKPOINTS, run_dir / VIDEOS):
        for leftover in directory.glob(f".*{TEMP_SUFFIX}"):
            if leftover.is_file():
                leftover.unlink(missing_ok=True)
                removed.append(str(leftover.relative_to(run_dir)))
    return removed


def run_config_file(run_dir: Path) -> Path:
    """run_dir's config.yaml; ConfigError when run_dir is not a directory made by train."""
    shown = printable(str(run_dir))
    try:
        info = os.stat(run_dir)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"run directory '{shown}': not found; allowed: a directory made by train") from None
    except OSError as exc:
        raise ConfigError(f"run directory '{shown}': cannot be read ({exc.strerror or exc}); allowed: a directory "
                          f"made by train") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"run directory '{shown}': not a directory; allowed: a directory made by train")
    path = run_dir / CONFIG_FILE
    if not os.path.lexists(path):
        raise ConfigError(f"run directory '{shown}': holds no {CONFIG_FILE}; allowed: a directory made by train")
    return path
