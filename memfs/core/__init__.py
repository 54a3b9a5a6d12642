"""The filesystem without FUSE: POSIX operations on store paths (``vfs``) and what they need.

``inodes`` (numbers, lookup counts), ``cache`` and ``prefetch`` (clean, re-fetchable data
only), ``usage`` (statfs counts), ``localfiles`` (editor scratch names kept local),
``refusals`` (content the store cannot take), ``clashes`` (a file beside a same-named
directory), ``durable`` (what a journal record means: replay, conflict copies, the unmount
report), ``orphans`` (pending content of a deleted store). Below it: ``memfs.writeback.queue``,
``memfs.versions.tree`` and ``memfs.api``; above it: ``memfs.mount``, which adapts it to pyfuse3.
"""
