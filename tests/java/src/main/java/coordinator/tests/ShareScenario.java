package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share consumers (KafkaShareConsumer, explicit acknowledgement) of one share group: they poll
 * for warmup_ms (joining, their share-partitions starting at the log end), then the scenario
 * produces `records` records round-robin over `partitions` partitions, and every consumer accepts
 * what it gets (RELEASE once for values in `release_once`) and commits, until every record was
 * accepted or timeout_ms passed. With `records` 0 nothing is produced and the consumers poll
 * for `warmup_ms` only. Answers each delivery as [consumer, value, delivery count].
 */
final class ShareScenario {
    private ShareScenario() {}

    static ObjectNode run(JsonNode request) throws Exception {
        String bootstrap = request.path("bootstrap").asText();
        String topic = request.path("topic").asText();
        String group = request.path("group").asText();
        int consumers = request.path("consumers").asInt(1);
        int partitions = request.path("partitions").asInt(1);
        int records = request.path("records").asInt(0);
        long warmupMs = request.path("warmup_ms").asLong(3000);
        long timeoutMs = request.path("timeout_ms").asLong(60000);
        List<String> releaseOnce = new ArrayList<>();
        request.path("release_once").forEach(v -> releaseOnce.add(v.asText()));
        ConcurrentLinkedQueue<Object[]> deliveries = new ConcurrentLinkedQueue<>();
        AtomicInteger accepted = new AtomicInteger();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        long start = System.currentTimeMillis();
        List<Thread> threads = new ArrayList<>();
        for (int n = 0; n < consumers; n++) {
            final int id = n;
            Thread thread = new Thread(() -> {
                Properties config = new Properties();
                config.put("bootstrap.servers", bootstrap);
                config.put("group.id", group);
                config.put("share.acknowledgement.mode", "explicit");
                config.put("key.deserializer", StringDeserializer.class.getName());
                config.put("value.deserializer", StringDeserializer.class.getName());
                try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(config)) {
                    consumer.subscribe(List.of(topic));
                    while ((accepted.get() < records || (records == 0 && System.currentTimeMillis() - start < warmupMs))
                            && System.currentTimeMillis() - start < timeoutMs + warmupMs) {
                        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                            int count = record.deliveryCount().map(Short::intValue).orElse(-1);
                            deliveries.add(new Object[] {id, record.value(), count});
                            if (count == 1 && releaseOnce.contains(record.value())) {
                                consumer.acknowledge(record, AcknowledgeType.RELEASE);
                            } else {
                                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                                accepted.incrementAndGet();
                            }
                        }
                        consumer.commitSync();
                    }
                } catch (Throwable failure) {
                    failures.add(failure);
                }
            });
            thread.start();
            threads.add(thread);
        }
        Thread.sleep(warmupMs);
        if (records == 0) {
            for (Thread thread : threads) {
                thread.join();
            }
            return answerOf(deliveries, failures);
        }
        Properties producing = new Properties();
        producing.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producing.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producing.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producing)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, "r" + i));
                if (i % 20 == 19) {
                    producer.flush();
                }
            }
            producer.flush();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        return answerOf(deliveries, failures);
    }

    private static ObjectNode answerOf(ConcurrentLinkedQueue<Object[]> deliveries, ConcurrentLinkedQueue<Throwable> failures) {
        if (!failures.isEmpty()) {
            throw new RuntimeException(failures.peek());
        }
        ObjectNode answer = Driver.JSON.createObjectNode();
        ArrayNode list = answer.putArray("deliveries");
        for (Object[] d : deliveries) {
            ArrayNode row = list.addArray();
            row.add((Integer) d[0]);
            row.add((String) d[1]);
            row.add((Integer) d[2]);
        }
        return answer;
    }
}
