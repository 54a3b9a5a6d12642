"""``memfs session``: the checked plan of up to eight mounts (``plan``) and the supervisor that
runs, watches and stops their daemons (``supervisor``).
"""
