"""Window value classes, binary key layouts and scan bounds."""

from __future__ import annotations

import random

import pytest

from platform_streams.state import SessionWindow, TimeWindow, Windowed
from platform_streams.state.keys import (
    keys_upper_bound,
    prefix_upper_bound,
    session_key,
    split_session_key,
    split_window_key,
    time_bytes,
    window_key,
)


def test_time_window_is_half_open() -> None:
    assert TimeWindow(0, 10).overlaps(TimeWindow(5, 15))
    assert not TimeWindow(0, 10).overlaps(TimeWindow(10, 20))


def test_session_window_is_closed() -> None:
    assert SessionWindow(0, 10).overlaps(SessionWindow(10, 20))
    assert SessionWindow(5, 5).overlaps(SessionWindow(5, 5))
    assert not SessionWindow(0, 10).overlaps(SessionWindow(11, 20))


def test_window_kinds_never_equal_and_are_hashable() -> None:
    assert TimeWindow(0, 10) != SessionWindow(0, 10)
    assert {Windowed("k", TimeWindow(0, 10)): 1}[Windowed("k", TimeWindow(0, 10))] == 1
    assert Windowed("k", SessionWindow(0, 10)) != Windowed("k", TimeWindow(0, 10))


@pytest.mark.parametrize(
    ("cls", "start", "end"),
    [(TimeWindow, 5, 5), (TimeWindow, -1, 5), (SessionWindow, 5, 4), (SessionWindow, -2, 0)],
)
def test_invalid_windows_are_rejected(cls: type, start: int, end: int) -> None:
    with pytest.raises(ValueError):
        cls(start, end)


def test_windows_are_frozen() -> None:
    window = TimeWindow(0, 10)
    with pytest.raises(AttributeError):
        window.start_ms = 3  # type: ignore[misc]


def test_window_key_round_trip_and_java_layout() -> None:
    binary = window_key(b"key", 1_700_000_000_000, 7)
    assert binary == b"key" + (1_700_000_000_000).to_bytes(8, "big") + (7).to_bytes(4, "big")
    assert split_window_key(binary) == (b"key", 1_700_000_000_000, 7)


def test_session_key_orders_by_end_then_start() -> None:
    binary = session_key(b"k", 5, 9)
    assert binary == b"k" + (9).to_bytes(8, "big") + (5).to_bytes(8, "big")
    assert split_session_key(binary) == (b"k", 5, 9)
    assert session_key(b"k", 8, 9) > session_key(b"k", 0, 9) > session_key(b"k", 0, 8)


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [(b"a", b"b"), (b"a\xff", b"b"), (b"ab", b"ac"), (b"\xff\xff", None), (b"", None)],
)
def test_prefix_upper_bound(prefix: bytes, bound: bytes | None) -> None:
    assert prefix_upper_bound(prefix) == bound


def test_keys_upper_bound_covers_every_key_up_to_key_to() -> None:
    rng = random.Random(7)
    alphabet = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]
    for _ in range(500):
        key_to = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
        max_suffix = time_bytes(rng.randint(0, 2**40)) + b"\xff\xff\xff\xff"
        bound = keys_upper_bound(key_to, max_suffix)
        for _ in range(30):
            key = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
            if key > key_to:
                continue
            suffix = time_bytes(rng.randint(0, int.from_bytes(max_suffix[:8], "big"))) + b"\x00\x00\x00\x01"
            assert key + suffix < bound, (key_to, key, suffix)


def test_keys_upper_bound_is_tight_for_ordinary_keys() -> None:
    assert keys_upper_bound(b"user-9", b"\x00" * 12) == b"user-9" + b"\x00" * 12 + b"\x00"
