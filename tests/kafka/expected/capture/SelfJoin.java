import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;
import org.apache.kafka.streams.processor.api.*;

public class SelfJoin {
    static Processor<String, String, Void, Void> proc() {
        return new Processor<String, String, Void, Void>() { public void process(org.apache.kafka.streams.processor.api.Record<String, String> r) {} };
    }
    static void show(String title, StreamsBuilder b, boolean optimize) {
        Properties p = new Properties();
        if (optimize) p.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        System.out.println("=== " + title);
        System.out.print(b.build(p).describe());
    }
    public static void main(String[] a) {
        ValueJoiner<String, String, String> j = (v1, v2) -> v1 + v2;
        for (String kind : new String[] {"inner", "left", "outer"}) {
            for (boolean opt : new boolean[] {true, false}) {
                StreamsBuilder b = new StreamsBuilder();
                KStream<String, String> s = b.stream("topic1", Consumed.with(Serdes.String(), Serdes.String()));
                JoinWindows w = JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(100));
                StreamJoined<String, String, String> sj = StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
                KStream<String, String> r = kind.equals("inner") ? s.join(s, j, w, sj) : kind.equals("left") ? s.leftJoin(s, j, w, sj) : s.outerJoin(s, j, w, sj);
                r.process(SelfJoin::proc);
                show(kind + " single stream optimize=" + opt, b, opt);
            }
        }
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> s1 = b.stream("topic1", Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> s2 = b.stream("topic1", Consumed.with(Serdes.String(), Serdes.String()));
        s1.join(s2, j, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(100)), StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String())).process(SelfJoin::proc);
        show("two streams optimize=true", b, true);
        b = new StreamsBuilder();
        s1 = b.stream("topic1", Consumed.with(Serdes.String(), Serdes.String()));
        s1.join(s1, j, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(100)), StreamJoined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String()).withName("self").withStoreName("st")).to("out");
        show("named single stream optimize=true", b, true);
        b = new StreamsBuilder();
        s1 = b.stream("topic1", Consumed.with(Serdes.String(), Serdes.String()));
        s2 = b.stream("topic1", Consumed.with(Serdes.String(), Serdes.String()));
        s1.mapValues(v -> v).join(s2, j, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(100))).to("out");
        show("map then join same topic optimize=true", b, true);
    }
}
