"""Binary key layouts of the window and session stores, and byte-range helpers.

The layouts are Kafka Streams' (``WindowKeySchema`` / ``SessionKeySchema``), and they are
also the changelog record keys, so a changelog written by either implementation restores
into the other:

* window:  ``key + window_start (8 bytes, big-endian) + seqnum (4 bytes, big-endian)``;
  the seqnum is 0 unless the store retains duplicates.
* session: ``key + session_end (8 bytes) + session_start (8 bytes)``; ordering by end first
  lets ``find_sessions`` seek straight to the first session that can still overlap.

Timestamps are non-negative, so big-endian encoding sorts them numerically; the record key
is *not* length-prefixed, so a scan for one key can meet longer keys sharing its prefix:
every reader filters on the exact key length. All helpers are tiny and hot; they use
precompiled ``struct`` objects and slicing only.
"""

from __future__ import annotations

import logging
import struct

__all__ = [
    "SESSION_SUFFIX_LEN",
    "WINDOW_SUFFIX_LEN",
    "in_key_range",
    "inclusive_to_exclusive",
    "key_range_valid",
    "keys_upper_bound",
    "prefix_upper_bound",
    "session_key",
    "session_range_bounds",
    "split_session_key",
    "split_window_key",
    "window_key",
]

_log = logging.getLogger(__name__)

_WINDOW = struct.Struct(">qi")
_SESSION = struct.Struct(">qq")
_TIME = struct.Struct(">q")
#: ``time_from(buffer, offset) -> (time,)``: an 8-byte big-endian time read in place
time_from = _TIME.unpack_from

WINDOW_SUFFIX_LEN = _WINDOW.size
SESSION_SUFFIX_LEN = _SESSION.size
MAX_SEQNUM = 0x7FFFFFFF
MAX_TIME = 0x7FFFFFFFFFFFFFFF


#: ``window_suffix(start, seqnum)``: what :func:`window_key` appends to the key (hot paths
#: that build keys per record concatenate it themselves and skip a Python call)
window_suffix = _WINDOW.pack


def window_key(key: bytes, window_start_ms: int, seqnum: int = 0) -> bytes:
    """``key + start + seqnum``: the window store's (and its changelog's) binary key."""
    return key + _WINDOW.pack(window_start_ms, seqnum)


def split_window_key(binary: bytes) -> tuple[bytes, int, int]:
    """Inverse of :func:`window_key`: ``(key, window_start_ms, seqnum)``."""
    cut = len(binary) - WINDOW_SUFFIX_LEN
    start, seqnum = _WINDOW.unpack_from(binary, cut)
    return binary[:cut], start, seqnum


def window_start_of(binary: bytes) -> int:
    """Only the window start of a binary window key (restore needs no more to pick a segment)."""
    start: int = _TIME.unpack_from(binary, len(binary) - WINDOW_SUFFIX_LEN)[0]
    return start


def session_key(key: bytes, start_ms: int, end_ms: int) -> bytes:
    """``key + end + start``: the session store's (and its changelog's) binary key."""
    return key + _SESSION.pack(end_ms, start_ms)


def split_session_key(binary: bytes) -> tuple[bytes, int, int]:
    """Inverse of :func:`session_key`: ``(key, start_ms, end_ms)``."""
    cut = len(binary) - SESSION_SUFFIX_LEN
    end, start = _SESSION.unpack_from(binary, cut)
    return binary[:cut], start, end


def session_end_of(binary: bytes) -> int:
    """Only the session end of a binary session key."""
    end: int = _TIME.unpack_from(binary, len(binary) - SESSION_SUFFIX_LEN)[0]
    return end


def time_bytes(ms: int) -> bytes:
    """8-byte big-endian encoding of a timestamp (used to build scan bounds)."""
    return _TIME.pack(ms)


def inclusive_to_exclusive(key: bytes) -> bytes:
    """The smallest byte string greater than ``key`` (turns an inclusive bound exclusive)."""
    return key + b"\x00"


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """Exclusive upper bound of all keys starting with ``prefix``; None if unbounded (all 0xff)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def keys_upper_bound(key_to: bytes, max_suffix: bytes) -> bytes:
    """Exclusive bound above every ``k + suffix`` with ``k <= key_to`` and ``suffix <= max_suffix``.

    ``key_to + max_suffix`` is not enough: a key that is a proper prefix of ``key_to`` has its
    suffix where ``key_to`` has more key bytes, and that suffix may compare larger. The bound is
    the largest ``key_to[:m] + max_suffix`` over every prefix length ``m`` (for ordinary keys and
    timestamps that is ``key_to + max_suffix`` itself, so scans stay tight).
    """
    best = key_to + max_suffix
    for cut in range(len(key_to)):
        candidate = key_to[:cut] + max_suffix
        if candidate > best:
            best = candidate
    return best + b"\x00"


def session_range_bounds(key_from: bytes | None, key_to: bytes | None) -> tuple[bytes | None, bytes | None]:
    """Scan bounds of the session keys (``key + end + start``) of keys in ``[key_from, key_to]``.

    The lower bound is ``key_from`` itself (every longer key sorts after it). The upper bound
    must also cover keys that are proper prefixes of ``key_to``: ``"a" + suffix`` can sort after
    ``"aa" + suffix`` when the suffix starts above ``"a"``. Times are below 2**63, so a suffix
    is at most ``0x7f ff..``: the bound is the largest ``prefix + 0x7fff..`` over the prefixes
    of ``key_to`` that are not below ``key_from`` (results are still filtered by key).
    """
    if key_to is None:
        return key_from, None
    max_suffix = b"\x7f" + b"\xff" * (SESSION_SUFFIX_LEN - 1)
    candidates = [
        key_to[:n] + max_suffix for n in range(len(key_to) + 1) if key_from is None or key_to[:n] >= key_from
    ]
    return key_from, inclusive_to_exclusive(max(candidates))


def in_key_range(key: bytes, key_from: bytes | None, key_to: bytes | None) -> bool:
    """``key_from <= key <= key_to`` by bytes (None: unbounded), as Kafka compares ``Bytes``."""
    return (key_from is None or key >= key_from) and (key_to is None or key <= key_to)


def key_range_valid(store: str, key_from: bytes | None, key_to: bytes | None) -> bool:
    """False (and a warning, as Kafka logs) when ``key_from > key_to``: the range is empty."""
    if key_from is not None and key_to is not None and key_from > key_to:
        _log.warning(
            "Returning empty iterator for fetch with invalid key range on store %s: from > to. "
            "This may be due to range arguments set in the wrong order, or serdes that don't "
            "preserve ordering when lexicographically comparing the serialized bytes.",
            store,
        )
        return False
    return True
