"""What the client and the reference server share: the wire models and errors, store paths and
their rules, the APIs' limits, the seam the core reaches a store through, and the one retry
policy. Leaves only: nothing here imports another memfs package (only ``memfs.host``).
"""
