"""The optional extras some environments need (Box2D for LunarLander, ale-py for Atari, MuJoCo), and what to run
when one is missing: such an env.id is refused at config validation with the `pip install` that brings it."""
from __future__ import annotations

import importlib.util

import gymnasium as gym

from framework.rl.envs.atari import ALE_ENTRY_POINT, ATARI_ID

EXTRAS = {"box2d": ("Box2D", "pygame"), "atari": ("ale_py", "cv2"), "mujoco": ("mujoco", "imageio")}
"""The optional extras (pyproject.toml) that some environments need, and the modules each one installs."""


def extra_needed(env_id: str) -> str | None:
    """The name of the optional extra env_id needs (see EXTRAS), or None."""
    module, _, name = env_id.rpartition(":")
    if module == "ale_py" or name.startswith("ALE/") or name == ATARI_ID:
        return "atari"
    spec = gym.envs.registry.get(name)
    entry = spec.entry_point if spec is not None and isinstance(spec.entry_point, str) else ""
    if entry == ALE_ENTRY_POINT:
        return "atari"
    if entry.startswith("gymnasium.envs.mujoco"):
        return "mujoco"
    return "box2d" if entry.startswith("gymnasium.envs.box2d") else None


def install_hint(extra: str) -> str:
    """The command that installs an extra."""
    return f"pip install -e '.[{extra}]' in a checkout (or pip install 'hogshare[{extra}]')"


def missing_extra_message(env_id: str) -> str | None:
    """What to install when env_id needs an extra that is not installed, else None."""
    extra = extra_needed(env_id)
    missing = [] if extra is None else [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"{env_id} needs the optional '{extra}' extra, which is not installed (module {missing[0]!r} "
            f"missing): run {install_hint(extra)}")
