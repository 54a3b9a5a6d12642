"""The kit the tests and the benchmarks share: real servers, mounts, ports, waiting, fakes.

A package at the repository's root (pytest's ``pythonpath``; ``python -m bench`` runs from the
root), imported as ``kit.<module>``; memfs itself never imports it (import-linter). Fixtures stay
in the ``conftest.py`` files; what a test imports lives here (or in its folder's ``helpers``
module), never in a conftest: pytest loads each conftest itself, and importing one as a module
too gives it a second identity.
"""
