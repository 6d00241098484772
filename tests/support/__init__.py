"""Shared helpers for the test suites (broker helpers live in :mod:`tests.support.kafka`)."""
