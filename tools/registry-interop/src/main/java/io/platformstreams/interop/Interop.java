package io.platformstreams.interop;

import io.apicurio.registry.serde.SerdeConfig;
import io.apicurio.registry.serde.avro.AvroKafkaDeserializer;
import io.apicurio.registry.serde.avro.AvroKafkaSerializer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java producer and consumer with Apicurio's Avro serdes configured for the Confluent wire
 * format, the way a Java service on a Confluent-compatible platform writes and reads topics.
 *
 * <pre>
 * produce BOOTSTRAP REGISTRY TOPIC N   N records key "k<i>", value Order{id: "o<i>", amount: i}
 * consume BOOTSTRAP REGISTRY TOPIC N   N values as JSON lines: {"value": ..., "bytes": hex,
 *                                      "reencoded": hex} (reencoded: this serializer's bytes
 *                                      for the value it decoded)
 * </pre>
 * REGISTRY is the registry's native API (.../apis/registry/v2).
 */
public final class Interop {
    static final Schema ORDER = new Schema.Parser().parse(
        "{\"type\":\"record\",\"name\":\"Order\",\"namespace\":\"ps.interop\",\"fields\":["
            + "{\"name\":\"id\",\"type\":\"string\"},{\"name\":\"amount\",\"type\":\"long\"}]}");

    private Interop() {}

    /** The Confluent-compatible settings: the id in the payload (no headers), as Confluent's
     * 4-byte int, and that id is the content id (what the ccompat API calls a schema id). */
    static Map<String, Object> serdeConfig(String registry, boolean writing) {
        Map<String, Object> config = new HashMap<>();
        config.put(SerdeConfig.REGISTRY_URL, registry);
        config.put(SerdeConfig.ENABLE_HEADERS, false);
        config.put(SerdeConfig.ENABLE_CONFLUENT_ID_HANDLER, true);
        config.put(SerdeConfig.USE_ID, "contentId");
        // the producer registers its schema under the topic's subject; the re-encoding consumer
        // uses the subject's latest schema (the one the Python side registered) as Confluent's
        // use.latest.version does, so equal values give equal ids
        config.put(SerdeConfig.AUTO_REGISTER_ARTIFACT, writing);
        config.put(SerdeConfig.FIND_LATEST_ARTIFACT, !writing);
        return config;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], registry = args[2], topic = args[3];
        int n = Integer.parseInt(args[4]);
        if (mode.equals("produce")) {
            produce(bootstrap, registry, topic, n);
        } else if (mode.equals("consume")) {
            consume(bootstrap, registry, topic, n);
        } else {
            throw new IllegalArgumentException("mode: produce or consume, not " + mode);
        }
    }

    static void produce(String bootstrap, String registry, String topic, int n) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        AvroKafkaSerializer<GenericRecord> values = new AvroKafkaSerializer<>();
        values.configure(serdeConfig(registry, true), false);
        try (KafkaProducer<String, GenericRecord> producer =
                 new KafkaProducer<>(props, new StringSerializer(), values)) {
            for (int i = 0; i < n; i++) {
                GenericRecord order = new GenericData.Record(ORDER);
                order.put("id", "o" + i);
                order.put("amount", (long) i);
                producer.send(new ProducerRecord<>(topic, "k" + i, order));
            }
            producer.flush();
        }
    }

    static void consume(String bootstrap, String registry, String topic, int n) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        AvroKafkaDeserializer<GenericRecord> reader = new AvroKafkaDeserializer<>();
        reader.configure(serdeConfig(registry, false), false);
        AvroKafkaSerializer<GenericRecord> writer = new AvroKafkaSerializer<>();
        writer.configure(serdeConfig(registry, false), false);
        HexFormat hex = HexFormat.of();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    GenericRecord value = reader.deserialize(topic, record.value());
                    byte[] again = writer.serialize(topic, value);
                    System.out.println("{\"value\": " + value + ", \"bytes\": \"" + hex.formatHex(record.value())
                        + "\", \"reencoded\": \"" + hex.formatHex(again) + "\", \"equal\": "
                        + Arrays.equals(record.value(), again) + "}");
                    seen++;
                }
            }
            if (seen < n) {
                throw new IllegalStateException("read " + seen + " of " + n + " records from " + topic);
            }
        }
    }
}
