"""Tasks: ``StreamTask`` (one sub-topology over one partition number), its ``PartitionGroup``,
the worker's ``TaskManager`` that creates, commits and closes them, and the global stores'
``GlobalStateUpdater``.
"""
