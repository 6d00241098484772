"""Post-hoc check of the 60-minute soak at e1e7eb5 against its live cluster: the harness's
own AppChecker, History rebuilt from the input topic, readers with fetch.wait.max.ms=500
(the harness's 10 ms readers starve on Tansu's big partitions)."""
import json, re, sys, time
from pathlib import Path
import soak.output as output
import platform_streams.kafka.positions as positions
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING

positions._POSITION_READER["fetch.wait.max.ms"] = 500
_orig = output.create_consumer
def _patched(conf):
    return _orig({**conf, "fetch.wait.max.ms": 500})
output.create_consumer = _patched

from soak.producer import History
from soak.app import POISON_PREFIX, WINDOW_MS, amount
from soak.checker import AppChecker
from soak.cluster import AppSpec

B = "127.0.0.1:33363"; RUN = "soak-50340948"; P = 4
h = History()
c = Consumer({"bootstrap.servers": B, "group.id": "posthoc", "enable.auto.commit": False,
              "enable.partition.eof": True, "fetch.wait.max.ms": 500, "fetch.queue.backoff.ms": 10})
c.assign([TopicPartition(f"{RUN}-input", p, OFFSET_BEGINNING) for p in range(P)])
eof = set(); t0 = time.time()
while len(eof) < P:
    for m in c.consume(5000, 0.5):
        if m.error():
            eof.add(m.partition()); continue
        key, value, part = m.key().decode(), m.value().decode(), m.partition()
        h.ends[part] = max(h.ends.get(part, 0), m.offset() + 1)
        if value.startswith(POISON_PREFIX):
            h.poison[value] = m.timestamp()[1] / 1000; continue
        seq, ts = int(value), m.timestamp()[1]
        h.records += 1
        h.last_seq[key] = max(h.last_seq.get(key, 0), seq)
        h.partition_of[key] = part
        h.stream_time[part] = max(h.stream_time.get(part, 0), ts)
        w = h.windows[(key, ts - ts % WINDOW_MS)]; w[0] += amount(seq); w[1] += 1
c.close()
print(f"history: {h.records} records, {len(h.poison)} poison, read in {time.time()-t0:.0f}s", flush=True)

console = Path("/tmp/s4soak/run60.out").read_text()
import datetime
first = re.search(r"soak: \+1m (\d\d:\d\d:\d\d)", console).group(1)
T0 = datetime.datetime.strptime("2026-11-24 " + first, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp() - 60
leaky = {}
for m in re.finditer(r"fault t=\+\s*([\d.]+)s (\w+) eos/\w+ -> SIG(?:KILL|STOP) pid (\d+)", console):
    leaky[int(m.group(3))] = T0 + float(m.group(1))
print(f"leaky eos pids: {len(leaky)}", flush=True)

class FakeApp:
    def __init__(self, spec, ports): self.spec, self._ports = spec, ports
    def ports(self): return self._ports
ports = {"eos": [55555, 55556], "alos": [51551, 51552]}
out = {}
for name, guarantee in (("eos", "exactly_once_v2"), ("alos", "at_least_once")):
    topics = {"SOAK_INPUT": f"{RUN}-input", "SOAK_TABLE": f"{RUN}-groups",
              **{f"SOAK_{k.upper()}": f"{RUN}-{name}-{k}" for k in ("counts", "windows", "joined")}}
    spec = AppSpec(name=name, app_id=f"{RUN}-{name}", guarantee=guarantee, bootstrap=B, topics=topics,
                   run_dir=Path("/tmp/s4soak/run60"), dead_letter=f"{RUN}-{name}-dead-letters")
    ch = AppChecker(FakeApp(spec, ports[name]), h, P, leaky if guarantee == "exactly_once_v2" else {})
    read = {k: ch.guarded(getattr(ch, f"check_{k}"), 0) for k in ("counts", "windows", "joined", "dead_letters")}
    workers = ch.guarded(ch.check_workers, {})
    asked = ch.guarded(ch.check_queries, 0)
    out[name] = {"records_read": read, "workers": workers, "iq_keys_asked": asked, **ch.tally.to_dict()}
    print(name, json.dumps({k: v for k, v in out[name].items() if k != "details"}), flush=True)
    print(name, "details", json.dumps(out[name]["details"][:12]), flush=True)
Path("/tmp/s4soak/posthoc/posthoc.json").write_text(json.dumps(out, indent=1))
