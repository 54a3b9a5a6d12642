"""The core's fetching and caching: clean data that can always be fetched again.

``cache`` (``ContentCache``, ``ListingCache``), ``prefetch`` (``BulkFetcher``: the bulk pages of
a walk), ``subtree`` (listings derived from a sub-tree's pages), ``usage`` (the counts
``statfs`` shows), ``orphans`` (``StoreGone``: the store deleted under the mount, and its pending
content handed over). Above ``model``, below ``ops``: it never
holds a change that is not yet on the server.
"""
