package io.platformstreams.oracle;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The catalogue of differential topologies, each written twice: here and in
 * tests/oracle/catalogue.py. Names, parameters, input topics (in, in2, tbl), the output
 * topic (out), store names and serdes must match the Python side exactly. Values are
 * decimal strings (or null tombstones); keys are strings.
 */
final class Catalogue {
    private static final Serde<String> S = Serdes.String();
    private static final Serde<Long> L = Serdes.Long();
    private static final Consumed<String, String> SS = Consumed.with(S, S);
    /** Window stores keep a day: nothing a case stores expires, so stores compare exactly
     * (Kafka drops expired windows per segment, not per window: docs/oracle.md). */
    private static final Duration RETENTION = Duration.ofDays(1);

    private Catalogue() {
    }

    static int iv(String value) {
        return Integer.parseInt(value);
    }

    static String s(Object value) {
        return value == null ? "null" : value.toString();
    }

    static final ValueJoiner<String, String, String> JOINER = (a, b) -> s(a) + "+" + s(b);

    static long p(Map<String, Long> params, String name) {
        Long value = params.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing parameter " + name);
        }
        return value;
    }

    static Topology build(String name, Map<String, Long> params) {
        if (name.equals("ttlcount")) { // a Processor API scenario (tests/oracle/test_state_ttl_oracle.py)
            return TtlCount.topology(p(params, "ttl"), p(params, "sweep"));
        }
        StreamsBuilder b = new StreamsBuilder();
        String[] parts = name.split("_");
        switch (parts[0]) {
            case "stateless" -> b.stream("in", SS)
                .filter((k, v) -> v != null && iv(v) % 3 != 0)
                .mapValues(v -> Integer.toString(iv(v) * 2))
                .flatMapValues(v -> iv(v) % 4 == 0 ? Arrays.asList(v, v + "x") : List.of(v))
                .selectKey((k, v) -> v.substring(0, 1))
                .to("out", Produced.with(S, S));
            case "merge" -> b.stream("in", SS).filter((k, v) -> v != null)
                .merge(b.stream("in2", SS).filterNot((k, v) -> v == null || iv(v) > 6))
                .mapValues(v -> v + "m")
                .to("out", Produced.with(S, S));
            case "rekey" -> b.stream("in", SS)
                .selectKey((k, v) -> v == null ? "n" : Integer.toString(iv(v) % 4))
                .groupByKey(Grouped.with(S, S))
                .count(Materialized.as("counts"))
                .toStream().to("out", Produced.with(S, L));
            case "count" -> b.stream("in", SS).groupByKey().count(Materialized.as("counts"))
                .toStream().to("out", Produced.with(S, L));
            case "reduce" -> b.stream("in", SS).groupByKey()
                .reduce((x, y) -> Integer.toString(iv(x) + iv(y)), Materialized.as("sums"))
                .toStream().to("out", Produced.with(S, S));
            case "aggregate" -> b.stream("in", SS).groupByKey()
                .aggregate(() -> 0L, (k, v, agg) -> agg * 3 + iv(v),
                    Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("agg").withValueSerde(L))
                .toStream().to("out", Produced.with(S, L));
            case "tumbling", "hopping", "sliding" -> timeWindowed(b, parts[0], parts[1], params);
            case "session" -> sessionWindowed(b, parts[1], params);
            case "ssjoin" -> streamStreamJoin(b, parts[1], params);
            case "stjoin" -> {
                KStream<String, String> left = b.stream("in", SS);
                KTable<String, String> right = b.table("tbl", SS);
                (parts[1].equals("inner") ? left.join(right, JOINER) : left.leftJoin(right, JOINER))
                    .to("out", Produced.with(S, S));
            }
            case "vstjoin" -> {
                // KIP-914/923: a versioned table, looked up as of each stream record's time,
                // stream records held for the grace period
                KStream<String, String> left = b.stream("in", SS);
                KTable<String, String> right = b.table("tbl", SS, Materialized.<String, String>as(
                    Stores.persistentVersionedKeyValueStore("vtbl", Duration.ofMillis(100))));
                Joined<String, String, String> joined = Joined.with(S, S, S)
                    .withGracePeriod(Duration.ofMillis(p(params, "grace")));
                (parts[1].equals("inner") ? left.join(right, JOINER, joined) : left.leftJoin(right, JOINER, joined))
                    .to("out", Produced.with(S, S));
            }
            case "ttjoin" -> {
                KTable<String, String> left = b.table("in", SS);
                KTable<String, String> right = b.table("tbl", SS);
                KTable<String, String> joined = switch (parts[1]) {
                    case "inner" -> left.join(right, JOINER);
                    case "left" -> left.leftJoin(right, JOINER);
                    default -> left.outerJoin(right, JOINER);
                };
                joined.toStream().to("out", Produced.with(S, S));
            }
            case "fkjoin" -> {
                // foreign-key join: a row of "in" names a row of "tbl" by its value (key a, b or c)
                KTable<String, String> left = b.table("in", SS);
                KTable<String, String> right = b.table("tbl", SS);
                Function<String, String> fk = v -> String.valueOf((char) ('a' + iv(v) % 3));
                KTable<String, String> joined = switch (parts[1]) {
                    case "inner" -> left.join(right, fk, JOINER);
                    case "left" -> left.leftJoin(right, fk, JOINER);
                    default -> left.leftJoin(right, fk, JOINER, TableJoined.as("fk"),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("fkres")
                            .withValueSerde(S));
                };
                joined.toStream().to("out", Produced.with(S, S));
            }
            case "cogroup" -> {
                KGroupedStream<String, String> g1 = b.stream("in", SS).groupByKey();
                KGroupedStream<String, String> g2 = b.stream("in2", SS).groupByKey();
                g1.<Long>cogroup((k, v, agg) -> agg + iv(v))
                    .cogroup(g2, (k, v, agg) -> agg * 2 - iv(v))
                    .aggregate(() -> 0L,
                        Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("cog").withValueSerde(L))
                    .toStream().to("out", Produced.with(S, L));
            }
            case "tableops" -> {
                KTable<String, String> table = b.table("tbl", SS);
                KTable<String, String> filtered = parts[1].equals("mat")
                    ? table.filter((k, v) -> iv(v) % 2 == 0,
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("filtered"))
                    : table.filter((k, v) -> iv(v) % 2 == 0);
                filtered.mapValues(v -> v + "!").toStream().to("out", Produced.with(S, S));
            }
            case "tablegroup" -> {
                var grouped = b.table("tbl", SS)
                    .groupBy((k, v) -> KeyValue.pair(Integer.toString(iv(v) % 3), v), Grouped.with(S, S));
                if (parts[1].equals("reduce")) {
                    grouped.reduce((x, y) -> Integer.toString(iv(x) + iv(y)),
                            (x, y) -> Integer.toString(iv(x) - iv(y)), Materialized.as("tagg"))
                        .toStream().to("out", Produced.with(S, S));
                } else {
                    grouped.count(Materialized.as("tagg")).toStream().to("out", Produced.with(S, L));
                }
            }
            case "tablesource" -> b.table("tbl", SS, Materialized.as("src")).toStream()
                .to("out", Produced.with(S, S));
            case "vtable" -> {
                // versioned tables (KIP-889/914: 100 ms of history): an out-of-order update
                // changes the history but is not forwarded downstream
                KTable<String, String> left = parts[1].equals("join") ? versioned(b, "in", "vin") : null;
                KTable<String, String> table = versioned(b, "tbl", "vsrc");
                switch (parts[1]) {
                    case "source" -> table.toStream().to("out", Produced.with(S, S));
                    case "ops" -> table.filter((k, v) -> iv(v) % 2 == 0).mapValues(v -> v + "!")
                        .toStream().to("out", Produced.with(S, S));
                    case "count" -> table
                        .groupBy((k, v) -> KeyValue.pair(Integer.toString(iv(v) % 3), v), Grouped.with(S, S))
                        .count(Materialized.as("tagg")).toStream().to("out", Produced.with(S, L));
                    default -> left.join(table, JOINER).toStream().to("out", Produced.with(S, S));
                }
            }
            default -> throw new IllegalArgumentException("unknown topology " + name);
        }
        return b.build();
    }

    private static KTable<String, String> versioned(StreamsBuilder b, String topic, String store) {
        return b.table(topic, SS, Materialized.<String, String>as(
            Stores.persistentVersionedKeyValueStore(store, Duration.ofMillis(100))));
    }

    private static void timeWindowed(StreamsBuilder b, String kind, String emit, Map<String, Long> params) {
        long size = p(params, "size");
        long grace = p(params, "grace");
        KGroupedStream<String, String> grouped = b.stream("in", SS).groupByKey();
        TimeWindowedKStream<String, String> windowed = switch (kind) {
            case "tumbling" -> grouped.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size),
                Duration.ofMillis(grace)));
            case "hopping" -> grouped.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size),
                Duration.ofMillis(grace)).advanceBy(Duration.ofMillis(p(params, "advance"))));
            default -> grouped.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(size),
                Duration.ofMillis(grace)));
        };
        if (emit.equals("final")) {
            windowed = windowed.emitStrategy(EmitStrategy.onWindowClose());
        }
        KTable<Windowed<String>, Long> counts = windowed.count(
            Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("wcounts").withRetention(RETENTION));
        if (emit.equals("suppress")) {
            counts = counts.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        counts.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, size), L));
    }

    private static void sessionWindowed(StreamsBuilder b, String emit, Map<String, Long> params) {
        SessionWindowedKStream<String, String> windowed = b.stream("in", SS).groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(p(params, "gap")),
                Duration.ofMillis(p(params, "grace"))));
        if (emit.equals("final")) {
            windowed = windowed.emitStrategy(EmitStrategy.onWindowClose());
        }
        KTable<Windowed<String>, Long> counts = windowed.count(
            Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("scounts").withRetention(RETENTION));
        if (emit.equals("suppress")) {
            counts = counts.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        }
        counts.toStream().to("out", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), L));
    }

    private static void streamStreamJoin(StreamsBuilder b, String kind, Map<String, Long> params) {
        JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(p(params, "diff")),
            Duration.ofMillis(p(params, "grace"))).after(Duration.ofMillis(p(params, "after")));
        KStream<String, String> left = b.stream("in", SS);
        KStream<String, String> right = b.stream("in2", SS);
        StreamJoined<String, String, String> joined = StreamJoined.with(S, S, S);
        KStream<String, String> result = switch (kind) {
            case "inner" -> left.join(right, JOINER, windows, joined);
            case "left" -> left.leftJoin(right, JOINER, windows, joined);
            default -> left.outerJoin(right, JOINER, windows, joined);
        };
        result.to("out", Produced.with(S, S));
    }
}
