"""hogshare's benchmark and reproduction scripts, each a module run from the checkout's root.

    python -m experiments.bench_a3c --help

Each script writes its page under experiments/results/ (see experiments/README.md). The package imports
nothing itself: importing a script costs its own imports only, and scripts meant for another interpreter
(torch_*_reference, sb3_speed, cuda_ipc_smoke) import that interpreter's libraries when they run.
"""
