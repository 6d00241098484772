"""Applications the ops tests run against: repartition topics and two logged stores.

:func:`build_topology` uses the Processor API (one repartition topic, two stores in one
processor)::

    input --rekey(by value)--> <app>-rekey-repartition --> count[stores words, letters] --> output

``count`` keeps, per word, how often it was seen (store ``words``) and how many letters
those occurrences had in total (store ``letters``), and emits ``"<count>:<letters>"``.
Both stores are persistent and logged, so the topology declares two changelog topics and
one repartition topic. The output of a run from scratch is fully determined by the input,
so a reset-and-rerun must reproduce it, with state rebuilt from zero.

:func:`build_dsl_topology` computes the same with the DSL (``group_by(value)`` then a
``count`` into store ``words`` and an ``aggregate`` into ``letters``: one repartition
topic per aggregation, as Kafka Streams does without optimization), emitting
``count:<n>`` and ``letters:<n>`` records; caching is off so every update is emitted.

``topology()`` takes its topic names from ``OPS_TEST_INPUT`` / ``OPS_TEST_OUTPUT`` so the
CLI can load it as ``tests.integration.ops_apps:topology``.
"""

from __future__ import annotations

import os

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.processor import Processor, Record
from platform_streams.serde import Long, String
from platform_streams.state import Stores
from platform_streams.topology.nodes import InternalTopic, repartition_topic_config

REPARTITION = "rekey-repartition"
STORES = ("words", "letters")


class Rekey(Processor):
    """Key every record by its value (a word)."""

    def process(self, record: Record) -> None:
        self.context.forward(record.with_key(record.value))


class CountWords(Processor):
    """Count occurrences and letters per word in two stores; emit ``count:letters``."""

    def process(self, record: Record) -> None:
        words = self.context.get_state_store("words")
        letters = self.context.get_state_store("letters")
        count = (words.get(record.key) or 0) + 1
        total = (letters.get(record.key) or 0) + len(record.value)
        words.put(record.key, count)
        letters.put(record.key, total)
        self.context.forward(record.with_value(f"{count}:{total}"))


def build_topology(input_topic: str, output_topic: str) -> Topology:
    topology = Topology()
    topology.add_source("src", input_topic, key_serde=String(), value_serde=String())
    topology.add_processor("rekey", Rekey, "src")
    topology.add_internal_topic(InternalTopic(REPARTITION, "repartition", None, repartition_topic_config()))
    topology.add_sink("to-repartition", REPARTITION, "rekey", key_serde=String(), value_serde=String())
    topology.add_source("from-repartition", REPARTITION, key_serde=String(), value_serde=String())
    topology.add_processor("count", CountWords, "from-repartition")
    for store in STORES:
        builder = Stores.key_value_store_builder(Stores.persistent_key_value_store(store), String(), Long())
        topology.add_state_store(builder, "count")
    topology.add_sink("out", output_topic, "count", key_serde=String(), value_serde=String())
    return topology


def build_dsl_topology(input_topic: str, output_topic: str) -> Topology:
    builder = StreamsBuilder()
    words = builder.stream(input_topic, Consumed(key_serde=String(), value_serde=String())).group_by(
        lambda _key, word: word, Grouped(key_serde=String(), value_serde=String())
    )
    counts = words.count(materialized=Materialized.as_("words").with_caching_disabled())
    letters = words.aggregate(
        lambda: 0,
        lambda _word, word, total: total + len(word),
        materialized=Materialized.as_("letters").with_value_serde(Long()).with_caching_disabled(),
    )
    produced = Produced(key_serde=String(), value_serde=String())
    counts.to_stream().map_values(lambda n: f"count:{n}").to(output_topic, produced)
    letters.to_stream().map_values(lambda n: f"letters:{n}").to(output_topic, produced)
    return builder.build()


def topology() -> Topology:
    """The CLI factory (topics from the environment)."""
    return build_topology(os.environ["OPS_TEST_INPUT"], os.environ["OPS_TEST_OUTPUT"])
