"""Broker-less testing: TopologyTestDriver and its test topics."""

from platform_streams.testing.driver import TopologyTestDriver
from platform_streams.testing.records import TestRecord
from platform_streams.testing.topics import TestInputTopic, TestOutputTopic

__all__ = ["TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]
