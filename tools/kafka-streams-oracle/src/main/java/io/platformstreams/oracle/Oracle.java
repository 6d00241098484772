package io.platformstreams.oracle;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.VersionedKeyValueStore;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;
import org.apache.kafka.streams.test.TestRecord;

/**
 * A long-lived Kafka Streams TopologyTestDriver process: one JSON request per line on stdin,
 * one JSON answer per line on stdout, so a differential test runs thousands of cases
 * without a JVM start each.
 *
 * <p>Request: {"topology": name, "params": {..}, "steps": [["p", topic, key, value, ts] |
 * ["a", wallClockMs]], "store": {"name": .., "kind": "kv"|"window"|"session"} | null,
 * "describe": bool, "in_memory": bool (default true: Kafka's in-memory DSL stores), "props": {key: long}
 * (settings put over the driver's, e.g. Kafka's internal emit intervals)}. Answer: {"ok": true, "describe": text, "out": [[keyHex, valueHex, ts, stepIndex]],
 * "store": [[...]]} or {"ok": false, "error": text}.
 */
public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();

    private Oracle() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(new PrintStream(System.err, true, StandardCharsets.UTF_8));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, Object> answer;
            try {
                answer = run(JSON.readTree(line));
            } catch (Exception e) {
                answer = new LinkedHashMap<>();
                answer.put("ok", false);
                answer.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            out.println(JSON.writeValueAsString(answer));
        }
    }

    /** The driver's config; {@code inMemory}: Kafka's in-memory DSL stores, which give the same
     * results as RocksDB ones (windows here never expire) at a third of the cost a case. */
    static Properties config(Path stateDir, boolean inMemory) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "topology-test-driver");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:9092");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        if (inMemory) {
            props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG,
                org.apache.kafka.streams.state.BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
        }
        return props;
    }

    static Map<String, Object> run(JsonNode request) throws Exception {
        Map<String, Long> params = new HashMap<>();
        request.path("params").fields().forEachRemaining(e -> params.put(e.getKey(), e.getValue().asLong()));
        Topology topology = Catalogue.build(request.get("topology").asText(), params);
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("ok", true);
        if (request.path("describe").asBoolean(false)) {
            answer.put("describe", topology.describe().toString());
        }
        // RocksDB on tmpfs when there is one: the driver flushes every store after each record
        Path shm = Path.of("/dev/shm");
        Path stateDir = Files.isDirectory(shm) ? Files.createTempDirectory(shm, "ks-oracle-")
            : Files.createTempDirectory("ks-oracle-");
        Properties props = config(stateDir, request.path("in_memory").asBoolean(true));
        request.path("props").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asLong()));
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props, Instant.ofEpochMilli(0))) {
            Map<String, TestInputTopic<String, String>> inputs = new HashMap<>();
            TestOutputTopic<byte[], byte[]> output = driver.createOutputTopic("out",
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
            List<Object> records = new ArrayList<>();
            int stepIndex = 0;
            for (JsonNode step : request.path("steps")) {
                if (step.get(0).asText().equals("a")) {
                    driver.advanceWallClockTime(Duration.ofMillis(step.get(1).asLong()));
                } else {
                    TestInputTopic<String, String> topic = inputs.computeIfAbsent(step.get(1).asText(),
                        name -> driver.createInputTopic(name, new StringSerializer(), new StringSerializer()));
                    topic.pipeInput(text(step.get(2)), text(step.get(3)), step.get(4).asLong());
                }
                drain(output, records, stepIndex++);
            }
            answer.put("out", records);
            JsonNode store = request.path("store");
            if (store.isObject()) {
                List<String> keys = new ArrayList<>();
                store.path("keys").forEach(key -> keys.add(key.asText()));
                List<Long> asOf = new ArrayList<>();
                store.path("as_of").forEach(time -> asOf.add(time.asLong()));
                answer.put("store", readStore(driver, store.get("name").asText(), store.get("kind").asText(), keys,
                    asOf));
            }
        } finally {
            Utils.delete(stateDir.toFile());
        }
        return answer;
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }

    private static void drain(TestOutputTopic<byte[], byte[]> output, List<Object> records, int step) {
        while (!output.isEmpty()) {
            TestRecord<byte[], byte[]> record = output.readRecord();
            records.add(Arrays.asList(hex(record.key()), hex(record.value()), record.timestamp(), step));
        }
    }

    private static Object hex(byte[] bytes) {
        return bytes == null ? null : HEX.formatHex(bytes);
    }

    /** A key-value store's entries; a window or session store's windows of {@code keys}, read
     * as interactive queries do (a window fetch applies the store's retention). */
    private static List<Object> readStore(TopologyTestDriver driver, String name, String kind, List<String> keys,
                                          List<Long> asOf) {
        List<Object> rows = new ArrayList<>();
        switch (kind) {
            case "kv" -> {
                KeyValueStore<String, Object> store = driver.getKeyValueStore(name);
                try (KeyValueIterator<String, Object> it = store.all()) {
                    it.forEachRemaining(kv -> rows.add(List.of(kv.key, kv.value)));
                }
            }
            case "versioned" -> {
                // each key's version as of each probe time: value, timestamp and validTo
                VersionedKeyValueStore<String, Object> store = driver.getVersionedKeyValueStore(name);
                for (String key : keys) {
                    for (long time : asOf) {
                        VersionedRecord<Object> version = store.get(key, time);
                        rows.add(version == null ? Arrays.asList(key, time, null, null, null)
                            : Arrays.asList(key, time, version.value(), version.timestamp(),
                                version.validTo().orElse(null)));
                    }
                }
            }
            case "window" -> {
                WindowStore<String, Object> store = driver.getWindowStore(name);
                for (String key : keys) {
                    try (WindowStoreIterator<Object> it = store.fetch(key, 0L, Long.MAX_VALUE)) {
                        it.forEachRemaining(kv -> rows.add(List.of(key, kv.key, kv.value)));
                    }
                }
            }
            default -> {
                SessionStore<String, Object> store = driver.getSessionStore(name);
                try (KeyValueIterator<Windowed<String>, Object> it = store.fetch(null, null)) {
                    it.forEachRemaining(kv -> rows.add(List.of(kv.key.key(), kv.key.window().start(),
                        kv.key.window().end(), kv.value)));
                }
            }
        }
        return rows;
    }
}
