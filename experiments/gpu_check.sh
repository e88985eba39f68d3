#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU and no network, in about 7 minutes (each step gets
# at most what is left of a 420 s budget). Made for the device machine as it comes: Python 3.12 with CuPy
# (cupy-cuda13x), PyTorch, pytest, tensorboard, pyyaml and tqdm, and no gymnasium. Steps:
#   1. smoke:   experiments.cuda_ipc_smoke, one CUDA IPC handle opened in a spawned child with CuPy alone,
#               so that IPC failing under the machine's runtime shows as such;
#   2. install, offline: the wheels in .whl/ if any (gymnasium and farama-notifications for the A3C tests,
#               ale-py for bench_gpu_training's Atari workload:
#               fetch them with experiments/gpu_wheels.sh where pip reaches PyPI, and carry .whl along) into a
#               private folder put on PYTHONPATH; then this checkout, --no-deps --no-build-isolation (the
#               tests themselves run the checkout, and `train` as `python -m framework.train`). Without
#               gymnasium the tests that need it (A3C on CartPole, listed below) are deselected;
#   3. the tests marked `gpu` (in the folders that hold them, so that no other test module is imported);
#   4. the GPU benchmarks (experiments.bench_cuda_ipc, experiments.bench_gpu_training).
# Nothing here uses the network. Everything lands in OUTDIR:
#   smoke.log, install.log, gpu-tests.log, gpu-tests.xml (JUnit), bench_cuda_ipc.log, cuda_ipc.md,
#   bench_gpu_training.log, gpu_training.md
# Usage: experiments/gpu_check.sh OUTDIR       (PYTHON=/path/to/python to pick the interpreter)
# Exit status: 0 when every step passed, 1 otherwise, 2 for a bad call.
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
site=${TMPDIR:-/tmp}/hogshare-gpu-site
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
BUDGET=420

# seconds a step may take: its own cap, or what is left of the budget when that is less
limit() {
  local left=$((BUDGET - SECONDS))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

status=0
echo "== 1. CUDA IPC smoke test (CuPy alone)"
timeout -k 5 "$(limit 60)" "$py" -m experiments.cuda_ipc_smoke 2>&1 | tee "$out/smoke.log" || status=1

echo "== 2. offline install"
{
  if compgen -G ".whl/*.whl" >/dev/null; then
    timeout 60 "$py" -m pip install -q --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
      && echo "installed into $site: $(ls .whl | xargs)"
  else
    echo "no wheels in .whl/ (run experiments/gpu_wheels.sh where pip reaches PyPI, and carry .whl)"
  fi
  timeout 90 "$py" -m pip install -q --no-deps --no-build-isolation --root-user-action=ignore -e . \
    && echo "installed this checkout" || echo "could not install this checkout (going on: it is on PYTHONPATH)"
  "$py" -c "import cuda_ipc; print('cuda_ipc.is_available():', cuda_ipc.is_available())"
} 2>&1 | tee "$out/install.log"
# The GPU tests that train A3C on CartPole, and so need gymnasium (they do not skip without it).
gymnasium_tests=(
  tests/train/gpu/test_gpu_training_runs.py::test_a3c_trains_checkpoints_and_resumes_on_the_device
  tests/train/gpu/test_gpu_training_devices.py::test_train_on_a_missing_cuda_index_exits_2_naming_the_devices
)
deselect=()
if ! "$py" -c "import gymnasium" 2>/dev/null; then
  echo "gymnasium is not importable: deselecting ${gymnasium_tests[*]}" | tee -a "$out/install.log"
  for test in "${gymnasium_tests[@]}"; do deselect+=(--deselect "$test"); done
fi

# run_bench NAME CAP ARGS...: python -m experiments.bench_NAME ARGS, logged to OUTDIR/bench_NAME.log; its result
# file (written by this run) is copied to OUTDIR. Returns 1 when it failed, wrote nothing or had no time.
run_bench() {
  local name=$1 cap=$2 log="$out/bench_$1.log" result="experiments/results/$1.md"
  shift 2
  local secs
  secs=$(limit "$cap")
  if [ "$secs" -lt 10 ]; then
    echo "no time left for experiments.bench_$name (the $BUDGET s budget is used up)" | tee "$log"
    return 1
  fi
  timeout -k 10 "$secs" "$py" -m "experiments.bench_$name" "$@" 2>&1 | tee "$log" || return 1
  if [ -f "$result" ] && [ "$result" -nt "$stamp" ]; then
    cp "$result" "$out/"
  else
    echo "the benchmark wrote no $result in this run" | tee -a "$log"
    return 1
  fi
}

echo "== 3. tests marked gpu"
# SIGINT lets pytest stop cleanly and still write its JUnit file if the time runs out.
timeout -s INT -k 15 "$(limit 170)" "$py" -m pytest tests/cuda_ipc tests/framework tests/train/gpu -m gpu \
  "${deselect[@]}" -p no:cacheprovider -ra --junitxml="$out/gpu-tests.xml" 2>&1 | tee "$out/gpu-tests.log" || status=1
echo "== 4. benchmarks"
run_bench cuda_ipc 75 --reps 50 || status=1
run_bench gpu_training 210 --seconds 12 --warmup-seconds 12 || status=1
rm -f "$stamp"
echo "gpu_check: $([ $status -eq 0 ] && echo passed || echo FAILED) in ${SECONDS} s; results in $out"
exit $status
