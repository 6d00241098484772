"""The soak harness: an hour of scheduled faults against two running applications.

``make soak`` (``python -m soak``) runs a producer at a steady rate, two applications
(``exactly_once_v2`` and ``at_least_once``) as worker processes, a seeded fault schedule,
and then checks the whole history (docs/soak/README.md). Not production code: it lives
beside ``bench/`` and imports the library like a user would.
"""
