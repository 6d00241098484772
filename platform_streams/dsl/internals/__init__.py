"""The DSL's run-time side: the processors, table ops and buffers a lowered topology runs.

Nothing here imports the public API (``StreamsBuilder``, ``KStream``, ``KTable``, the
groupings, ``materialize``/``naming``): the API records what the user asked for and
instantiates these classes; tasks only ever see these. The rule is checked by the
import-linter contract in ``pyproject.toml`` (``make lint``, ``tests/unit/test_layers.py``).
Value objects the user passes in (windows, ``EmitStrategy``, ``Suppressed``, windowed
serdes) may be read here: they carry no builder state.
"""
