// The counting topology of tests/integration/support_apps.count_app in Java Kafka Streams with
// group.protocol=streams: args BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR RUN_MS (see mix.py).
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

public class MixCount {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[1]);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a[4]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200L);
        StreamsBuilder b = new StreamsBuilder();
        b.stream(a[2], Consumed.with(Serdes.String(), Serdes.String())).groupByKey()
         .count(Materialized.as("counts")).toStream().to(a[3], Produced.with(Serdes.String(), Serdes.Long()));
        Topology t = b.build();
        System.out.println(t.describe());
        KafkaStreams s = new KafkaStreams(t, p);
        s.setStateListener((n, o) -> System.out.println("STATE " + n));
        s.start();
        Thread.sleep(Long.parseLong(a[5]));
        s.close();
        System.out.println("CLOSED");
    }
}
