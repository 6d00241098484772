package io.platformstreams.oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.TimestampedKeyValueStore;
import org.apache.kafka.streams.state.ValueAndTimestamp;

/**
 * State TTL the way a Kafka Streams user writes it (Kafka Streams has no TTL option): a count
 * in a timestamped key-value store, written with the Processor API, whose entries expire
 * {@code ttl} ms of stream time after their last update. platform_streams' counterpart is
 * {@code groupByKey().count(Materialized.as("counts").with_ttl(ttl, sweep))} without caching
 * (tests/oracle/test_state_ttl_oracle.py). Semantics written out here, as that TTL means them:
 * an entry whose timestamp + ttl is at most the stream time reads as absent (the count starts
 * again), and a stream-time punctuator every {@code sweep} ms deletes expired entries and
 * forwards a tombstone for each, stamped with the punctuation's stream time.
 */
final class TtlCount {
    private TtlCount() {
    }

    static Topology topology(long ttl, long sweep) {
        Topology topology = new Topology();
        topology.addSource("source", Serdes.String().deserializer(), Serdes.String().deserializer(), "in");
        topology.addProcessor("count", () -> new CountWithTtl(ttl, sweep), "source");
        topology.addStateStore(Stores.timestampedKeyValueStoreBuilder(
            Stores.inMemoryKeyValueStore("counts"), Serdes.String(), Serdes.Long()).withCachingDisabled(), "count");
        topology.addSink("sink", "out", Serdes.String().serializer(), Serdes.Long().serializer(), "count");
        return topology;
    }

    private static final class CountWithTtl implements Processor<String, String, String, Long> {
        private final long ttl;
        private final long sweep;
        private ProcessorContext<String, Long> context;
        private TimestampedKeyValueStore<String, Long> store;

        CountWithTtl(long ttl, long sweep) {
            this.ttl = ttl;
            this.sweep = sweep;
        }

        @Override
        public void init(ProcessorContext<String, Long> context) {
            this.context = context;
            this.store = context.getStateStore("counts");
            context.schedule(Duration.ofMillis(sweep), PunctuationType.STREAM_TIME, this::sweep);
        }

        @Override
        public void process(Record<String, String> record) {
            if (record.key() == null || record.value() == null) {
                return; // as KStreamAggregate
            }
            ValueAndTimestamp<Long> old = store.get(record.key());
            long timestamp = record.timestamp();
            long count = 1;
            if (old != null && old.timestamp() + ttl > context.currentStreamTimeMs()) {
                count = old.value() + 1;
                timestamp = Math.max(timestamp, old.timestamp());
            }
            store.put(record.key(), ValueAndTimestamp.make(count, timestamp));
            context.forward(new Record<>(record.key(), count, timestamp));
        }

        private void sweep(long streamTime) {
            List<String> expired = new ArrayList<>();
            try (KeyValueIterator<String, ValueAndTimestamp<Long>> it = store.all()) {
                it.forEachRemaining(kv -> {
                    if (kv.value.timestamp() + ttl <= streamTime) {
                        expired.add(kv.key);
                    }
                });
            }
            for (String key : expired) {
                store.delete(key);
                context.forward(new Record<String, Long>(key, null, streamTime));
            }
        }
    }
}
