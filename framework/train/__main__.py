"""`python -m framework.train train|evaluate|tune ...`: the console scripts without an installed entry point (a
plain checkout on PYTHONPATH)."""
import sys

from framework.train.cli import evaluate_main, train_main, tune_main

_COMMANDS = {"train": train_main, "evaluate": evaluate_main, "tune": tune_main}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in _COMMANDS:
        print("usage: python -m framework.train {train,evaluate,tune} [ARGS...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(_COMMANDS[sys.argv[1]](sys.argv[2:]))
