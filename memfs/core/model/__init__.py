"""The core's model: what a mounted store holds and the rules that keep it consistent.

``state`` (``CoreState``: settled nodes, who holds a memory id, grace windows; its invariants),
``inodes`` (the inode table: numbers, lookup counts, paths; ``Node``), ``config`` (``VfsConfig``
and the names the core reserves), ``attrs`` (a node's ``stat``), ``handles`` (open files),
``localfiles`` (editor scratch names kept local), ``clashes`` (a file beside a same-named
directory), ``budget`` (the local bytes, ``--local-bytes``). The lowest floor of the core:
it imports nothing from ``fetch`` or ``ops`` and does no I/O.
"""
