"""TensorBoard event files written with the `tensorboard` package's own writer and protos (no TensorFlow).

Scalars, histograms and the hparams plugin's experiment/session records, so
`tensorboard --logdir runs` shows a run's curves, weight distributions and its
hyperparameters next to the final return.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import summary_v2 as hparams_summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter


class TensorBoardWriter:
    """Appends events to a new event file in logdir; steps are the caller's (global env steps).

    Events are a by-product of training: when they cannot be written (disk
    full, directory made read-only) the writer says so once through
    `on_error`, writes nothing more, and the caller carries on.
    """

    def __init__(self, logdir: str | Path, flush_secs: float = 5.0, on_error: Callable[[str], None] | None = None):
        self._logdir = logdir
        self._on_error = on_error
        self._failed = False
        self._writer = EventFileWriter(str(logdir), flush_secs=flush_secs)

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
        self._guard(lambda: self._writer.add_event(event))

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """One scalar per tag at step."""
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(v))
                                             for tag, v in values.items()])
        self._write(summary, step)

    def histogram(self, tag: str, values: np.ndarray, step: int, bins: int = 30) -> None:
        """The distribution of values (flattened) at step; non-finite values are left out."""
        values = np.asarray(values, dtype=np.float64).ravel()
        values = values[np.isfinite(values)]
        if values.size == 0:
            return
        counts, edges = np.histogram(values, bins=bins)
        proto = summary_pb2.HistogramProto(
            min=float(values.min()), max=float(values.max()), num=float(values.size),
            sum=float(values.sum()), sum_squares=float(np.dot(values, values)),
            bucket_limit=edges[1:].tolist(), bucket=counts.astype(np.float64).tolist())
        self._write(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=proto)]), step)

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
        self._guard(self._writer.flush)

    def close(self) -> None:
        """Flush and close the event file."""
        self._guard(self._writer.close)
