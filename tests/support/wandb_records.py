"""The records of a W&B run's transaction log (run-<id>.wandb), read back with W&B's own protobuf messages.

wandb no longer ships a Python reader of the log (its Go core writes and reads it). The file is LevelDB's log
format with W&B's header: ':W&B', the magic 0xBEE1 and version 0 (7 bytes), then 32 KiB blocks of chunks, each a
CRC32C (4 bytes), a length (2, little-endian) and a type (1: full, 2: first, 3: middle, 4: last); a block whose
room left is under 7 bytes is padded with zeros. Each assembled chunk is a `wandb_internal_pb2.Record`.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    """The Records of a .wandb file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data.startswith(HEADER), data[:7]
    found, pending, offset = [], b"", len(HEADER)
    while offset + 7 <= len(data):
        if BLOCK - offset % BLOCK < 7:  # padding at a block's end
            offset += BLOCK - offset % BLOCK
            continue
        length, kind = struct.unpack("<HB", data[offset + 4:offset + 7])
        chunk = data[offset + 7:offset + 7 + length]
        offset += 7 + length
        if kind == 0 and length == 0:  # zeros: the end of what was written
            break
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
    return found


def run_data(run_dir: Path) -> dict[str, Any]:
    """What an offline W&B run directory holds: its history rows ({key: value}, with _step), its config and summary
    (the last update of each key), and its artifacts' manifests ({name: {path: digest}})."""
    import json

    (log,) = Path(run_dir).glob("run-*.wandb")
    data: dict[str, Any] = {"history": [], "config": {}, "summary": {}, "artifacts": {}, "exit_code": None}
    for record in records(log):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            data["history"].append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                                    for item in record.history.item})
        elif kind in ("config", "run"):
            for item in (record.config if kind == "config" else record.run.config).update:
                data["config"][item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "summary":
            for item in record.summary.update:
                data["summary"][item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "artifact":
            data["artifacts"][record.artifact.name] = {entry.path: entry.digest
                                                       for entry in record.artifact.manifest.contents}
        elif kind == "exit":
            data["exit_code"] = record.exit.exit_code
    return data
