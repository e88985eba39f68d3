"""Checkpoints: a nested state (dicts, lists, NumPy arrays, JSON values) in one `.npz` file, written atomically.

Arrays become npz entries; everything else becomes a JSON skeleton stored in the
same file (entry `__meta__`), so one `os.replace` swaps the whole checkpoint and
a reader never sees half of one. Files are read with `allow_pickle=False`:
nothing on disk is ever unpickled.

A checkpoint is read as untrusted input: every entry must be stored as it is
(no compression to inflate), its npy header must declare exactly the bytes it
has, and all of them may not exceed the file or what the caller can use; only
then is an array read, so a file never costs more memory than its own size.
What the state must hold (names, shapes, ranges) is checked by its user
(`run_checkpoint.check_saved_state`).
"""
from __future__ import annotations

import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from framework.train.run_dir import write_atomically
from framework.runtime.schema import printable, short_repr

FORMAT = "hogshare-checkpoint"
VERSION = 1
_META = "__meta__"
MAX_META_BYTES = 16 << 20
"""The JSON part of a checkpoint (everything but the arrays)."""


class CheckpointError(RuntimeError):
    """A checkpoint that could not be written or read; the message names the file."""


def _flatten(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The JSON skeleton of node, moving every array into `arrays`."""
    if isinstance(node, np.ndarray):
        if node.dtype.hasobject:
            raise TypeError("object arrays cannot be stored in a checkpoint")
        key = f"a{len(arrays)}"
        arrays[key] = node
        return {"__array__": key}
    if isinstance(node, np.generic):
        return node.item()
    if isinstance(node, Mapping):
        if all(isinstance(k, str) for k in node) and "__array__" not in node and "__items__" not in node:
            return {k: _flatten(v, arrays) for k, v in node.items()}
        return {"__items__": [[k, _flatten(v, arrays)] for k, v in node.items()]}
    if isinstance(node, (list, tuple)):
        return [_flatten(v, arrays) for v in node]
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise TypeError(f"cannot store a {type(node).__name__} in a checkpoint")


def _unflatten(node: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(node, dict):
        if "__array__" in node:
            return arrays[node["__array__"]]
        if "__items__" in node:
            return {k: _unflatten(v, arrays) for k, v in node["__items__"]}
        return {k: _unflatten(v, arrays) for k, v in node.items()}
    if isinstance(node, list):
        return [_unflatten(v, arrays) for v in node]
    return node


def save_checkpoint(path: str | Path, state: Mapping[str, Any]) -> None:
    """Write state to path atomically (temp file in the same directory, fsync, rename).

    On any failure (disk full, unwritable directory) the temp file is removed,
    the previous checkpoint at path is left as it was, and CheckpointError says why.
    """
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    skeleton = {"format": FORMAT, "version": VERSION, "state": _flatten(state, arrays)}
    arrays[_META] = np.frombuffer(json.dumps(skeleton).encode(), dtype=np.uint8)
    try:
        write_atomically(path, lambda f: np.savez(f, **arrays))
    except OSError as exc:
        raise CheckpointError(f"could not write checkpoint '{path}': {exc.strerror or exc}; "
                              f"the previous checkpoint is kept") from exc


class _Corrupt(ValueError):
    """A checkpoint file whose structure is not what save_checkpoint writes."""


def _members(zf: zipfile.ZipFile, file_size: int, max_bytes: int | None, path: Path) -> dict[str, zipfile.ZipInfo]:
    """The npy entries of an open npz by name, once their sizes are known to be honest and bounded.

    np.savez stores entries uncompressed, so an entry's bytes are in the file:
    no entry may claim more (a compressed or inflated one could stand for
    gigabytes), and their sum may not exceed max_bytes.
    """
    members: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise _Corrupt(f"entry {info.filename!r} is compressed; checkpoints store entries as they are")
        if not info.filename.endswith(".npy"):
            raise _Corrupt(f"entry {info.filename!r} is not an array (.npy)")
        members[info.filename[:-4]] = info
    total = sum(info.file_size for info in members.values())
    if total > file_size:
        raise _Corrupt(f"its entries claim {total} bytes, more than the file's {file_size}")
    if max_bytes is not None and total > max_bytes:
        raise CheckpointError(f"checkpoint '{path}' holds {total} bytes of arrays; allowed: at most {max_bytes} for "
                              f"the model and optimizer of this config")
    if _META not in members:
        raise _Corrupt(f"it has no {_META} entry")
    return members


def _array_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, key: str, path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from an entry's npy header, checked against the entry's size; object arrays are refused."""
    with zf.open(info) as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(f)
        header_bytes = f.tell()
    if dtype.hasobject:
        raise CheckpointError(f"checkpoint '{path}' holds a pickled Python object (entry '{key}'), which is never "
                              f"loaded: checkpoints hold only numeric arrays and JSON")
    if math.prod(shape) * dtype.itemsize != info.file_size - header_bytes:
        raise _Corrupt(f"entry {key!r} declares shape {shape} of {dtype}, which its {info.file_size} bytes do not hold")
    return shape, dtype


def load_checkpoint(path: str | Path, max_bytes: int | None = None) -> dict[str, Any]:
    """The state saved at path; CheckpointError naming the file if missing, truncated, corrupt or pickled.

    Reads at most the file's size, and nothing when its entries hold more than
    `max_bytes` (what the caller's model can use); every entry's declared
    shape is checked against its size before any array is read.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' not found")
    try:
        with open(path, "rb") as f:
            file_size = os.fstat(f.fileno()).st_size
            with zipfile.ZipFile(f) as zf:
                members = _members(zf, file_size, max_bytes, path)
                for key, info in members.items():
                    _array_header(zf, info, key, path)
                arrays = {}
                for key, info in members.items():
                    with zf.open(info) as entry:
                        arrays[key] = np.lib.format.read_array(entry, allow_pickle=False)
        meta = arrays.pop(_META)
        if meta.dtype != np.uint8 or meta.ndim != 1 or meta.size > MAX_META_BYTES:
            raise _Corrupt(f"its {_META} entry is not JSON text of at most {MAX_META_BYTES} bytes")
        skeleton = json.loads(meta.tobytes().decode())
        if not isinstance(skeleton, dict) or skeleton.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        if skeleton.get("version") != VERSION:
            raise ValueError(f"format version {short_repr(skeleton.get('version'))}, expected {VERSION}")
        return _unflatten(skeleton["state"], arrays)
    except _Corrupt as exc:
        raise CheckpointError(f"checkpoint '{path}' is truncated or corrupt and cannot be loaded ({exc})") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, KeyError, ValueError, UnicodeDecodeError,
            TypeError, AttributeError, IndexError, RecursionError, MemoryError) as exc:
        raise CheckpointError(f"checkpoint '{path}' is truncated or corrupt and cannot be loaded "
                              f"({type(exc).__name__}: {printable(str(exc))})") from None
