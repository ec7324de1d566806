"""Nodes kept in an order of the owner's choosing, linked through their own ``prev``/``next`` behind a sentinel.

The prefix cache's LRU of free runs and a KV tier's rank list of segments both move a node to the end, or take it
out from anywhere, many times a run: linked through the nodes, each is O(1) with no list to shift or search.
"""
from __future__ import annotations


class Ring:
    """The nodes linked behind the sentinel ``head`` (``head.next`` first, ``head.prev`` last); a node is any
    object with ``prev`` and ``next`` slots, None while it is out of the ring."""

    __slots__ = ("head",)

    def __init__(self, head):
        head.prev = head.next = head
        self.head = head

    def append(self, node) -> None:
        """``node`` goes last."""
        head = self.head
        node.prev = head.prev
        node.next = head
        head.prev.next = node
        head.prev = node

    def unlink(self, node) -> None:
        node.prev.next = node.next
        node.next.prev = node.prev
        node.prev = node.next = None

    def nodes(self):
        """The nodes, first to last (one may be unlinked as it is reached)."""
        node = self.head.next
        while node is not self.head:
            yield node
            node = node.next
