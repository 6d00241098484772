"""Restore: a task's state lifecycle (restore, checkpoint, close), which changelog records a
restore may apply (those written for committed input) and the ranges it may apply without
reading each record's headers, and the standby tasks kept warm from the changelogs.
"""
