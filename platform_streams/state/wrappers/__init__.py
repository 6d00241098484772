"""The wrapper layers of a store stack: metered -> caching -> change-logging -> bytes store.

Each module adds one concern; :mod:`~platform_streams.state.builders` assembles them.
"""
