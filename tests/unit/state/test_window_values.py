"""``time_window`` and ``windowed``: the emit-final burst's constructors of
``TimeWindow``/``Windowed`` (platform_streams/state/windowed.py) make the same frozen
values as the dataclasses' own ``__init__`` (Kafka Streams' ``TimeWindow``/``Windowed``:
equal and hashed by their bounds and key, immutable once handed downstream)."""

from __future__ import annotations

import dataclasses

import pytest

from platform_streams.state.windowed import SessionWindow, TimeWindow, Windowed, time_window, windowed


def test_the_fast_constructors_make_equal_frozen_values() -> None:
    window = time_window(60_000, 120_000)
    assert type(window) is TimeWindow
    assert window == TimeWindow(60_000, 120_000) and hash(window) == hash(TimeWindow(60_000, 120_000))
    assert window != SessionWindow(60_000, 120_000)  # half-open against closed bounds
    assert (window.start(), window.end()) == (60_000, 120_000)
    key = windowed(b"user-1", window)
    assert type(key) is Windowed
    assert key == Windowed(b"user-1", TimeWindow(60_000, 120_000))
    assert hash(key) == hash(Windowed(b"user-1", TimeWindow(60_000, 120_000)))
    assert repr(key) == "[b'user-1'@60000/120000]"
    assert {key: 1}[Windowed(b"user-1", TimeWindow(60_000, 120_000))] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        window.start_ms = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.key = b"other"  # type: ignore[misc]
