"""Crafting checkpoint files by hand, for the tests that damage them: npy entries with any header, zips of any
entries (stored or compressed), and the memory a load takes."""
from __future__ import annotations

import io
import tracemalloc
import zipfile
from pathlib import Path
from typing import Callable


def npy(header: dict, data: bytes) -> bytes:
    """An npy entry with the given header (shape, descr, fortran_order) followed by data, whatever they say."""
    import numpy as np

    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + data


def write_zip(path: Path, entries: dict[str, bytes], compress: set[str] = frozenset()) -> None:
    """A zip of the entries, stored, or deflated for the names in `compress`."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED)


def read_zip(path: Path) -> dict[str, bytes]:
    """Every entry of a zip, by name."""
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def peak_bytes(action: Callable[[], None]) -> int:
    """The most memory Python and NumPy allocated while `action` ran (tracemalloc)."""
    tracemalloc.start()
    try:
        action()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak
