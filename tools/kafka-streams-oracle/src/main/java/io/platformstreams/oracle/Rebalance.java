package io.platformstreams.oracle;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The counting app of bench/rebalance.py in Java Kafka Streams: the same topology and settings
 * as tests/integration/eos_runner.py (input -> groupByKey().count(cache off) -> output, String
 * keys and values), and the same stdout events the bench waits on: {@code RUNNING} whenever the
 * client enters RUNNING, {@code ACTIVE <json list>} when its active tasks change, {@code CLOSED}
 * after SIGTERM.
 *
 * <p>Usage: {@code Rebalance --bootstrap B --app-id A --input I --output O --state-dir D
 * [--guarantee G] [--commit-interval-ms N] [--standbys N] [--instance-id ID] [--probing-ms N]}
 * (the flags of eos_runner.py it needs; others are ignored).
 */
public final class Rebalance {
    private Rebalance() {
    }

    static Map<String, String> flags(String[] args) {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            flags.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        return flags;
    }

    static Properties config(Map<String, String> f) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, f.get("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, f.get("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, f.get("state-dir"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, f.getOrDefault("guarantee", "at_least_once"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(f.getOrDefault("commit-interval-ms", "200")));
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.parseInt(f.getOrDefault("standbys", "0")));
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        props.put(StreamsConfig.PROBING_REBALANCE_INTERVAL_MS_CONFIG,
            Math.max(60_000L, Long.parseLong(f.getOrDefault("probing-ms", "600000"))));
        if (f.containsKey("instance-id")) {
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), f.get("instance-id"));
        }
        // the tests' group timings (tests/integration/support_apps.py APP_TIMING)
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 500);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG), 10000);
        return props;
    }

    static String actives(KafkaStreams streams) {
        TreeSet<String> tasks = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) {
                tasks.add(task.taskId().toString());
            }
        }
        StringBuilder json = new StringBuilder("[");
        for (String t : tasks) {
            json.append(json.length() > 1 ? ", " : "").append('"').append(t).append('"');
        }
        return json.append(']').toString();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> f = flags(args);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(f.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
            .toStream()
            .mapValues(String::valueOf)
            .to(f.get("output"), Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), config(f));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean clean = streams.close(Duration.ofSeconds(30));
            System.out.println(clean ? "CLOSED" : "CLOSE-TIMEOUT");
            System.out.flush();
            stopped.countDown();
        }));
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("RUNNING");
                System.out.flush();
            }
        });
        streams.start();
        String reported = null;
        for (List<KafkaStreams.State> done = List.of(KafkaStreams.State.ERROR, KafkaStreams.State.NOT_RUNNING);
             !done.contains(streams.state()); Thread.sleep(50)) {
            String now = actives(streams);
            if (!now.equals(reported)) {
                reported = now;
                System.out.println("ACTIVE " + now);
                System.out.flush();
            }
        }
        if (streams.state() == KafkaStreams.State.ERROR) {
            System.out.println("FAILED ERROR");
            System.exit(2);
        }
        stopped.await();
    }
}
