"""The few libc calls the standard library lacks: mmap returning a raw address, munmap, prctl.

Mappings are made with libc rather than the ``mmap`` module because ``mmap.mmap``
duplicates the file descriptor it is given and hides the copy, which would
double the descriptors a shared storage costs.
"""
from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)

_PROT_READ_WRITE = 0x1 | 0x2
_MAP_SHARED = 0x01
_MAP_POPULATE = 0x8000
_MAP_FAILED = ctypes.c_void_p(-1).value
PR_SET_PDEATHSIG = 1


def _raise_errno(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def map_shared(fd: int, length: int, populate: bool) -> int:
    """Map `length` bytes of `fd` read-write and shared; return the address.

    `populate` pre-faults every page, which is cheaper than taking one fault per
    page when the caller is about to write the whole mapping.
    """
    flags = _MAP_SHARED | (_MAP_POPULATE if populate else 0)
    addr = _libc.mmap(None, length, _PROT_READ_WRITE, flags, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        _raise_errno(f"mmap of {length} bytes failed")
    return addr


def unmap(addr: int, length: int) -> None:
    """Release a mapping made by `map_shared`."""
    if _libc.munmap(addr, length) != 0:
        _raise_errno("munmap failed")


def prctl(option: int, arg: int) -> None:
    """Call prctl(2) with one argument."""
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        _raise_errno(f"prctl({option}) failed")
