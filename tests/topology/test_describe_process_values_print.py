"""``describe()`` of topologies using process_values, print and UnlimitedWindows equals Kafka's.

The expected texts follow Kafka Streams' ``KStreamImpl`` naming (``PROCESSVALUES_NAME =
"KSTREAM-PROCESSVALUES-"``, ``PRINTING_NAME = "KSTREAM-PRINTER-"``, one index per node, the
windowed store's name drawn before its aggregate) and ``TopologyDescription``'s format.
"""

from __future__ import annotations

from platform_streams.dsl import Printed, StreamsBuilder, UnlimitedWindows
from platform_streams.processor import FixedKeyProcessor, FixedKeyRecord


class _Identity(FixedKeyProcessor):
    def process(self, record: FixedKeyRecord) -> None:
        self.context.forward(record)


def test_process_values_then_print() -> None:
    builder = StreamsBuilder()
    builder.stream("input").process_values(_Identity).print(Printed.to_sysout())
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-PROCESSVALUES-0000000001\n"
        "    Processor: KSTREAM-PROCESSVALUES-0000000001 (stores: [])\n"
        "      --> KSTREAM-PRINTER-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-PRINTER-0000000002 (stores: [])\n"
        "      --> none\n"
        "      <-- KSTREAM-PROCESSVALUES-0000000001\n\n"
    )


def test_unlimited_windowed_count_printed() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("input")
        .group_by_key()
        .windowed_by(UnlimitedWindows.of().start_on(10))
        .count()
        .to_stream()
        .print(Printed.to_sysout().with_label("counts"))
    )
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-AGGREGATE-0000000002\n"
        "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
        "      --> KTABLE-TOSTREAM-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n"
        "      --> KSTREAM-PRINTER-0000000004\n"
        "      <-- KSTREAM-AGGREGATE-0000000002\n"
        "    Processor: KSTREAM-PRINTER-0000000004 (stores: [])\n"
        "      --> none\n"
        "      <-- KTABLE-TOSTREAM-0000000003\n\n"
    )
