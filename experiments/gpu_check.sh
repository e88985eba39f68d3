#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU: the tests marked `gpu` and the GPU
# benchmarks, in under five minutes. Everything they produce lands in OUTDIR:
#   gpu-tests.log, gpu-tests.xml (JUnit), bench_cuda_ipc.log, cuda_ipc.md
# Usage: experiments/gpu_check.sh OUTDIR       (PYTHON=/path/to/python to pick the interpreter)
# Exit status: 0 when the tests and the benchmark passed, 1 otherwise, 2 for a bad call.
set -u -o pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/.." || exit 2
py=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

if "$py" -c "import cupy" 2>/dev/null; then
  :
elif ! nvidia-smi -L >/dev/null 2>&1; then
  echo "CuPy is not importable and no NVIDIA GPU answers nvidia-smi: not installing CuPy; the GPU tests will skip"
else
  echo "CuPy is not importable with $py: installing cupy-cuda12x"
  if ! timeout 45 "$py" -m pip install --quiet cupy-cuda12x; then
    echo "could not install cupy-cuda12x (no network here?); going on with what is importable"
  fi
fi
"$py" -c "import cuda_ipc; print('cuda_ipc.is_available():', cuda_ipc.is_available())"

status=0
# SIGINT lets pytest stop cleanly and still write its JUnit file if the time runs out.
timeout -s INT -k 15 170 "$py" -m pytest tests -m gpu -p no:cacheprovider -ra \
  --junitxml="$out/gpu-tests.xml" 2>&1 | tee "$out/gpu-tests.log" || status=1
timeout -k 10 75 "$py" experiments/bench_cuda_ipc.py --reps 50 2>&1 | tee "$out/bench_cuda_ipc.log" || status=1
if [ -f experiments/results/cuda_ipc.md ]; then
  cp experiments/results/cuda_ipc.md "$out/"
else
  echo "the benchmark wrote no experiments/results/cuda_ipc.md" | tee -a "$out/bench_cuda_ipc.log"
  status=1
fi
exit $status
