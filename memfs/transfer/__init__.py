"""Moving a store's memories to and from a directory tree: ``memfs export`` and ``memfs import``.

``layout`` is the tree format both follow (a file per memory, memfs's own files in ``.memfs/``,
reserved names); ``export`` writes a store's memories into a tree (and with ``--git`` its
versions into a git repository); ``import_tree`` uploads a tree into a store. Beside the
sessions in the layers: a client of stores through ``memfs.api``, never of the mount.
"""
