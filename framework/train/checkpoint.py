"""Checkpoints: a nested state (dicts, lists, NumPy arrays, JSON values) in one `.npz` file, written atomically.

Arrays become npz entries; everything else becomes a JSON skeleton stored in the
same file (entry `__meta__`), so one `os.replace` swaps the whole checkpoint and
a reader never sees half of one. Files are read with `allow_pickle=False`:
nothing on disk is ever unpickled.
"""
from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

FORMAT = "hogshare-checkpoint"
VERSION = 1
_META = "__meta__"


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
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise CheckpointError(f"could not write checkpoint '{path}': {exc.strerror or exc}; "
                              f"the previous checkpoint is kept") from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _entry(npz: Any, key: str, path: Path) -> np.ndarray:
    """One array of an open npz; CheckpointError when it is a pickled object array (never unpickled)."""
    try:
        return npz[key]
    except ValueError as exc:
        if "allow_pickle" not in str(exc):
            raise
        raise CheckpointError(f"checkpoint '{path}' holds a pickled Python object (entry '{key}'), which is never "
                              f"loaded: checkpoints hold only numeric arrays and JSON") from None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The state saved at path; CheckpointError naming the file if missing, truncated, corrupt or pickled."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' not found")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: _entry(npz, k, path) for k in npz.files}
        skeleton = json.loads(arrays.pop(_META).tobytes().decode())
        if skeleton.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        if skeleton.get("version") != VERSION:
            raise ValueError(f"format version {skeleton.get('version')!r}, expected {VERSION}")
        return _unflatten(skeleton["state"], arrays)
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, ValueError, UnicodeDecodeError,
            TypeError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint '{path}' is truncated or corrupt and cannot be loaded "
                              f"({type(exc).__name__}: {exc})") from None
