package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringSerializer;

/** Creates a topic (if missing) and writes the same number of records to each of its partitions. */
final class Producing {
    private Producing() {}

    static ObjectNode run(JsonNode request) throws Exception {
        String bootstrap = request.path("bootstrap").asText();
        String topic = request.path("topic").asText();
        int partitions = request.path("partitions").asInt(1);
        int perPartition = request.path("per_partition").asInt(0);
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
        }
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            for (int partition = 0; partition < partitions; partition++) {
                for (int i = 0; i < perPartition; i++) {
                    sent.add(producer.send(
                            new ProducerRecord<>(topic, partition, "k" + i, topic + "-" + partition + "-" + i)));
                }
            }
            producer.flush();
            // A record that failed fails the produce step, not a consumer later waiting for it.
            for (Future<RecordMetadata> future : sent) {
                future.get();
            }
        }
        ObjectNode answer = Driver.JSON.createObjectNode();
        answer.put("records", partitions * perPartition);
        return answer;
    }
}
