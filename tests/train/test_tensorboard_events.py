"""TensorBoard event files written by TensorBoardWriter, read back by TensorBoard's own reader and server."""
import io
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams import plugin_data_pb2

from framework.train.tensorboard_writer import TensorBoardWriter


def _accumulate(logdir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_histograms_and_hparams_read_back(tmp_path):
    writer = TensorBoardWriter(tmp_path)
    for step in range(5):
        writer.scalars({"episode/return_mean": 10.0 * step, "train/entropy": 0.5}, step=step * 100)
    writer.histogram("params/w", np.array([0.0, 1.0, 1.0, 2.0, np.nan]), step=400)
    writer.hparams({"optimizer.lr": 0.001, "model.hidden": [64, 64], "trainer.workers": 2},
                   {"final/mean_return": 123.0}, step=500, run_name="run-a")
    writer.close()

    acc = _accumulate(tmp_path)
    returns = acc.Scalars("episode/return_mean")
    assert [e.step for e in returns] == [0, 100, 200, 300, 400]
    assert [e.value for e in returns] == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert acc.Scalars("final/mean_return")[0].value == 123.0
    hist = acc.Histograms("params/w")[0]
    assert hist.step == 400 and hist.histogram_value.num == 4 and hist.histogram_value.max == 2.0
    assert sum(hist.histogram_value.bucket) == 4

    content = acc.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    start = plugin_data_pb2.HParamsPluginData.FromString(content[hparams_metadata.SESSION_START_INFO_TAG])
    hp = start.session_start_info.hparams
    assert hp["optimizer.lr"].number_value == 0.001
    assert hp["model.hidden"].string_value == "[64, 64]"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content[hparams_metadata.EXPERIMENT_TAG])
    assert [m.name.tag for m in experiment.experiment.metric_infos] == ["final/mean_return"]


def test_histogram_of_only_non_finite_values_is_skipped(tmp_path):
    writer = TensorBoardWriter(tmp_path)
    writer.histogram("params/bad", np.array([np.inf, np.nan]), step=1)
    writer.scalars({"x": 1.0}, step=1)
    writer.close()
    assert _accumulate(tmp_path).Tags()["histograms"] == []


@pytest.mark.parametrize("values", [[1e17], [1e17, 1e17 + 64], [-1e308, 1e308], [3.0, 3.0]],
                         ids=["one huge value", "a range too narrow for its magnitude", "wider than a float",
                              "all equal"])
def test_histogram_of_values_numpy_cannot_bin_is_one_bucket(tmp_path, values):
    """np.histogram raises "Too many bins for data range" for these (or gives NaN edges): such values are one
    bucket holding them all, with their min and max."""
    writer = TensorBoardWriter(tmp_path)
    writer.histogram("params/odd", np.array(values), step=1)
    writer.close()
    [hist] = _accumulate(tmp_path).Histograms("params/odd")
    assert sum(hist.histogram_value.bucket) == len(values)
    assert (hist.histogram_value.min, hist.histogram_value.max) == (min(values), max(values))


def _three_frame_gif() -> bytes:
    frames = [Image.new("RGB", (16, 8), colour) for colour in ("red", "green", "blue")]
    gif = io.BytesIO()
    frames[0].save(gif, format="GIF", save_all=True, append_images=frames[1:], duration=40, loop=0)
    return gif.getvalue()


def test_an_animated_gif_reads_back_as_an_image(tmp_path):
    gif = _three_frame_gif()
    writer = TensorBoardWriter(tmp_path)
    writer.gif("video/greedy_episode", gif, height=8, width=16, step=300)
    writer.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"images": 0})
    acc.Reload()
    [image] = acc.Images("video/greedy_episode")
    assert (image.step, image.height, image.width) == (300, 8, 16)
    assert image.encoded_image_string == gif
    assert Image.open(io.BytesIO(image.encoded_image_string)).n_frames == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_tensorboard_server_serves_the_scalar_series_and_the_gif(tmp_path):
    """The images plugin serves a GIF summary as image/gif: the Images tab shows it in an <img>, which animates."""
    run = tmp_path / "a3c-run"
    writer = TensorBoardWriter(run)
    for step in range(3):
        writer.scalars({"episode/return_mean": float(step + 1)}, step=step * 10)
    gif = _three_frame_gif()
    writer.gif("video/greedy_episode", gif, height=8, width=16, step=20)
    writer.close()
    exe = shutil.which("tensorboard") or str(Path(sys.executable).parent / "tensorboard")
    port = _free_port()
    server = subprocess.Popen([exe, "--logdir", str(tmp_path), "--host", "127.0.0.1", "--port", str(port),
                               "--load_fast", "false", "--reload_interval", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = (f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run={run.name}"
           f"&tag=episode%2Freturn_mean")
    try:
        series = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    series = json.loads(response.read())
                if series:
                    break
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            time.sleep(0.5)
        assert series, f"tensorboard did not serve {url} (exit {server.poll()})"
        assert [(step, value) for _, step, value in series] == [(0, 1.0), (10, 2.0), (20, 3.0)]
        images = f"http://127.0.0.1:{port}/data/plugin/images"
        with urllib.request.urlopen(f"{images}/images?run={run.name}&tag=video%2Fgreedy_episode") as response:
            [image] = json.loads(response.read())
        assert image["step"] == 20
        with urllib.request.urlopen(f"{images}/individualImage?{image['query']}") as response:
            assert response.headers["Content-Type"] == "image/gif" and response.read() == gif
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_failed_write_is_reported_once_by_the_caller_and_no_thread_dies(tmp_path):
    """The event file turns unwritable (here: a directory takes its place): one line through on_error, from the
    call that flushed, then nothing; no writer thread exists to print a traceback of its own."""
    said = []
    threads = threading.active_count()
    writer = TensorBoardWriter(tmp_path, flush_secs=0.0, on_error=said.append)
    assert threading.active_count() == threads
    [event_file] = tmp_path.iterdir()
    event_file.unlink()
    event_file.mkdir()
    for step in range(5):
        writer.scalars({"x": 1.0}, step)
    writer.close()
    assert said == [f"TensorBoard events could not be written in '{tmp_path}' (Is a directory); no more events "
                    f"are logged in this session"]
