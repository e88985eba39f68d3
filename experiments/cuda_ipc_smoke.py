"""The smallest CUDA IPC round trip, with CuPy alone: a spawned child opens one memory handle and reads it.

Run first by gpu_check.sh, so that IPC failing under a machine's CUDA runtime or
sandbox shows as such, before hogshare's own tests. Uses no hogshare code.
Prints one line; exit status 0 when the child read the parent's values.

    python -m experiments.cuda_ipc_smoke
"""
import argparse
import multiprocessing
import queue
import sys


def _read(handle: bytes, answers) -> None:
    import cupy

    ptr = cupy.cuda.runtime.ipcOpenMemHandle(handle)
    view = cupy.ndarray((4,), cupy.float32, cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, 16, None, 0), 0))
    answers.put(view.tolist())
    cupy.cuda.runtime.ipcCloseMemHandle(ptr)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    import cupy

    memory = cupy.cuda.Memory(2 << 20)  # one cudaMalloc of 2 MiB: never sub-allocated by the driver
    cupy.ndarray((4,), cupy.float32, cupy.cuda.MemoryPointer(memory, 0)).fill(42.0)
    cupy.cuda.Device().synchronize()
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    child = context.Process(target=_read, args=(cupy.cuda.runtime.ipcGetMemHandle(memory.ptr), answers))
    child.start()
    try:
        seen = answers.get(timeout=60)
    except queue.Empty:
        seen = f"nothing (exit code {child.exitcode})"
    child.join(10)
    print(f"CUDA IPC smoke test: {'ok' if seen == [42.0] * 4 else 'FAILED'}: the spawned child read {seen}")
    sys.exit(0 if seen == [42.0] * 4 else 1)


if __name__ == "__main__":
    main()
