"""Makes the suite's shared helpers (tests/run_configs.py) importable from every test folder."""
