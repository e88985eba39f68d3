"""Recordings of greedy episodes: rgb frames written as an animated GIF or an MP4, and the extra they need.

`evaluate --record FILE` and the monitor's `logging.video_every_s` pass an
algorithm's `record` a sink that takes its frames one at a time, so no
recording holds raw frames:

- `GifFrames` quantizes each frame as it comes, to a 256-colour palette of
  its own (Pillow's fast octree, no dithering; about 5 ms for a 600x400
  CartPole frame), keeps it at one byte a pixel, and encodes the GIF (LZW,
  about 4 ms a frame) at the end: Pillow writes a GIF whole, so a long
  recording holds those bytes until then (240 kB a CartPole frame).
- `Mp4Stream` encodes H.264 (yuv420p, which every player and browser reads)
  as frames come and writes it to the file as it goes (about 5 ms a frame).

Both play at FPS frames a second. The libraries: PyAV (a 36 MB wheel) bundles
FFmpeg with libx264 and encodes in this process, where imageio-ffmpeg (68 MB,
plus imageio) pipes frames to an ffmpeg executable it ships and OpenCV's
wheels write no H.264; Pillow comes with tensorboard and quantizes rgb frames
itself (FFmpeg's GIF encoder takes palette frames only, made by a filter
pass). Classic control environments render with pygame. The `video` extra
installs all three; `missing_extra` names it when one of them is not there.
"""
from __future__ import annotations

import glob
import importlib.util
import io
import os
from pathlib import Path
from typing import BinaryIO, Callable, TypeVar

import numpy as np

from framework.runtime.algorithm import FrameSink
from framework.train.run_dir import TEMP_SUFFIX, is_locked, write_atomically

SUFFIXES = (".gif", ".mp4")
FPS = 30
"""Frames a second of every recording: CartPole (50 steps a simulated second) plays at 0.6x, Atari (one frame
every 4 game frames) at 2x."""
EXTRA_MODULES = ("av", "PIL", "pygame")
"""What the `video` extra installs: PyAV (MP4), Pillow (GIF), pygame (classic control's rendering)."""

T = TypeVar("T")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra() -> str | None:
    """None when the `video` extra is installed, else what is missing and how to install it."""
    missing = [m for m in EXTRA_MODULES if not _importable(m)]
    if not missing:
        return None
    return (f"the optional 'video' extra is not installed ({', '.join(missing)} missing): run "
            f"pip install -e '.[video]' in a checkout (or pip install 'hogshare[video]')")


class GifFrames:
    """Frames quantized as they come (see the module docstring), encoded as one animated GIF by `gif()`."""

    def __init__(self, max_frames: int | None = None):
        from PIL import Image

        self._image = Image
        self.max_frames = max_frames
        self.frames: list = []

    def add(self, frame: np.ndarray) -> bool:
        """Keep frame; False once max_frames are kept."""
        image = self._image.fromarray(np.ascontiguousarray(frame))
        self.frames.append(image.quantize(256, method=self._image.Quantize.FASTOCTREE))
        return self.max_frames is None or len(self.frames) < self.max_frames

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width) of the frames."""
        width, height = self.frames[0].size
        return height, width

    def gif(self) -> bytes:
        """The frames as an animated GIF that loops, at FPS."""
        out = io.BytesIO()
        first, *rest = self.frames
        first.save(out, format="GIF", save_all=True, append_images=rest, duration=round(1000 / FPS), loop=0)
        return out.getvalue()


class Mp4Stream:
    """Frames encoded as they come into an H.264 MP4 written to file; `close` finishes it."""

    def __init__(self, file: BinaryIO):
        import av

        self._frame = av.VideoFrame
        self._container = av.open(file, "w", format="mp4")
        self._stream = None

    def add(self, frame: np.ndarray) -> bool:
        """Encode frame (a side of odd length grows by one edge pixel: yuv420p needs even sides); True."""
        frame = np.pad(frame, ((0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0)), mode="edge")
        if self._stream is None:
            self._stream = self._container.add_stream("libx264", rate=FPS)
            self._stream.height, self._stream.width = frame.shape[:2]
            self._stream.pix_fmt = "yuv420p"
        self._container.mux(self._stream.encode(self._frame.from_ndarray(frame, format="rgb24")))
        return True

    def close(self) -> None:
        """Flush the encoder and write the MP4's index."""
        if self._stream is not None:
            self._container.mux(self._stream.encode())
        self._container.close()


def _new_file_mode() -> int:
    """The permissions open() gives a new file (0o666 less the umask), where a temp file gets 0o600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete the temp files that writes of path cut short by SIGKILL left beside it (`.NAME.*.tmp`); those a
    live write holds (locked: see run_dir.write_atomically) are kept. The paths removed."""
    removed = []
    for temp in path.parent.glob(f".{glob.escape(path.name)}.*{TEMP_SUFFIX}"):
        if temp.is_file() and not is_locked(temp):
            temp.unlink(missing_ok=True)
            removed.append(temp)
    return removed


def write_video(path: Path, play: Callable[[FrameSink], T]) -> tuple[T, int]:
    """Call play with a sink and write the frames it sends into path, an animated GIF or an MP4 by its suffix;
    (play's result, the frames written). Written atomically (a failure, or a stop signal that raises, leaves no
    part of a file; the temp files of writes killed outright are removed first) with a new file's permissions;
    OSError when path cannot be written."""
    result: list[T] = []
    count = [0]

    def write(file: BinaryIO) -> None:
        os.fchmod(file.fileno(), _new_file_mode())
        if path.suffix.lower() == ".gif":
            frames = GifFrames()
            result.append(play(counted(frames.add)))
            file.write(frames.gif())
            return
        stream = Mp4Stream(file)
        try:
            result.append(play(counted(stream.add)))
        finally:
            stream.close()

    def counted(sink: FrameSink) -> FrameSink:
        def add(frame: np.ndarray) -> bool:
            count[0] += 1
            return sink(frame)
        return add

    remove_stale_temps(path)
    write_atomically(path, write)
    return result[0], count[0]
