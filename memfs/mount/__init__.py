"""The mount process: the pyfuse3 adapter (``fuse_ops``), the daemon that builds and runs the
core (``daemon``), remote changes (``changefeed``) and the status file (``status``).
"""
