#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU: the tests marked `gpu` and the GPU
# benchmarks, in under five minutes (each step gets at most what is left of a 280 s budget).
# Everything they produce lands in OUTDIR:
#   gpu-tests.log, gpu-tests.xml (JUnit), bench_cuda_ipc.log, cuda_ipc.md,
#   bench_gpu_training.log, gpu_training.md
# Usage: experiments/gpu_check.sh OUTDIR       (PYTHON=/path/to/python to pick the interpreter)
# Exit status: 0 when the tests and the benchmarks passed, 1 otherwise, 2 for a bad call.
set -u -o pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
stamp="$out/.gpu_check_started"
touch "$stamp" || exit 2
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

# seconds a step may take: its own cap, or what is left of the budget when that is less
limit() {
  local left=$((280 - SECONDS))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# run_bench NAME CAP ARGS...: experiments/bench_NAME.py ARGS, logged to OUTDIR/bench_NAME.log; its result
# file (written by this run) is copied to OUTDIR. Returns 1 when it failed, wrote nothing or had no time.
run_bench() {
  local name=$1 cap=$2 log="$out/bench_$1.log" result="experiments/results/$1.md"
  shift 2
  local secs
  secs=$(limit "$cap")
  if [ "$secs" -lt 10 ]; then
    echo "no time left for bench_$name.py (the 280 s budget is used up)" | tee "$log"
    return 1
  fi
  timeout -k 10 "$secs" "$py" "experiments/bench_$name.py" "$@" 2>&1 | tee "$log" || return 1
  if [ -f "$result" ] && [ "$result" -nt "$stamp" ]; then
    cp "$result" "$out/"
  else
    echo "the benchmark wrote no $result in this run" | tee -a "$log"
    return 1
  fi
}

status=0
# SIGINT lets pytest stop cleanly and still write its JUnit file if the time runs out.
timeout -s INT -k 15 "$(limit 170)" "$py" -m pytest tests -m gpu -p no:cacheprovider -ra \
  --junitxml="$out/gpu-tests.xml" 2>&1 | tee "$out/gpu-tests.log" || status=1
run_bench cuda_ipc 75 --reps 50 || status=1
run_bench gpu_training 80 --seconds 5 || status=1
rm -f "$stamp"
exit $status
