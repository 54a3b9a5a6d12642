"""The benchmark cases, a module each, named as ``python -m bench NAME`` names them; each
defines ``CASE``, a ``bench.harness.Case``."""
