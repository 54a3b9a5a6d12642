"""``memfs session``: the checked plan of up to eight stores (``plan``) and the runner that
serves them all from one mount daemon in its own process, then stops it (``runner``).
"""
