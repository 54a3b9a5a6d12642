"""The core's behaviour: the POSIX operations and what a change means.

``vfs`` (the file operations, one method each) asks the objects that own the rest:
``namespace`` (directory views; kernel invalidations), ``remote`` (the change feed's versions
applied), ``identity`` (which memory a file is bound to), ``rename``, ``truncate``, ``commit``
(validate, refuse, queue), ``copies`` (local copies), ``uploader`` (what the write-back queue runs
and what its outcome means), ``refusals`` (content the store cannot take), ``durable`` (what a
journal record means: replay, conflict copies, the unmount report), ``descriptions``
(``user.description``). The top floor of the core below ``build``.
"""
