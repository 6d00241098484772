"""The iteration orders of Java's ``HashSet`` and ``TreeSet``, as ``describe()`` needs them.

Kafka Streams' ``TopologyDescription`` prints successors and predecessors from a
``TreeSet`` ordered by "sub-tree size, then name", but each node is inserted while the
sizes are still growing: the nodes are connected in ``HashMap`` iteration order and a
``TreeSet`` never re-sorts. The printed order of ``-->``/``<--`` lists therefore depends on
Java's string hashes and on red-black tree rotations. Emulating both (a few dozen lines)
is what makes our ``describe()`` text identical to the Java one, including for merges,
branches and sources with several children. Topic and store lists are ``HashSet``\\ s,
printed in hash-bucket order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit int (UTF-16 code units, ``31 * h + c``)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h


def _bucket(text: str, capacity: int) -> int:
    h = java_string_hash(text)
    return (h ^ (h >> 16)) & (capacity - 1)


def hash_order(items: Sequence[str]) -> list[str]:
    """Iteration order of a default ``HashSet``/``HashMap`` filled with ``items`` in this order.

    Buckets are ``(h ^ h >>> 16) & (capacity - 1)``; the capacity starts at 16 and doubles
    past a 0.75 load factor; a bucket keeps insertion order (resizes split it stably).
    """
    unique = list(dict.fromkeys(items))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2
    return sorted(unique, key=lambda item: _bucket(item, capacity))


class _Entry(Generic[T]):
    __slots__ = ("key", "left", "parent", "red", "right")

    def __init__(self, key: T, parent: _Entry[T] | None) -> None:
        self.key = key
        self.parent = parent
        self.left: _Entry[T] | None = None
        self.right: _Entry[T] | None = None
        self.red = False


class JavaTreeSet(Generic[T]):
    """``java.util.TreeSet`` insertion (``TreeMap.put`` + red-black fix-up), comparator read live.

    With a comparator over mutable keys the resulting order depends on the tree's shape,
    so the shape is reproduced exactly, rotations included.
    """

    def __init__(self, compare: Callable[[T, T], int]) -> None:
        self._compare = compare
        self._root: _Entry[T] | None = None

    def add(self, key: T) -> None:
        node = self._root
        if node is None:
            self._root = _Entry(key, None)
            return
        while True:
            parent = node
            cmp = self._compare(key, node.key)
            if cmp == 0:
                return
            node = node.left if cmp < 0 else node.right
            if node is None:
                break
        entry = _Entry(key, parent)
        if cmp < 0:
            parent.left = entry
        else:
            parent.right = entry
        self._fix_after_insertion(entry)

    def __iter__(self) -> Iterator[T]:
        stack: list[_Entry[T]] = []
        node = self._root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            yield node.key
            node = node.right

    def __len__(self) -> int:
        return sum(1 for _ in self)

    # -- red-black maintenance, a line-by-line port of java.util.TreeMap -------------------

    @staticmethod
    def _is_red(entry: _Entry[T] | None) -> bool:
        return entry is not None and entry.red

    def _fix_after_insertion(self, x: _Entry[T] | None) -> None:
        assert x is not None
        x.red = True
        while x is not None and x is not self._root and x.parent is not None and x.parent.red:
            parent = x.parent
            grand = parent.parent
            assert grand is not None  # a red parent is never the root
            # TreeMap's two branches are mirror images: left/right swapped depending on the
            # side of the parent, which picks the uncle, the inner child and the rotations
            if parent is grand.left:
                uncle, inner = grand.right, parent.right
                rotate_inner, rotate_outer = self._rotate_left, self._rotate_right
            else:
                uncle, inner = grand.left, parent.left
                rotate_inner, rotate_outer = self._rotate_right, self._rotate_left
            if self._is_red(uncle):
                assert uncle is not None
                parent.red = uncle.red = False
                grand.red = True
                x = grand
            else:
                if x is inner:
                    x = parent
                    rotate_inner(x)
                assert x.parent is not None and x.parent.parent is not None
                x.parent.red = False
                x.parent.parent.red = True
                rotate_outer(x.parent.parent)
        assert self._root is not None
        self._root.red = False

    def _replace_child(self, old: _Entry[T], new: _Entry[T]) -> None:
        parent = old.parent
        new.parent = parent
        if parent is None:
            self._root = new
        elif parent.left is old:
            parent.left = new
        else:
            parent.right = new

    def _rotate_left(self, p: _Entry[T]) -> None:
        r = p.right
        assert r is not None
        p.right = r.left
        if r.left is not None:
            r.left.parent = p
        self._replace_child(p, r)
        r.left = p
        p.parent = r

    def _rotate_right(self, p: _Entry[T]) -> None:
        left = p.left
        assert left is not None
        p.left = left.right
        if left.right is not None:
            left.right.parent = p
        self._replace_child(p, left)
        left.right = p
        p.parent = left
