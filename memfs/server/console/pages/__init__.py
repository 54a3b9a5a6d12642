"""The console's pages, one module per group, each with ``routes(console) -> list[Route]``:
``sign_in`` (sign in and out), ``stores`` (the stores and their settings), ``store`` (a
store's tree, search, a new memory), ``memory`` (a memory: view, edit with its conflict page,
rename, delete). URL templates are relative to ``/console`` (``app`` mounts them there)."""
