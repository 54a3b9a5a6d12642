"""When and where pending changes wait: the upload queue (``queue``) and the on-disk journal
(``journal``). It knows neither files nor POSIX: ``memfs.core.ops.durable`` says what a record
means. It must not import ``memfs.core``.
"""
