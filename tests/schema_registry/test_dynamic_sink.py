"""A sink whose topic a TopicNameExtractor picks per record, with a registry serde of the
default topic subject strategy: each record is encoded under the subject of the topic it goes to
(``<topic>-value``), as Java serdes get the topic on every ``serialize`` call
(RecordCollectorImpl.send passes it); before, every record failed for want of a topic."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.serde import Avro, Bytes, String
from platform_streams.testing import TopologyTestDriver

pytestmark = [pytest.mark.kafka_side]

READING = json.dumps(
    {"type": "record", "name": "Reading", "namespace": "ps.dyn", "fields": [{"name": "v", "type": "long"}]}
)


def _latest_id(registry_url: str, subject: str) -> int:
    with urllib.request.urlopen(f"{registry_url}/subjects/{subject}/versions/latest", timeout=10) as response:
        return int(json.loads(response.read())["id"])


def test_a_dynamic_sink_registers_under_each_topics_subject(registry_url: str) -> None:
    prefix = f"dyn-{uuid.uuid4().hex[:8]}"
    hot, cold = f"{prefix}-hot", f"{prefix}-cold"
    builder = StreamsBuilder()
    builder.stream("readings", Consumed(key_serde=String(), value_serde=String())).map_values(
        lambda v: {"v": int(v)}
    ).to(
        lambda _k, v, _meta: hot if v["v"] > 10 else cold,
        Produced(key_serde=String(), value_serde=Avro(registry_url, READING)),
    )
    config = {"application_id": prefix, "bootstrap_servers": "x:1"}
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("readings", String(), String()).pipe_value_list(["5", "50", "7"])
        reader = Avro(registry_url)
        got = {t: driver.create_output_topic(t, String(), Bytes()).read_values_to_list() for t in (hot, cold)}
    for topic, raw in got.items():
        # each topic's records carry the id of that topic's own subject
        ids = {int.from_bytes(b[1:5], "big") for b in raw}
        assert ids == {_latest_id(registry_url, f"{topic}-value")}
    assert {t: [reader.deserialize(b)["v"] for b in raw] for t, raw in got.items()} == {
        hot: [50],
        cold: [5, 7],
    }
