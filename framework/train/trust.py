"""Which run directories may make hogshare import code: those this user's `train` wrote, and those the user trusts.

A config names code to import in three keys: `env.id: module:Name`,
`model.factory: module:function` and `algorithm.name: module:PluginClass`
(framework.runtime.user_code); importing a module runs it. A config the user
hands over (`train --config`, `framework.train.run`) is the user's own. A run
directory's config.yaml may come from anywhere (a download, a shared disk),
and `evaluate --run`, `evaluate --export`, `train --resume` and
`load_policy` read it: they import the code it names only when

- this user's `train` wrote it: train signs every config.yaml it writes with
  HMAC-SHA256 under a key of this user's (KEY_FILE in `config_dir()`: 32
  random bytes, mode 0600, made on first use), on the file's first line,
  which YAML reads as a comment; or
- the user says so: `--trust-code`, or `trust_code=True` in Python.

Otherwise `read_run_config` refuses it in one line, before anything is
imported, naming the code and how to trust it. A config that names no code
(gymnasium ids, hogshare's own algorithms and model) loads whoever wrote it.
The signature says who wrote the config, not what a module holds: modules are
still found as `python -m` finds them, the current directory first. Copying a
run directory keeps its signature; editing its config.yaml by hand drops it.
The price: one HMAC of a few KiB per config written or read.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from framework.algorithms import is_spec
from framework.runtime.schema import ConfigError, printable
from framework.train import yaml_input
from framework.train.run_dir import run_config_file

KEY_FILE = "trust.key"
KEY_BYTES = 32
_SIGNATURE = re.compile(r"# hogshare-signature: hmac-sha256:([0-9a-f]{64})\n")
_DOMAIN = b"hogshare config.yaml\n"
"""Prefixed to what is signed, so that the key signs nothing else by accident."""


def config_dir() -> Path:
    """Where this user's key lives: $XDG_CONFIG_HOME/hogshare, else ~/.config/hogshare."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "hogshare"


def _read_key(path: Path) -> bytes | None:
    """The key at path (None when there is none); ConfigError when it is not this user's secret."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"key file '{printable(str(path))}' cannot be read ({exc.strerror or exc}); allowed: a "
                          f"regular file of this user's, mode 0600 (remove it: train makes a new one)") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise ConfigError(f"key file '{printable(str(path))}' is not this user's alone (mode "
                              f"{stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}); allowed: a regular file "
                              f"owned by uid {os.getuid()} with mode 0600 (chmod 600 it, or remove it: train makes "
                              f"a new one)")
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise ConfigError(f"key file '{printable(str(path))}' holds {len(key)} bytes; allowed: {KEY_BYTES} (remove "
                          f"it: train makes a new one)")
    return key


def _key(create: bool) -> bytes | None:
    """This user's key; made first when `create` and there is none (two trains at once make one between them:
    each writes a temp file, and the first hard link to the name wins)."""
    path = config_dir() / KEY_FILE
    key = _read_key(path)
    if key is not None or not create:
        return key
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{KEY_FILE}.{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
    finally:
        temp.unlink(missing_ok=True)
    return _read_key(path)


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, _DOMAIN + body.encode(), hashlib.sha256).hexdigest()


def signed(text: str) -> str:
    """text (a config.yaml's) with this user's signature as its first line; the key is made if there is none.
    OSError when the key cannot be made, ConfigError when the one there is not this user's alone."""
    return f"# hogshare-signature: hmac-sha256:{_mac(_key(create=True), text)}\n{text}"


def signed_by_this_user(text: str) -> bool:
    """Whether text starts with a signature this user's key made over the rest of it."""
    match = _SIGNATURE.match(text)
    if match is None:
        return False
    key = _key(create=False)
    return key is not None and hmac.compare_digest(match[1], _mac(key, text[match.end():]))


def code_named(raw: Any) -> list[str]:
    """What a raw (unchecked) config names to import, as `key 'value'`; [] when nothing."""
    def value(section: str, key: str) -> Any:
        part = raw.get(section) if isinstance(raw, dict) else None
        return part.get(key) if isinstance(part, dict) else None

    names_code = (("env.id", value("env", "id"), lambda v: ":" in v),
                  ("model.factory", value("model", "factory"), lambda v: True),
                  ("algorithm.name", value("algorithm", "name"), is_spec))
    return [f"{key} {printable(repr(found), limit=200)}" for key, found, is_code in names_code
            if isinstance(found, str) and is_code(found)]


def read_run_config(run_dir: Path, trust_code: bool = False) -> Any:
    """A run directory's config.yaml, parsed (bounded: yaml_input); ConfigError when it names code to import and
    neither this user's train wrote it nor `trust_code` is set (see the module docstring)."""
    path = run_config_file(run_dir)
    text = yaml_input.read_text(path)
    raw = yaml_input.parse_file(path, text)
    named = code_named(raw)
    if named and not trust_code and not signed_by_this_user(text):
        raise ConfigError(f"run directory '{printable(str(run_dir))}': its config.yaml names code to import "
                          f"({', '.join(named)}) and was not written by this user's train (no valid signature); "
                          f"allowed: a run you trust, with --trust-code (trust_code=True in Python), once you have "
                          f"read its config.yaml: importing a module runs it")
    return raw
