"""Soak (fault 12, slow): a long run must not grow in memory, descriptors or /dev/shm segments.

`HOGSHARE_SOAK_SECONDS` sets the length of the run (default 600: ten minutes).
"""
import json
import os
import time

import pytest

from reliability_support import (Train, cmdline, fast_config, fd_count, group_names, mapped_groups, rss_kib, wait_for_run_dir,
                                 worker_pids, write_config)

SOAK_S = float(os.environ.get("HOGSHARE_SOAK_SECONDS", "600"))
WARMUP_S = 60.0
SAMPLE_EVERY_S = 15.0
RSS_GROWTH = 0.05
FD_SLACK = 2  # a checkpoint or event write may hold a descriptor for a moment


def _sample(pids: list[int]) -> dict[int, tuple[int, int]]:
    """(resident KiB, open descriptors) of each live pid."""
    out = {}
    for pid in pids:
        try:
            out[pid] = (rss_kib(pid), fd_count(pid))
        except (ProcessLookupError, FileNotFoundError):
            pass
    return out


def _role(pid: int, main: int, workers: list[int]) -> str:
    """What a process of the run is, for the report."""
    if pid == main:
        return "main"
    if pid in workers:
        return "worker"
    command = cmdline(pid)
    return "manager" if "shm_manager" in command else "resource tracker" if "resource_tracker" in command else "helper"


@pytest.mark.slow
@pytest.mark.timeout(SOAK_S + 300)
@pytest.mark.fault("12", f"soak: a {SOAK_S / 60:g}-minute run, 2 spawn workers, file_system strategy, TensorBoard "
                         f"on, a checkpoint every 30 s",
                   "exit 0 at max_seconds; from the end of the first minute to the end, the resident memory of "
                   "every process (main, workers, resource tracker, manager) grows < 5%, its descriptor count by "
                   "at most 2, and the run's /dev/shm names stay the same in number")
def test_long_run_keeps_memory_descriptors_and_segments_flat(watch, tmp_path, logdir, record_property):
    assert SOAK_S > WARMUP_S + 2 * SAMPLE_EVERY_S, "HOGSHARE_SOAK_SECONDS must leave time after the first minute"
    config = write_config(tmp_path / "c.yaml", fast_config(trainer={
        "start_method": "spawn", "sharing_strategy": "file_system", "max_seconds": SOAK_S,
        "checkpoint_every_s": 30, "join_timeout_s": 30}, logging={"log_every_s": 1.0, "histogram_every": 100}))
    run = Train(watch, "--config", config, "--logdir", logdir)
    run_dir = wait_for_run_dir(logdir)
    workers = worker_pids(run.pid, 2)
    started = time.monotonic()
    time.sleep(max(0.0, WARMUP_S - (time.monotonic() - started)))
    pids = watch.tagged()
    [group] = mapped_groups(run.pid)
    baseline, names = _sample(pids), len(group_names(group))
    roles = {pid: _role(pid, run.pid, workers) for pid in baseline}
    latest, latest_names = baseline, names
    while time.monotonic() - started < SOAK_S - SAMPLE_EVERY_S and run.proc.poll() is None:
        time.sleep(SAMPLE_EVERY_S)
        latest, latest_names = _sample(pids), len(group_names(group))
    assert run.finish(timeout=SOAK_S + 120) == 0, run.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "max_seconds reached"

    lines, problems = [], []
    for pid, (rss, fds) in sorted(baseline.items()):
        role = roles[pid]
        if pid not in latest:
            problems.append(f"{role} {pid} ended during the run")
            continue
        rss_end, fds_end = latest[pid]
        growth = rss_end / rss - 1.0
        lines.append(f"{role} {pid}: RSS {rss / 1024:.1f} -> {rss_end / 1024:.1f} MiB ({growth:+.1%}), "
                     f"fds {fds} -> {fds_end}")
        if growth >= RSS_GROWTH:
            problems.append(f"{role} {pid}: resident memory grew {growth:.1%}")
        if fds_end > fds + FD_SLACK:
            problems.append(f"{role} {pid}: descriptors grew from {fds} to {fds_end}")
    lines.append(f"/dev/shm names {names} -> {latest_names}; {summary['env_steps']} env steps")
    if latest_names != names:
        problems.append(f"/dev/shm names went from {names} to {latest_names}")
    record_property("measured", "; ".join(lines))
    assert not problems, "\n".join(problems + lines)
