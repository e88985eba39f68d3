"""TensorBoard event files written with the `tensorboard` package's own record format and protos (no TensorFlow).

Scalars, histograms, animated GIFs (image summaries) and the hparams plugin's
experiment/session records, so `tensorboard --logdir runs` shows a run's
curves, weight distributions, videos of its agent and its hyperparameters next
to the final return.

Records are buffered in memory and appended to the event file by the
caller's thread every `flush_secs` (opening it for that moment only, as
tensorboard's own file layer does), rather than by tensorboard's
EventFileWriter, whose background thread dies on the first failed write
(disk full, read-only) and prints a raw "Exception in thread" traceback of
its own. Here a failure is an OSError in the call that made it, reported in
one line. The monitor logs a few records a second: appending them costs it
one open and write every few seconds.
"""
from __future__ import annotations

import io
import itertools
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import summary_v2 as hparams_summary
from tensorboard.summary.writer.record_writer import RecordWriter

_NUMBERS = itertools.count()
"""Event files this process made: part of each name, as in tensorboard's own writer."""


class TensorBoardWriter:
    """Appends events to a new event file in logdir; steps are the caller's (global env steps).

    Events are a by-product of training: when they cannot be written (disk
    full, directory made read-only) the writer says so once through
    `on_error`, writes nothing more, and the caller carries on.
    """

    def __init__(self, logdir: str | Path, flush_secs: float = 5.0, on_error: Callable[[str], None] | None = None):
        """Create the event file (OSError when that fails: the caller decides whether the run can start)."""
        self._logdir = logdir
        self._on_error = on_error
        self._failed = False
        self._flush_secs = flush_secs
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_NUMBERS)}"
        Path(logdir).mkdir(parents=True, exist_ok=True)
        self._path = Path(logdir) / name
        self._pending = io.BytesIO()
        self._records = RecordWriter(self._pending)
        version = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
        self._records.write(version.SerializeToString())
        with open(self._path, "xb") as f:
            f.write(self._take())
        self._next_flush = time.monotonic() + flush_secs

    def _take(self) -> bytes:
        """The records not yet written, removed from the buffer."""
        data = self._pending.getvalue()
        self._pending.seek(0)
        self._pending.truncate()
        return data

    def _append(self) -> None:
        data = self._take()
        if data:
            with open(self._path, "ab") as f:
                f.write(data)

    def _guard(self, action: Callable[[], None]) -> None:
        """Run one call of the event writer unless writing already failed; a failure turns the writer off."""
        if self._failed:
            return
        try:
            action()
        except OSError as exc:
            self._failed = True
            if self._on_error is not None:
                self._on_error(f"TensorBoard events could not be written in '{self._logdir}' "
                               f"({exc.strerror or exc}); no more events are logged in this session")

    def _write(self, summary: summary_pb2.Summary, step: int, wall_time: float | None = None) -> None:
        event = event_pb2.Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step),
                                summary=summary)
        self._guard(lambda: self._records.write(event.SerializeToString()))
        if time.monotonic() >= self._next_flush:
            self.flush()

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """One scalar per tag at step."""
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(v))
                                             for tag, v in values.items()])
        self._write(summary, step)

    def histogram(self, tag: str, values: np.ndarray, step: int, bins: int = 30) -> None:
        """The distribution of values (flattened) at step; non-finite values are left out. Values whose range
        cannot be cut into `bins` finite, distinct buckets at their magnitude (one value of 1e17, where x + 0.5
        == x; a range wider than the largest float) make one bucket holding them all: a histogram never fails."""
        values = np.asarray(values, dtype=np.float64).ravel()
        values = values[np.isfinite(values)]
        if values.size == 0:
            return
        low, high = float(values.min()), float(values.max())
        with np.errstate(all="ignore"):
            edges = np.linspace(low, high, bins + 1)
            sum_squares = float(np.dot(values, values))
            total = float(values.sum())
        if np.isfinite(edges).all() and (np.diff(edges) > 0).all():
            counts = np.histogram(values, bins=edges)[0]
        else:
            edges, counts = np.array([low, high]), np.array([values.size])
        proto = summary_pb2.HistogramProto(
            min=low, max=high, num=float(values.size), sum=total, sum_squares=sum_squares,
            bucket_limit=edges[1:].tolist(), bucket=counts.astype(np.float64).tolist())
        self._write(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=proto)]), step)

    def gif(self, tag: str, data: bytes, height: int, width: int, step: int) -> None:
        """An animated GIF at step, as an image summary (what tensorboardX's add_video writes): TensorBoard's image
        dashboard shows it, and browsers play it."""
        image = summary_pb2.Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=data)
        self._write(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, image=image)]), step)

    def hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float], step: int,
                run_name: str) -> None:
        """The hparams plugin's records: the hyperparameters, and the final metrics as scalars at step.

        Values that are not bool/int/float/str (lists) are shown as their text.
        """
        clean = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in hparams.items()}
        config = hparams_summary.hparams_config_pb(
            hparams=[hparams_summary.HParam(k) for k in clean],
            metrics=[hparams_summary.Metric(tag) for tag in metrics])
        self._write(config, step)
        self._write(hparams_summary.hparams_pb(clean, trial_id=run_name), step)
        self.scalars(metrics, step)

    def flush(self) -> None:
        """Write buffered events to disk."""
        self._next_flush = time.monotonic() + self._flush_secs
        self._guard(self._append)

    def close(self) -> None:
        """Write what is buffered; the writer keeps no file open."""
        self.flush()
