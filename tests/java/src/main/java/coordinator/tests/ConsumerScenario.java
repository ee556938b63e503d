package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Several KafkaConsumers of one group, each on its own thread, until the group is stable (every
 * partition owned by exactly one member, nothing moved for a while, every record seen); then each
 * commits and reports its assignment, generation and committed offsets. A static member can be
 * bounced (closed without leaving, started again with the same group.instance.id) and the group
 * reported again.
 */
final class ConsumerScenario {
    private ConsumerScenario() {}

    /** Members left running by a scenario with "hold" (until a "release" with the same name). */
    private static final Map<String, List<Member>> HELD = new ConcurrentHashMap<>();

    /** One consumer on its own thread; other threads talk to it through a command queue. */
    static final class Member implements Runnable {
        final JsonNode spec;
        final Properties config;
        final Set<String> seen;
        volatile Set<String> assignment = Set.of();
        volatile long changedAt = System.nanoTime();
        volatile long polls = 0;
        volatile Throwable failure;
        volatile boolean stop;
        final ConcurrentLinkedQueue<CompletableFuture<ObjectNode>> reports = new ConcurrentLinkedQueue<>();
        final Thread thread;
        final List<String> topics;

        Member(JsonNode spec, Properties config, List<String> topics, Set<String> seen) {
            this.spec = spec;
            this.config = config;
            this.topics = topics;
            this.seen = seen;
            this.thread = new Thread(this, "member-" + spec.path("client_id").asText());
        }

        @Override
        public void run() {
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
                consumer.subscribe(topics);
                while (!stop) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                        seen.add(record.topic() + "-" + record.partition() + "@" + record.offset());
                    }
                    Set<String> now = new TreeSet<>();
                    for (TopicPartition tp : consumer.assignment()) {
                        now.add(tp.toString());
                    }
                    if (!now.equals(assignment)) {
                        assignment = now;
                        changedAt = System.nanoTime();
                    }
                    polls++;
                    CompletableFuture<ObjectNode> report;
                    while ((report = reports.poll()) != null) {
                        report.complete(report(consumer));
                    }
                }
            } catch (Throwable t) {
                failure = t;
                CompletableFuture<ObjectNode> report;
                while ((report = reports.poll()) != null) {
                    report.completeExceptionally(t);
                }
            }
        }

        private ObjectNode report(KafkaConsumer<String, String> consumer) {
            consumer.commitSync(Duration.ofSeconds(30));
            ObjectNode out = Driver.JSON.createObjectNode();
            out.put("client_id", spec.path("client_id").asText());
            if (spec.hasNonNull("instance_id")) {
                out.put("instance_id", spec.path("instance_id").asText());
            }
            out.put("member_id", consumer.groupMetadata().memberId());
            out.put("generation", consumer.groupMetadata().generationId());
            ArrayNode owned = out.putArray("assignment");
            Set<TopicPartition> partitions = consumer.assignment();
            new TreeSet<>(assignment).forEach(owned::add);
            ObjectNode committed = out.putObject("committed");
            Map<String, Long> sorted = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry :
                    consumer.committed(partitions, Duration.ofSeconds(30)).entrySet()) {
                if (entry.getValue() != null) {
                    sorted.put(entry.getKey().toString(), entry.getValue().offset());
                }
            }
            sorted.forEach(committed::put);
            return out;
        }
    }

    static ObjectNode run(JsonNode request) throws Exception {
        List<String> topics = new ArrayList<>();
        request.path("topics").forEach(t -> topics.add(t.asText()));
        int partitions = request.path("partitions").asInt();
        long expected = request.path("records").asLong(0);
        long timeoutMs = request.path("timeout_ms").asLong(90_000);
        long stableMs = request.path("stable_ms").asLong(1500);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<Member> members = new ArrayList<>();
        for (JsonNode spec : request.path("members")) {
            members.add(new Member(spec, config(request, spec), topics, seen));
        }
        ObjectNode answer = Driver.JSON.createObjectNode();
        ArrayNode rounds = answer.putArray("rounds");
        String hold = request.path("hold").asText("");
        boolean held = false;
        try {
            members.forEach(m -> m.thread.start());
            rounds.add(round(members, partitions, expected, seen, timeoutMs, stableMs));
            if (request.has("bounce")) {
                int index = request.path("bounce").asInt();
                Member old = members.get(index);
                old.stop = true;
                old.thread.join(60_000);
                Member again = new Member(old.spec, config(request, old.spec), topics, seen);
                members.set(index, again);
                again.thread.start();
                rounds.add(round(members, partitions, expected, seen, timeoutMs, stableMs));
            }
            if (!hold.isEmpty()) {
                HELD.put(hold, members);
                held = true;
            }
        } finally {
            if (!held) {
                stop(members);
            }
        }
        answer.put("records", seen.size());
        return answer;
    }

    /** Stops (and closes) the members a scenario held. */
    static ObjectNode release(JsonNode request) throws InterruptedException {
        List<Member> members = HELD.remove(request.path("hold").asText());
        if (members == null) {
            throw new IllegalArgumentException("nothing held as " + request.path("hold").asText());
        }
        stop(members);
        return Driver.JSON.createObjectNode();
    }

    private static void stop(List<Member> members) throws InterruptedException {
        for (Member member : members) {
            member.stop = true;
        }
        for (Member member : members) {
            member.thread.join(60_000);
        }
    }

    private static Properties config(JsonNode request, JsonNode spec) {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, request.path("bootstrap").asText());
        config.put(ConsumerConfig.GROUP_ID_CONFIG, request.path("group").asText());
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, spec.path("client_id").asText());
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        String protocol = request.path("protocol").asText("classic");
        config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        String assignor = request.path("assignor").asText("");
        if (protocol.equals("classic")) {
            config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, request.path("session_timeout_ms").asText("10000"));
            config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            if (assignor.equals("cooperative-sticky")) {
                config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            } else if (assignor.equals("range")) {
                config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                        "org.apache.kafka.clients.consumer.RangeAssignor");
            }
        } else if (!assignor.isEmpty()) {
            config.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        if (spec.hasNonNull("instance_id")) {
            config.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, spec.path("instance_id").asText());
        }
        return config;
    }

    /**
     * Waits for a stable group, then has every member commit and report. The wait fails once
     * nothing moved (no record seen, no assignment changed) for timeoutMs, or after twice that
     * in all: on a loaded machine a group that keeps progressing is given the time it needs.
     */
    private static ObjectNode round(List<Member> members, int partitions, long expected, Set<String> seen,
            long timeoutMs, long stableMs) throws Exception {
        long started = System.nanoTime();
        long patience = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        long movedAt = started;
        String progress = progress(members, seen);
        while (!stable(members, partitions, expected, seen, stableMs)) {
            for (Member member : members) {
                if (member.failure != null) {
                    throw new IllegalStateException("member " + member.spec + " failed", member.failure);
                }
            }
            long now = System.nanoTime();
            String current = progress(members, seen);
            if (!current.equals(progress)) {
                progress = current;
                movedAt = now;
            }
            if (now - movedAt > patience || now - started > 2 * patience) {
                throw new TimeoutException("group not stable after " + TimeUnit.NANOSECONDS.toSeconds(now - started)
                        + " s (last change " + TimeUnit.NANOSECONDS.toSeconds(now - movedAt) + " s ago): "
                        + describe(members, seen) + "records " + seen.size() + "/" + expected);
            }
            Thread.sleep(100);
        }
        ObjectNode round = Driver.JSON.createObjectNode();
        ArrayNode reported = round.putArray("members");
        List<CompletableFuture<ObjectNode>> futures = new ArrayList<>();
        for (Member member : members) {
            CompletableFuture<ObjectNode> report = new CompletableFuture<>();
            member.reports.add(report);
            futures.add(report);
        }
        for (CompletableFuture<ObjectNode> report : futures) {
            reported.add(report.get(60, TimeUnit.SECONDS));
        }
        return round;
    }

    /** What changes while a group makes progress: the records seen and every member's assignment. */
    private static String progress(List<Member> members, Set<String> seen) {
        StringBuilder out = new StringBuilder().append(seen.size());
        for (Member member : members) {
            out.append(' ').append(member.assignment);
        }
        return out.toString();
    }

    /** Each member's assignment, polls and the records seen of each of its partitions. */
    private static String describe(List<Member> members, Set<String> seen) {
        Map<String, Integer> perPartition = new TreeMap<>();
        for (String record : seen) {
            perPartition.merge(record.substring(0, record.lastIndexOf('@')), 1, Integer::sum);
        }
        StringBuilder state = new StringBuilder();
        for (Member member : members) {
            state.append(member.spec.path("client_id").asText()).append('=').append(member.assignment)
                    .append(" polls ").append(member.polls).append(", ");
        }
        return state.append("seen per partition ").append(perPartition).append(", ").toString();
    }

    private static boolean stable(List<Member> members, int partitions, long expected, Set<String> seen, long stableMs) {
        Set<String> owned = new HashSet<>();
        int total = 0;
        long now = System.nanoTime();
        for (Member member : members) {
            if (member.polls == 0 || now - member.changedAt < TimeUnit.MILLISECONDS.toNanos(stableMs)) {
                return false;
            }
            owned.addAll(member.assignment);
            total += member.assignment.size();
        }
        return owned.size() == partitions && total == partitions && seen.size() >= expected;
    }
}
