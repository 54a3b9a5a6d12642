"""memfs's benchmarks: ``python -m bench NAME [--rounds N] [--json]``, ``python -m bench --list``.

One harness (``bench.harness``) runs every case (``bench/cases/NAME.py``); docs/benchmarks.md
says what each measures and what it found. memfs never imports this package (import-linter).
"""
