"""Programs that are neither memfs nor its benchmarks, run from the repository's root as
``python -m scripts.NAME``: the demo (``make demo``) and the console's screenshots."""
