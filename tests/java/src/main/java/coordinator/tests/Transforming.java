package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Consume-transform-produce, exactly once: each poll's records are transformed ("out-" + value)
 * and produced in one transaction that also commits the input offsets (sendOffsetsToTransaction),
 * until ``expected`` input records were processed or ``timeout_ms`` passed.
 */
final class Transforming {
    private Transforming() {}

    static ObjectNode run(JsonNode request) throws InterruptedException {
        String bootstrap = request.path("bootstrap").asText();
        String input = request.path("input").asText();
        String output = request.path("output").asText();
        String group = request.path("group").asText();
        String transactionalId = request.path("transactional_id").asText();
        int expected = request.path("expected").asInt();
        long deadline = System.currentTimeMillis() + request.path("timeout_ms").asLong(60000);
        // Held between sendOffsetsToTransaction and commitTransaction (a test kills the JVM there).
        long pauseMs = request.path("pause_ms").asLong(0);

        Properties consumerConfig = new Properties();
        consumerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerConfig.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, request.path("group_protocol").asText("consumer"));
        consumerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfig.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerConfig.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (request.has("session_timeout_ms")) {
            consumerConfig.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, request.path("session_timeout_ms").asText());
        }
        consumerConfig.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerConfig.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties producerConfig = new Properties();
        producerConfig.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerConfig.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        producerConfig.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerConfig.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        int processed = 0;
        int transactions = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig);
                KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            while (processed < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    producer.send(new ProducerRecord<>(output, record.key(), "out-" + record.value()));
                    offsets.put(
                            new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (pauseMs > 0) {
                    Thread.sleep(pauseMs);
                }
                producer.commitTransaction();
                processed += records.count();
                transactions++;
            }
        }
        ObjectNode answer = Driver.JSON.createObjectNode();
        answer.put("processed", processed);
        answer.put("transactions", transactions);
        return answer;
    }
}
