"""The file_descriptor strategy: anonymous memfd segments that receivers open through /proc.

A segment is a ``memfd_create`` file: it has no name anywhere, so nothing can be
left behind in /dev/shm whatever kills the processes; the kernel frees it when
the last descriptor and mapping are gone. Every process that holds a storage
keeps one descriptor for it (not one per array: views share their storage), so
it can pass the storage on.

A receiver gets the segment by opening ``/proc/<sender pid>/fd/<fd>`` (one open
and one mmap, no server thread, no round trip to the sender) and checks the
inode, so a recycled descriptor number or process id is refused rather than
mistaken for the segment. This needs the receiver to run as the sender's user
(the ``/proc`` access rule ptrace applies), which processes of one program do.

The sender must still be alive when the receiver unpickles the handle: if it
has exited, the receiver raises a RuntimeError naming the sender (use the
``file_system`` strategy for messages that must outlive their sender). The
sender dropping its array is fine: ``lending`` holds the storage until the
receiver has it. Forked children inherit the mappings and descriptors, so
fork-started workers see the parent's arrays and can send them on.

Each storage costs one descriptor per process holding it; the first use raises
the soft ``RLIMIT_NOFILE`` to the hard limit, and running out anyway raises an
OSError that says to switch to ``file_system``.
"""
from __future__ import annotations

import contextlib
import errno
import os
import resource
from typing import Iterator

from . import _libc, room
from .storage import Storage, register
from .strategies import FILE_DESCRIPTOR

_limit_raised = False


def raise_descriptor_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit, once per process."""
    global _limit_raised
    if _limit_raised:
        return
    _limit_raised = True
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


@contextlib.contextmanager
def _advice_when_out_of_descriptors() -> Iterator[None]:
    """Turn EMFILE into an error that says what to do about it."""
    try:
        yield
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        raise OSError(errno.EMFILE, f"too many open files ({soft} allowed): the file_descriptor sharing "
                                    "strategy keeps one descriptor per shared storage; raise `ulimit -n` or call "
                                    "sharing.set_sharing_strategy('file_system'), which keeps none") from e


def make_segment(nbytes: int, *, reserve: bool = True) -> Storage:
    """A new zero-filled memfd segment of `nbytes`, mapped and entered in the cache.

    `reserve` checks the room left and counts the bytes against this process's
    quota (see `room`); internal bookkeeping segments skip that.
    """
    raise_descriptor_limit()
    token = os.urandom(16)
    maplen = max(nbytes, 1)  # a zero-size array still needs a segment to travel
    with _advice_when_out_of_descriptors():
        if reserve:
            room.reserve(nbytes, FILE_DESCRIPTOR)
        try:
            fd = os.memfd_create("hogshare_" + token.hex(), os.MFD_CLOEXEC)
            try:
                room.allocate(fd, maplen, FILE_DESCRIPTOR)
                addr = _libc.map_shared(fd, maplen, populate=True)
                ino = os.fstat(fd).st_ino
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            if reserve:
                room.release(nbytes)
            raise
    return register(Storage(token=token, nbytes=nbytes, strategy=FILE_DESCRIPTOR, addr=addr, maplen=maplen,
                            fd=fd, ino=ino, created=reserve))


def open_segment(token: bytes, nbytes: int, pid: int, fd: int, ino: int) -> Storage:
    """Map the segment that process `pid` holds as descriptor `fd` (inode `ino`)."""
    raise_descriptor_limit()
    try:
        with _advice_when_out_of_descriptors():
            own = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RuntimeError(f"shared storage {token.hex()[:12]} sent by process {pid} is no longer available: the "
                           "sender exited before this message was received (with the file_descriptor strategy "
                           "a sender must outlive its messages; the file_system strategy lifts that)") from None
    except PermissionError as e:
        raise RuntimeError(f"cannot open /proc/{pid}/fd/{fd} to receive a shared storage ({e.strerror}): the "
                           "file_descriptor strategy needs sender and receiver to run as the same user; use "
                           "sharing.set_sharing_strategy('file_system') otherwise") from None
    try:
        st = os.fstat(own)
        maplen = max(nbytes, 1)
        if st.st_ino != ino or st.st_size < maplen:
            raise RuntimeError(f"shared storage {token.hex()[:12]} sent by process {pid} is no longer available: "
                               f"its descriptor {fd} now names another file (the sender exited or released it)")
        addr = _libc.map_shared(own, maplen, populate=False)
    except BaseException:
        os.close(own)
        raise
    return Storage(token=token, nbytes=nbytes, strategy=FILE_DESCRIPTOR, addr=addr, maplen=maplen, fd=own, ino=ino)
