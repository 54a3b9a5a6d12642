"""The machine memfs runs on: private files written without following links
(``private``) and the calls that differ between platforms (``portable``). Imports nothing else
of memfs.
"""
