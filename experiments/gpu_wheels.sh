#!/usr/bin/env bash
# Fetches, on a machine where pip reaches PyPI, the wheels experiments/gpu_check.sh installs offline on the
# GPU machine: gymnasium and the one dependency that machine's image lacks (farama-notifications; numpy,
# cloudpickle and typing-extensions are there), and ale-py for the Atari workload of bench_gpu_training.py
# (opencv is there), for CPython 3.12 on x86-64 Linux, into .whl/ (git-ignored), with the `pip download`
# command the device tool's README gives. About 4 MB in all.
# Usage: experiments/gpu_wheels.sh      then name .whl in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  gymnasium==1.4.0 farama-notifications==0.0.6 ale-py==0.12.1
ls -l .whl
