package io.platformstreams.oracle;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * The Java Kafka Streams engine of bench/run.py: the app a Kafka user would write for each
 * workload, default StreamsConfig except the workload's guarantee and commit interval and the
 * harness's group timings (the same in every engine).
 *
 * <p>Usage: {@code Bench '<bench RunSpec as JSON, plus kind/guarantee/commit_interval_ms>'};
 * prints {"wall_s", "cpu_s", "peak_rss_mb", "records", "restored_entries"} on its last line.
 * The clock starts when the instance first reaches RUNNING (partitions assigned; Kafka Streams
 * has no public assignment callback) or, restoring, when the first restore starts; it stops
 * when {@code close()} returns after every input record was processed (final commit done).
 * "Every input record" is the last offset of every input partition seen by the app, not a count
 * of records seen: a rebalance on a busy machine (6 s sessions) makes at-least-once processing
 * see some records twice, and a count would stop the app before the end.
 *
 * <p>Emit-final windows on a finite input: Kafka Streams looks for closed windows at most once
 * per {@code __emit.interval.ms.kstreams.windowed.aggregation__} (1 s of wall clock) and only
 * while it processes a record, so the windows that closed in the input's last second would never
 * be emitted. A live stream has a next record; here the window_sum app also reads a tick topic
 * of its own (co-partitioned, merged into the same stream), and once every input record is
 * processed and that interval has passed, one record per partition is written to it with
 * timestamp 0: a late record (its window closed long ago, so no aggregate changes) that runs the
 * emit check. The wait is taken out of the wall time; the interval itself is left at Kafka's
 * default, as a user would run it.
 */
public final class Bench {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WINDOW_MS = 60_000;
    /** Kafka Streams' default {@code __emit.interval.ms.kstreams.windowed.aggregation__}. */
    private static final long EMIT_INTERVAL_MS = 1_000;

    private Bench() {
    }

    /** JSON values: the same ~100-byte orders every engine reads. */
    static final class JsonSerde implements Serde<JsonNode> {
        @Override
        public org.apache.kafka.common.serialization.Serializer<JsonNode> serializer() {
            return (topic, data) -> {
                try {
                    return data == null ? null : JSON.writeValueAsBytes(data);
                } catch (IOException e) {
                    throw new IllegalStateException(e);
                }
            };
        }

        @Override
        public org.apache.kafka.common.serialization.Deserializer<JsonNode> deserializer() {
            return (topic, data) -> {
                try {
                    return data == null ? null : JSON.readTree(data);
                } catch (IOException e) {
                    throw new IllegalStateException(e);
                }
            };
        }
    }

    static String tickTopic(String output) {
        return output + "-tick";
    }

    /** The highest input offset processed per partition. */
    static final class Progress {
        final Map<Integer, Long> highest = new ConcurrentHashMap<>();

        boolean reached(JsonNode ends) {
            for (Map.Entry<String, JsonNode> end : ends.properties()) {
                long last = end.getValue().asLong() - 1;
                if (last >= 0 && highest.getOrDefault(Integer.parseInt(end.getKey()), -1L) < last) {
                    return false;
                }
            }
            return true;
        }
    }

    static Topology topology(String kind, String input, String output, Progress progress, AtomicLong ticks) {
        StreamsBuilder builder = new StreamsBuilder();
        Serde<JsonNode> json = new JsonSerde();
        KStream<Bytes, JsonNode> stream = builder.stream(input, Consumed.with(Serdes.Bytes(), json))
            .processValues(() -> new FixedKeyProcessor<Bytes, JsonNode, JsonNode>() {
                private FixedKeyProcessorContext<Bytes, JsonNode> context;

                @Override
                public void init(FixedKeyProcessorContext<Bytes, JsonNode> context) {
                    this.context = context;
                }

                @Override
                public void process(FixedKeyRecord<Bytes, JsonNode> record) {
                    context.recordMetadata().ifPresent(
                        m -> progress.highest.merge(m.partition(), m.offset(), Math::max));
                    context.forward(record);
                }
            });
        if (kind.equals("window_sum")) {
            stream = stream.merge(builder.stream(tickTopic(output), Consumed.with(Serdes.Bytes(), json))
                .peek((k, v) -> ticks.incrementAndGet()));
        }
        switch (kind) {
            case "stateless" -> stream.filter((k, v) -> v.get("amount").asDouble() >= 25.0)
                .mapValues(v -> {
                    ObjectNode out = JSON.createObjectNode();
                    out.set("id", v.get("id"));
                    out.set("user", v.get("user"));
                    out.put("cents", (long) (v.get("amount").asDouble() * 100));
                    out.set("ccy", v.get("currency"));
                    return (JsonNode) out;
                })
                .to(output, Produced.with(Serdes.Bytes(), json));
            case "count" -> stream.groupByKey()
                .count(Materialized.<Bytes, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream().mapValues(String::valueOf)
                .to(output, Produced.with(Serdes.Bytes(), Serdes.String()));
            case "window_sum" -> stream.groupByKey()
                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(WINDOW_MS)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .aggregate(() -> 0.0, (k, v, total) -> total + v.get("amount").asDouble(),
                    Materialized.with(Serdes.Bytes(), Serdes.Double()))
                .toStream()
                .map((windowed, total) -> {
                    ObjectNode out = JSON.createObjectNode();
                    out.put("start", windowed.window().start());
                    out.put("end", windowed.window().start() + WINDOW_MS);
                    out.put("value", total);
                    return KeyValue.pair(windowed.key(), (JsonNode) out);
                })
                .to(output, Produced.with(Serdes.Bytes(), json));
            default -> throw new IllegalArgumentException("unknown workload kind " + kind);
        }
        return builder.build();
    }

    static Properties config(JsonNode spec) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, spec.get("app_id").asText());
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("bootstrap").asText());
        props.put(StreamsConfig.STATE_DIR_CONFIG, spec.get("state_dir").asText());
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, spec.get("guarantee").asText());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, spec.get("commit_interval_ms").asLong());
        // bench/scale_out.py's Java rows: 1, 2, 4 stream threads in one instance
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, spec.path("config").path("num_stream_threads").asInt(1));
        // the harness's group timings (bench/common.py GROUP_TIMING), the same in every engine
        JsonNode timing = spec.path("group_timing");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG),
            timing.path("session_timeout_ms").asInt(6000));
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG),
            timing.path("heartbeat_interval_ms").asInt(500));
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG),
            timing.path("max_poll_interval_ms").asInt(10000));
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG), false);
        return props;
    }

    public static void main(String[] args) throws Exception {
        JsonNode spec = JSON.readTree(args[0]);
        boolean restore = spec.path("phase").asText("process").equals("restore");
        long records = spec.get("records").asLong();
        Progress progress = new Progress();
        AtomicLong ticks = new AtomicLong();
        String kind = spec.get("kind").asText();
        int partitions = spec.get("input_ends").size();
        if (kind.equals("window_sum") && !restore) {
            createTickTopic(spec, partitions);
        }
        Topology topology = topology(kind, spec.get("input_topic").asText(),
            spec.get("output_topic").asText(), progress, ticks);
        Clock clock = new Clock();
        CountDownLatch running = new CountDownLatch(1);
        AtomicLong restored = new AtomicLong();
        try (KafkaStreams streams = new KafkaStreams(topology, config(spec))) {
            streams.setStateListener((now, before) -> {
                if (now == KafkaStreams.State.RUNNING) {
                    clock.start();
                    running.countDown();
                }
            });
            streams.setGlobalStateRestoreListener(new StateRestoreListener() {
                @Override
                public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
                    clock.start();
                }

                @Override
                public void onBatchRestored(TopicPartition partition, String store, long end, long count) {
                    restored.addAndGet(count);
                }

                @Override
                public void onRestoreEnd(TopicPartition partition, String store, long total) {
                }
            });
            streams.start();
            if (!running.await(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("Kafka Streams never reached RUNNING: " + streams.state());
            }
            Map<String, Object> result = new LinkedHashMap<>();
            if (restore) {
                clock.stop();
                ReadOnlyKeyValueStore<Bytes, Long> store = streams.store(
                    StoreQueryParameters.fromNameAndType("counts", QueryableStoreTypes.keyValueStore()));
                long entries = 0;
                try (KeyValueIterator<Bytes, Long> it = store.all()) {
                    while (it.hasNext()) {
                        it.next();
                        entries++;
                    }
                }
                streams.close(Duration.ofSeconds(120));
                result.put("records", restored.get());
                result.put("restored_entries", entries);
            } else {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1800);
                while (!progress.reached(spec.get("input_ends"))) {
                    if (streams.state() == KafkaStreams.State.ERROR || System.nanoTime() > deadline) {
                        throw new IllegalStateException("Kafka Streams stopped: " + streams.state());
                    }
                    Thread.sleep(10);
                }
                double processedS = (System.nanoTime() - clock.wall0) / 1e9;
                long waitedNs = 0;
                if (kind.equals("window_sum")) {
                    long before = System.nanoTime();
                    Thread.sleep(EMIT_INTERVAL_MS + 100);
                    waitedNs = System.nanoTime() - before;
                    sendTicks(spec, partitions);
                    while (ticks.get() < partitions) {
                        if (streams.state() == KafkaStreams.State.ERROR || System.nanoTime() > deadline) {
                            throw new IllegalStateException("Kafka Streams stopped: " + streams.state());
                        }
                        Thread.sleep(10);
                    }
                }
                streams.close(Duration.ofSeconds(120));
                clock.stop();
                clock.wallS -= waitedNs / 1e9;
                result.put("processed_s", processedS);
            }
            result.put("wall_s", clock.wallS);
            result.put("cpu_s", clock.cpuS);
            result.put("peak_rss_mb", peakRssMb());
            System.out.println(JSON.writeValueAsString(result));
        }
    }

    static void createTickTopic(JsonNode spec, int partitions) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("bootstrap").asText());
        try (Admin admin = Admin.create(props)) {
            NewTopic topic = new NewTopic(tickTopic(spec.get("output_topic").asText()), Optional.of(partitions),
                Optional.empty()).configs(Map.of("retention.ms", "-1"));
            admin.createTopics(List.of(topic)).all().get(60, TimeUnit.SECONDS);
        }
    }

    /** One late record per partition of the tick topic (see the class comment). */
    static void sendTicks(JsonNode spec, int partitions) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("bootstrap").asText());
        byte[] value = "{\"amount\":0.0}".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int p = 0; p < partitions; p++) {
                producer.send(new ProducerRecord<>(tickTopic(spec.get("output_topic").asText()), p, 0L,
                    "tick".getBytes(java.nio.charset.StandardCharsets.UTF_8), value)).get(60, TimeUnit.SECONDS);
            }
        }
    }

    /** Wall and whole-process CPU time (every JVM thread) between the first start and stop. */
    static final class Clock {
        private volatile long wall0 = -1;
        private volatile long cpu0;
        double wallS;
        double cpuS;

        synchronized void start() {
            if (wall0 < 0) {
                wall0 = System.nanoTime();
                cpu0 = cpuNanos();
            }
        }

        void stop() {
            wallS = (System.nanoTime() - wall0) / 1e9;
            cpuS = (cpuNanos() - cpu0) / 1e9;
        }

        private static long cpuNanos() {
            return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
        }
    }

    static double peakRssMb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.split("\\s+")[1]) / 1024.0;
            }
        }
        return 0;
    }
}
