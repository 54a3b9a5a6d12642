"""Helpers shared by the test suites: plain modules, imported as ``support.<module>``.

Fixtures stay in the ``conftest.py`` files; what a test imports lives here (or in its folder's
``helpers`` module), never in a conftest: pytest loads each conftest itself, and importing one
as a module too gives it a second identity.
"""
