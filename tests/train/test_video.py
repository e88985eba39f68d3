"""Videos of greedy episodes: `evaluate --record` (GIF, MP4) and `logging.video_every_s` (run directory and
TensorBoard), each decoded back; the clear errors for a wrong suffix, a missing `video` extra, and an algorithm
that plays no environment."""
import os
import re
import shutil
import textwrap
from pathlib import Path

import av
import numpy as np
import pytest
import yaml
from PIL import Image, ImageSequence
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from framework import algorithms
from framework.train.checkpoint import load_checkpoint
from framework.train.cli import evaluate_main
from framework.train.config import MAX_SECONDS, ConfigError, validate
from extras import ATARI
from run_configs import cartpole_config
from train_cli import call_main, cli_env, run_cli, snapshot, summary, train, write_config

LEGACY_HOGWILD = Path(__file__).resolve().parent / "fixtures" / "legacy_runs" / "hogwild"
CARTPOLE_SCREEN = (400, 600, 3)


def _gif_frames(data: Path) -> list[np.ndarray]:
    with Image.open(data) as gif:
        return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]


def _mp4_frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def _episode_lengths(run: Path, episodes: int) -> float:
    """Steps in all the episodes of evaluate's CartPole evaluation of run (a reward of 1 a step): episodes x the
    mean return, in full (evaluate prints 3 significant figures)."""
    config = validate(yaml.safe_load((run / "config.yaml").read_text()))
    a3c = algorithms.get("a3c")
    model = a3c.build_model(config)
    model.load_state_dict(load_checkpoint(run / "checkpoints" / "checkpoint.npz")["model"])
    return a3c.evaluate(model, config, episodes, seed=12345).metrics["return_mean"] * episodes


def _wrote(stdout: str, video: Path) -> int:
    """The frames evaluate --record says it wrote into video (its last line), checked against the file's size."""
    match = re.fullmatch(rf"wrote {re.escape(str(video))}: (\d+) frames at 30 a second, .*\((\d+) bytes\)",
                         stdout.splitlines()[-1])
    assert match and int(match.group(2)) == video.stat().st_size, stdout
    return int(match.group(1))


@pytest.mark.parametrize("suffix, decode", [(".gif", _gif_frames), (".mp4", _mp4_frames)])
def test_evaluate_records_the_greedy_episodes_it_evaluates(finished_run, tmp_path, suffix, decode):
    plain = run_cli("evaluate", "--run", finished_run, "--episodes", 3)
    video = tmp_path / f"agent{suffix}"
    recorded = run_cli("evaluate", "--run", finished_run, "--episodes", 3, "--record", video)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.splitlines()[0] == plain.stdout.strip()  # the same episodes (same seeds), one by one
    assert recorded.stderr == ""
    frames = decode(video)
    steps = _episode_lengths(finished_run, 3)
    assert len(frames) >= 10 and all(frame.shape == CARTPOLE_SCREEN for frame in frames)
    assert _wrote(recorded.stdout, video) == round(steps) + 3  # each episode from its reset to its last step
    if suffix == ".mp4":
        assert len(frames) == round(steps) + 3
    else:
        assert len(frames) <= round(steps) + 3  # a GIF merges a frame into the one before it when they are alike
    assert frames[0].min() < 100 < frames[0].max()  # a cart on a white screen, not a blank frame
    assert [p.name for p in tmp_path.iterdir()] == [video.name]  # written atomically: no temp file left
    umask = os.umask(0)
    os.umask(umask)
    assert video.stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file, not a temp file's 0o600


def test_a_run_that_normalises_observations_is_recorded_as_it_is_evaluated(tmp_path):
    """The recording normalises observations with the checkpoint's statistics, as evaluate does."""
    done, run = train(tmp_path, cartpole_config(total_steps=4000, env={"id": "CartPole-v1", "envs_per_worker": 4,
                                                                       "normalize_obs": True}))
    assert done.returncode == 0, done.stderr
    plain = run_cli("evaluate", "--run", run, "--episodes", 3)
    recorded = run_cli("evaluate", "--run", run, "--episodes", 3, "--record", tmp_path / "agent.mp4")
    assert recorded.returncode == 0 and recorded.stdout.splitlines()[0] == plain.stdout.strip(), recorded.stderr
    assert len(_mp4_frames(tmp_path / "agent.mp4")) == round(_episode_lengths(run, 3)) + 3


@pytest.mark.parametrize("name", ["agent.avi", "agent", "agent.gif.txt"])
def test_record_names_the_suffixes_it_writes(tmp_path, name):
    code, out, err = call_main(evaluate_main, ["--run", str(tmp_path), "--record", str(tmp_path / name)])
    assert code == 2 and out == ""
    assert err == (f"evaluate: error: argument --record: got '{tmp_path / name}'; allowed: a file name ending in "
                   f".gif or .mp4 (usage: evaluate [-h] --run RUN_DIR [--checkpoint latest|best] "
                   f"[--episodes EPISODES] [--seed SEED] "
                   f"[--max-steps N] [--max-seconds S] [--record FILE] [--export FILE] [--trust-code])\n")


def test_record_into_a_missing_directory_is_one_line(finished_run, tmp_path):
    code, _, err = call_main(evaluate_main, ["--run", str(finished_run), "--record", str(tmp_path / "no" / "a.gif")])
    assert code == 2
    assert err == (f"evaluate: error: --record: cannot write '{tmp_path / 'no' / 'a.gif'}' (No such file or "
                   f"directory); allowed: a file in a writable directory\n")


def test_record_refuses_an_algorithm_without_an_environment(tmp_path):
    run = shutil.copytree(LEGACY_HOGWILD, tmp_path / "hogwild")
    before = snapshot(run)
    code, _, err = call_main(evaluate_main, ["--run", str(run), "--record", str(tmp_path / "a.gif")])
    assert code == 2
    assert err == (f"evaluate: error: --record: run '{run}' trained algorithm hogwild, which has no environment to "
                   f"record; allowed: runs of an algorithm with one (a3c, appo, impala)\n")
    assert snapshot(run) == before and not (tmp_path / "a.gif").exists()


def test_record_refuses_an_environment_that_renders_no_frames(run_copy, tmp_path):
    config = yaml.safe_load((run_copy / "config.yaml").read_text())
    config["env"]["id"] = "fault_envs:UnrenderedCartPole-v0"  # the same spaces: the checkpoint still loads
    write_config(run_copy / "config.yaml", config)  # edited by hand: its code is imported with --trust-code
    done = run_cli("evaluate", "--run", run_copy, "--record", tmp_path / "a.gif", "--trust-code")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("evaluate: error: config key 'env.id': environment fault_envs:UnrenderedCartPole-v0 "
                           "rendered NoneType where an rgb_array frame (height, width, 3) uint8 was asked for (its "
                           "render modes: []); allowed: an environment with the rgb_array render mode, to record\n")
    assert not (tmp_path / "a.gif").exists()


def _without(tmp_path: Path, *modules: str) -> dict:
    """A CLI environment in which importing (or finding) `modules` fails, as where they are not installed."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(textwrap.dedent(f"""\
        import sys

        class _NotInstalled:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in {modules!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, _NotInstalled())
        """))
    env = cli_env()
    env["PYTHONPATH"] = f"{hide}:{env['PYTHONPATH']}"
    return env


def test_a_missing_video_extra_is_named_with_its_install_command(finished_run, tmp_path):
    env = _without(tmp_path, "av")
    install = ("the optional 'video' extra is not installed (av missing): run pip install -e '.[video]' in a "
               "checkout (or pip install 'hogshare[video]')")
    evaluated = run_cli("evaluate", "--run", finished_run, "--record", tmp_path / "a.mp4", env=env)
    assert (evaluated.returncode, evaluated.stdout) == (2, "")
    assert evaluated.stderr == f"evaluate: error: --record: {install}\n"
    assert not (tmp_path / "a.mp4").exists()
    config = cartpole_config(logging={"progress": False, "video_every_s": 5})
    trained = run_cli("train", "--config", write_config(tmp_path / "config.yaml", config), "--logdir",
                      tmp_path / "runs", env=env)
    assert trained.returncode == 2
    assert trained.stderr == (f"train: error: config key 'logging.video_every_s': got 5, but {install}; or set "
                              f"it to 0\n")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("raw, message", [
    ({"logging": {"video_every_s": -1}}, "config key 'logging.video_every_s': got -1; allowed: a number >= 0 and <= "),
    ({"logging": {"video_every_s": "often"}}, "config key 'logging.video_every_s': got 'often'; allowed: a number"),
    ({"logging": {"video_every_s": MAX_SECONDS * 2}}, "config key 'logging.video_every_s': got 2000000000.0; "
                                                      "allowed: a number >= 0 and <= 1000000000"),
    ({"logging": {"video_max_frames": 0}}, "config key 'logging.video_max_frames': got 0; allowed: an integer >= 1 "
                                           "and <= 10000"),
    ({"algorithm": {"name": "hogwild"}, "logging": {"video_every_s": 10}},
     "config key 'logging.video_every_s': got 10; allowed: 0 for algorithm hogwild, which plays no environment to "
     "record"),
])
def test_video_keys_are_checked_with_one_line(raw, message):
    with pytest.raises(ConfigError) as info:
        validate(raw)
    assert str(info.value).startswith(message) and "\n" not in str(info.value), str(info.value)


def test_video_keys_default_to_off_and_hogwild_takes_the_default():
    config = validate({"logging": {"video_every_s": 2.5}})
    assert (config["logging"]["video_every_s"], config["logging"]["video_max_frames"]) == (2.5, 1000)
    assert validate({"algorithm": {"name": "hogwild"}})["logging"]["video_every_s"] == 0


def test_train_records_videos_into_the_run_and_tensorboard_and_resumes(tmp_path):
    config = cartpole_config(total_steps=10_000, logging={"progress": False, "video_every_s": 0.5,
                                                          "video_max_frames": 15})
    done, run = train(tmp_path, config)
    assert done.returncode == 0 and "video failed" not in done.stderr, done.stderr
    videos = sorted((run / "videos").iterdir(), key=lambda p: int(p.stem.removeprefix("step-")))
    assert videos and videos[-1].name == f"step-{summary(run)['env_steps']}.gif"  # the last one: the final model
    acc = EventAccumulator(str(run), size_guidance={"images": 0})
    acc.Reload()
    images = acc.Images("video/greedy_episode")
    assert [f"step-{image.step}.gif" for image in images] == [p.name for p in videos]
    for image, path in zip(images, videos):
        assert image.encoded_image_string == path.read_bytes() and image.encoded_image_string[:6] == b"GIF89a"
        assert (image.height, image.width) == CARTPOLE_SCREEN[:2]
        assert 1 <= len(_gif_frames(path)) <= 15

    resumed = run_cli("train", "--resume", run, "--set", "trainer.total_steps=15000")
    assert resumed.returncode == 0 and "video failed" not in resumed.stderr, resumed.stderr
    after = {p.name for p in (run / "videos").iterdir()}
    assert {p.name for p in videos} < after and f"step-{summary(run)['env_steps']}.gif" in after


@ATARI
def test_atari_is_recorded_as_the_game_screen_not_the_network_input():
    config = validate({"env": {"id": "hogshare/Atari-v0", "kwargs": {"game": "ALE/Pong-v5"}}, "model": {"lstm": True},
                       "trainer": {"target_return": None}})
    a3c = algorithms.get("a3c")
    model = a3c.build_model(config)
    frames = []

    def keep(frame: np.ndarray) -> bool:
        frames.append(frame)
        return len(frames) < 12

    result = a3c.record(model, config, 3, 0, keep)
    assert len(frames) == 12 and all(frame.shape == (210, 160, 3) and frame.dtype == np.uint8 for frame in frames)
    assert result.text.startswith("return over 1 greedy episodes: ")  # the play ended in the first episode
