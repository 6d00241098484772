"""A registry serde shipped to another process (a Spark executor, where compaction and backfill
decode and encode through the application's own serde objects): it pickles without its client,
makes one on first use there, and keeps its login out of every printed form."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import uuid

import pytest

from platform_streams.kafka.schema_registry import RegistrySettings
from platform_streams.ops.spark.snapshots import TaskSerde
from platform_streams.serde import Avro
from platform_streams.state.timestamped import ValueAndTimestamp, ValueAndTimestampSerde
from tests.schema_registry.test_registry_app import ORDER_V1

pytestmark = pytest.mark.kafka_side

SECRET = "reader:s3cr3t-pw"

#: the other process: unpickle, decode the bytes, encode again, print what it got
_EXECUTOR = """
import json, pickle, sys
shipped = pickle.loads(sys.stdin.buffer.read())
serde = shipped.serde
assert serde.inner._deserializer is None and serde.inner._serializer is None
value = serde.deserialize(bytes.fromhex(sys.argv[1]))
print(json.dumps([value.value, value.timestamp, serde.serialize(value).hex(), repr(serde)]))
"""


def test_task_serde_ships_an_avro_serde_that_connects_on_first_use(registry_url: str) -> None:
    topic = f"pickle-{uuid.uuid4().hex[:8]}"
    settings = RegistrySettings(registry_url, basic_auth_user_info=SECRET)
    avro = Avro(settings, json.dumps(ORDER_V1), topic=topic)
    serde = ValueAndTimestampSerde(avro)
    data = serde.serialize(ValueAndTimestamp({"customer": "a", "amount": 7}, 1234))
    assert avro._serializer is not None  # this process's client and serializer exist now
    shipped = pickle.dumps(TaskSerde(serde))
    done = subprocess.run(
        [sys.executable, "-c", _EXECUTOR, data.hex()],
        input=shipped,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    value, timestamp, again, printed = json.loads(done.stdout)
    assert (value, timestamp) == ({"customer": "a", "amount": 7}, 1234)
    assert bytes.fromhex(again) == data  # encoded there under the same subject and schema id
    for text in (printed, repr(serde), str(settings), done.stderr.decode()):
        assert "s3cr3t" not in text
