import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;

/**
 * Kafka's own replica assignment for the cases read on stdin, one per line (for tests/test_kafka_generate_real.py,
 * which checks bench/kafka_generate.py against it). Runs on the jars of Kafka 3.9 or 4.x; everything
 * version-specific is reached by reflection, so one compiled class serves both.
 *
 * Input lines (fields separated by single spaces; BROKERS is "id@rack,id@rack,..." or "id,id,..." without racks):
 *   admin ID PARTITIONS RF FIXED_START START_PARTITION BROKERS
 *       AdminUtils.assignReplicasToBrokers(brokers, PARTITIONS, RF, FIXED_START, START_PARTITION)  (3.9 only)
 *   tool ID SEED BROKERS TOPIC:PARTITIONS:RF[,TOPIC:PARTITIONS:RF...]
 *       ReassignPartitionsCommand.calculateAssignment (the heart of --generate) with the Random it draws from
 *       (3.9: AdminUtils.RAND; 4.x: the placer's in REPLICA_PLACER) reseeded to SEED, for those topics (topics in
 *       a HashMap by name, then their partitions in a HashMap, as the tool reads them; any current replica list of
 *       the right length: the tool only reads its size)
 * Output: "info ENGINE" first (adminutils or striped: what the tool uses), then per case one line
 *   "ID TOPIC P:b,b,b;P:b,b,b..." (TOPIC "-" for admin), or "ID ERROR message"; "done" at the end.
 */
public final class GenerateHarness {
    private static final String TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Tool tool = new Tool();
        out.println("info " + tool.engine);
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            String[] f = line.split(" ");
            String id = f.length > 1 ? f[1] : "?";
            try {
                if (f[0].equals("admin")) {
                    Map<Integer, List<Integer>> got = admin(Integer.parseInt(f[2]), Integer.parseInt(f[3]),
                        Integer.parseInt(f[4]), Integer.parseInt(f[5]), parseBrokers(f[6]));
                    out.println(id + " - " + format(got));
                } else if (f[0].equals("tool")) {
                    Map<String, Map<Integer, List<Integer>>> got =
                        tool.run(Long.parseLong(f[2]), parseBrokers(f[3]), f[4]);
                    for (Map.Entry<String, Map<Integer, List<Integer>>> e : got.entrySet())
                        out.println(id + " " + e.getKey() + " " + format(e.getValue()));
                } else {
                    out.println(id + " ERROR unknown command " + f[0]);
                }
            } catch (Throwable t) {
                Throwable c = t.getCause() != null ? t.getCause() : t;
                String message = String.valueOf(c.getMessage()).replace('\n', ' ');
                out.println(id + " ERROR " + c.getClass().getName() + ": " + message);
            }
        }
        out.println("done");
        out.flush();
    }

    /** Ordered (id, rack or null) pairs. */
    static List<Object[]> parseBrokers(String spec) {
        List<Object[]> brokers = new ArrayList<>();
        for (String b : spec.split(",")) {
            int at = b.indexOf('@');
            brokers.add(at < 0 ? new Object[] {Integer.parseInt(b), null}
                               : new Object[] {Integer.parseInt(b.substring(0, at)), b.substring(at + 1)});
        }
        return brokers;
    }

    static String format(Map<Integer, List<Integer>> assignment) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(assignment).entrySet()) {
            if (sb.length() > 0) sb.append(';');
            sb.append(e.getKey()).append(':');
            for (int i = 0; i < e.getValue().size(); i++) sb.append(i == 0 ? "" : ",").append(e.getValue().get(i));
        }
        return sb.toString();
    }

    static Optional<String> rack(Object[] b) {
        return Optional.ofNullable((String) b[1]);
    }

    @SuppressWarnings("unchecked")
    static Map<Integer, List<Integer>> admin(int partitions, int rf, int fixedStart, int startPartition,
                                             List<Object[]> brokers) throws Exception {
        Class<?> adminUtils = Class.forName("org.apache.kafka.admin.AdminUtils");
        Constructor<?> metadata =
            Class.forName("org.apache.kafka.admin.BrokerMetadata").getConstructor(int.class, Optional.class);
        List<Object> list = new ArrayList<>();
        for (Object[] b : brokers) list.add(metadata.newInstance(b[0], rack(b)));
        Method assign = adminUtils.getMethod("assignReplicasToBrokers",
            Collection.class, int.class, int.class, int.class, int.class);
        return (Map<Integer, List<Integer>>) assign.invoke(null, list, partitions, rf, fixedStart, startPartition);
    }

    /** The tool's calculateAssignment and the Random it draws from, whichever Kafka this is. */
    static final class Tool {
        final Method calculate;
        final Class<?> brokerClass;
        final Random random;
        final String engine;

        Tool() throws Exception {
            Class<?> tool = Class.forName(TOOL);
            Method found = null;
            for (Method m : tool.getDeclaredMethods())
                if (m.getName().equals("calculateAssignment") && m.getParameterCount() == 2) found = m;
            if (found == null) throw new IllegalStateException(TOOL + " has no calculateAssignment(Map, List)");
            found.setAccessible(true);
            calculate = found;
            Type listType = found.getGenericParameterTypes()[1];
            brokerClass = (Class<?>) ((ParameterizedType) listType).getActualTypeArguments()[0];
            if (brokerClass.getName().equals("org.apache.kafka.admin.BrokerMetadata")) {
                Field rand = Class.forName("org.apache.kafka.admin.AdminUtils").getDeclaredField("RAND");
                rand.setAccessible(true);
                random = (Random) rand.get(null);
                engine = "adminutils";
            } else {
                Field placerField = tool.getDeclaredField("REPLICA_PLACER");
                placerField.setAccessible(true);
                Object placer = placerField.get(null);
                Field rand = placer.getClass().getDeclaredField("random");
                rand.setAccessible(true);
                random = (Random) rand.get(placer);
                engine = placer.getClass().getSimpleName().equals("StripedReplicaPlacer") ? "striped"
                                                                                          : placer.getClass().getName();
            }
        }

        Object broker(Object[] b) throws Exception {
            if (brokerClass.getName().equals("org.apache.kafka.admin.BrokerMetadata"))
                return brokerClass.getConstructor(int.class, Optional.class).newInstance(b[0], rack(b));
            return brokerClass.getConstructor(int.class, Optional.class, boolean.class).newInstance(b[0], rack(b), false);
        }

        @SuppressWarnings("unchecked")
        Map<String, Map<Integer, List<Integer>>> run(long seed, List<Object[]> brokers, String topics) throws Exception {
            Class<?> tpClass = Class.forName("org.apache.kafka.common.TopicPartition");
            Constructor<?> tp = tpClass.getConstructor(String.class, int.class);
            Method topicOf = tpClass.getMethod("topic");
            Method partitionOf = tpClass.getMethod("partition");
            // As the tool builds it: topic descriptions in a HashMap by name, their partitions put in turn into a
            // HashMap<TopicPartition, List<Integer>> (whose order decides the order of the topics' random draws).
            Map<String, int[]> byName = new HashMap<>();
            List<String> order = new ArrayList<>();
            for (String t : topics.split(",")) {
                String[] parts = t.split(":");
                byName.put(parts[0], new int[] {Integer.parseInt(parts[1]), Integer.parseInt(parts[2])});
                order.add(parts[0]);
            }
            Map<Object, List<Integer>> current = new HashMap<>();
            for (Map.Entry<String, int[]> e : byName.entrySet()) {
                List<Integer> replicas = new ArrayList<>();
                for (int i = 0; i < e.getValue()[1]; i++) replicas.add(i);
                for (int p = 0; p < e.getValue()[0]; p++) current.put(tp.newInstance(e.getKey(), p), replicas);
            }
            List<Object> list = new ArrayList<>();
            for (Object[] b : brokers) list.add(broker(b));
            random.setSeed(seed);
            Map<Object, List<Integer>> proposed = (Map<Object, List<Integer>>) calculate.invoke(null, current, list);
            Map<String, Map<Integer, List<Integer>>> byTopic = new LinkedHashMap<>();
            for (String t : order) byTopic.put(t, new TreeMap<>());
            for (Map.Entry<Object, List<Integer>> e : proposed.entrySet())
                byTopic.get((String) topicOf.invoke(e.getKey())).put((Integer) partitionOf.invoke(e.getKey()), e.getValue());
            return byTopic;
        }
    }
}
