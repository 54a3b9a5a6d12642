"""Where the trees of a mount number their inodes and file handles.

A mount serves several trees (a store's files, its ``.versions/`` and ``.search/``, and in a
mount of several stores each store's trees and the local scratch): every tree numbers its
inodes and handles in a range of its own, handed to it by whoever builds it, so that the
router of the mount (``memfs.mount.router``) knows from a number alone which tree it belongs
to, and no two trees ever give the kernel the same number.

A store's trees share one *slot* of ``SLOT`` numbers: its files from the slot's first number
plus one (the store's root directory), ``.search`` from an eighth of the slot, ``.versions``
from a quarter. The slot at 0 is today's single-store layout (the root is inode 1,
``pyfuse3.ROOT_INODE``; ``.search`` from 2**47, ``.versions`` from 2**48), so a mount of one
store numbers exactly as it always did. Handles follow the same ranges (the kernel keeps file
and directory handles apart, so a tree may use its range for both).
"""

from __future__ import annotations

from dataclasses import dataclass

SLOT = 1 << 50  # numbers per store: 2**14 slots fit in the kernel's 64-bit inode numbers


@dataclass(frozen=True)
class NumberRange:
    """Numbers from ``first`` up, below ``end``: the inodes (and handles) of one tree."""

    first: int
    end: int

    def __contains__(self, number: object) -> bool:
        return isinstance(number, int) and self.first <= number < self.end


@dataclass(frozen=True)
class StoreNumbers:
    """The ranges of one store's trees: ``files`` (its root is ``files.first``), ``search``
    (its root is ``search.first``) and ``versions``."""

    files: NumberRange
    search: NumberRange
    versions: NumberRange

    @classmethod
    def in_slot(cls, base: int = 0) -> StoreNumbers:
        """The layout of the slot that starts at ``base`` (a multiple of ``SLOT``)."""
        search, versions, end = base + SLOT // 8, base + SLOT // 4, base + SLOT
        return cls(
            NumberRange(base + 1, search), NumberRange(search, versions), NumberRange(versions, end)
        )


SINGLE_STORE = StoreNumbers.in_slot(0)  # a mount of one store: the numbers it always had
